"""The documents versions store: an environment spec with the task format's defaults, and a task document
built from an editor's content, validated, made storable and hashed (no writes here)."""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

from django.conf import settings

from authoring.models import EnvironmentVersion
from authoring.services.blobs import _check_blobs_exist
from grading.engine import TASK_SCHEMA, canonical_json_exact, validate_task
from grading.engine.models import Environment as EngineEnvironment
from gymwright.egress_setting import NETWORK_ON, egress_refusal
from gymwright.errors import DomainError
from gymwright.storable_input import json_text_storable, nul_check
from gymwright.text import unix_newlines

ENVIRONMENT_KEYS = (
    "image",
    "dockerfile",
    "setup",
    "network",
    "limits",
    "tools",
    "custom_tools",
    "files",
    "checks_module",
)


# An environment spec with the task format's defaults (grading.engine.models.Environment and Limits).
_FORMAT_ENVIRONMENT = EngineEnvironment()


DEFAULT_ENVIRONMENT_SPEC: dict[str, Any] = {
    "image": None,
    "dockerfile": None,
    "setup": None,
    "network": _FORMAT_ENVIRONMENT.network,
    "limits": _FORMAT_ENVIRONMENT.limits.model_dump(exclude_none=True),
    "tools": list(_FORMAT_ENVIRONMENT.tools),
    "custom_tools": [],
    "files": [],
    "checks_module": None,
}


def _issues_to_error(issues, *, prefix_from: str = "", prefix_to: str = "", message: str) -> DomainError:
    details = []
    for issue in issues:
        pointer = issue.pointer
        if prefix_from and pointer.startswith(prefix_from):
            pointer = prefix_to + pointer[len(prefix_from) :]
        details.append({"pointer": pointer, "message": issue.message})
    summary = "; ".join(f"{d['pointer'] or '/'}: {d['message']}" for d in details[:3])
    return DomainError(f"{message}: {summary}", details=details)


# Environment limit -> (setting holding its ceiling, that setting's environment variable, unit shown).
_LIMIT_CEILINGS = {
    "memory_mb": ("SANDBOX_MAX_MEMORY_MB", "GYMWRIGHT_MAX_MEMORY_MB", "MB"),
    "pids": ("SANDBOX_MAX_PIDS", "GYMWRIGHT_MAX_PIDS", "processes"),
    "workspace_mb": ("SANDBOX_MAX_DISK_MB", "GYMWRIGHT_MAX_DISK_MB", "MB"),
    "tmp_mb": ("SANDBOX_MAX_DISK_MB", "GYMWRIGHT_MAX_DISK_MB", "MB"),
    "output_cap_bytes": ("SANDBOX_MAX_OUTPUT_CAP_BYTES", "GYMWRIGHT_MAX_OUTPUT_CAP_MB", "bytes"),
    "timeout_s": ("SANDBOX_MAX_TIMEOUT_S", "GYMWRIGHT_MAX_TIMEOUT_S", "s"),
    "exec_timeout_s": ("SANDBOX_MAX_TIMEOUT_S", "GYMWRIGHT_MAX_TIMEOUT_S", "s"),
}


def environment_limits_check(spec: dict, *, pointer_prefix: str = "") -> None:
    """DomainError naming each limit of an environment spec that is over this server's ceiling."""
    limits = spec.get("limits") or {}
    details = []
    for key, (setting, variable, unit) in _LIMIT_CEILINGS.items():
        value = limits.get(key)
        ceiling = getattr(settings, setting)
        if isinstance(value, (int, float)) and value > ceiling:
            details.append(
                {
                    "pointer": f"{pointer_prefix}/limits/{key}",
                    "message": f"{key} {value:g} {unit} is over this server's ceiling of {ceiling:g} {unit} "
                    f"({variable})",
                }
            )
    if details:
        summary = "; ".join(f"{d['pointer']}: {d['message']}" for d in details[:3])
        raise DomainError(f"Limits over the server's ceilings: {summary}", code="over_ceiling", details=details)


def environment_spec_validate(spec: dict) -> dict:
    """The spec with defaults filled in, or DomainError with pointers into the spec."""
    if not isinstance(spec, dict):
        raise DomainError(
            "The environment spec must be a JSON object.", details=[{"pointer": "", "message": "expected an object"}]
        )
    full = {**DEFAULT_ENVIRONMENT_SPEC, **spec}
    # A setup script or Dockerfile typed in the browser arrives with CRLF, and bash reads "\r" as
    # part of each command.
    for key in _ENVIRONMENT_TEXT_KEYS:
        if key in full:
            full[key] = unix_newlines(full[key])
    document = _task_document(
        slug="environment-check",
        number=1,
        title="x",
        prompt="x",
        environment_id="environment-check",
        environment_number=1,
        environment_spec=full,
        files=[],
        solution={"script": None, "answer": None},
        rubric={
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "c", "kind": "string_match", "points": 1, "expected": "x"}],
        },
        tags=[],
        metadata={},
    )
    issues = [issue for issue in validate_task(document) if issue.pointer.startswith("/environment")]
    if issues:
        raise _issues_to_error(issues, prefix_from="/environment", prefix_to="", message="Invalid environment")
    environment_limits_check(full)
    nul_check(full, what="The environment")
    _check_blobs_exist(full.get("files") or [], "/files")
    if full.get("network") in NETWORK_ON:
        reason = egress_refusal()
        if reason:
            raise DomainError(
                f"Invalid environment: /network: {reason}.", details=[{"pointer": "/network", "message": reason}]
            )
    return full


def _task_document(
    *,
    slug,
    number,
    title,
    prompt,
    environment_id,
    environment_number,
    environment_spec,
    files,
    solution,
    rubric,
    tags,
    metadata,
    examples=None,
) -> dict:
    document = {
        "schema": TASK_SCHEMA,
        "id": slug,
        "version": number,
        "title": title,
        "prompt": prompt,
        "environment": {"id": environment_id, "version": environment_number, **environment_spec},
        "files": files,
        "solution": solution,
        "rubric": rubric,
        "tags": tags,
        "metadata": metadata,
    }
    # Only when there are some: a task without example answers keeps the document (and sha256) it
    # had before they existed.
    if examples:
        document["examples"] = examples
    return document


CONTENT_KEYS = ("title", "prompt", "rubric", "solution", "files", "tags", "metadata", "examples")


_ENVIRONMENT_TEXT_KEYS = ("setup", "dockerfile", "checks_module")


# Free-text keys of a rubric check that authors type in multi-line boxes (criterion, reference
# answer, python code, shell command). Patterns and expected values are left exactly as written.
_RUBRIC_TEXT_KEYS = ("criterion", "reference", "code", "run", "title")


def _rubric_unix_newlines(rubric):
    if not isinstance(rubric, dict) or not isinstance(rubric.get("checks"), list):
        return rubric
    return {**rubric, "checks": [_check_unix_newlines(check) for check in rubric["checks"]]}


# Module-level, not a closure in _rubric_unix_newlines: a recursive closure holds itself through its cell, a
# reference cycle per call that only the cyclic garbage collector frees (an import calls it once per task).
def _check_unix_newlines(check):
    if not isinstance(check, dict):
        return check
    check = {key: unix_newlines(value) if key in _RUBRIC_TEXT_KEYS else value for key, value in check.items()}
    if isinstance(check.get("checks"), list):
        check["checks"] = [_check_unix_newlines(child) for child in check["checks"]]
    return check


def _task_content_defaults(content: dict) -> dict:
    unknown = sorted(set(content) - set(CONTENT_KEYS) - {"environment_version"})
    if unknown:
        raise DomainError(
            f"Unknown field {unknown[0]!r}.",
            details=[{"pointer": f"/{k}", "message": "unknown field"} for k in unknown],
        )
    solution = content.get("solution") or {}
    if isinstance(solution, dict):
        solution = {
            "script": unix_newlines(solution.get("script")) or None,
            "answer": unix_newlines(solution.get("answer")) or None,
            **{k: v for k, v in solution.items() if k not in ("script", "answer")},
        }
    tags = content.get("tags") or []
    if isinstance(tags, list):
        tags = sorted({str(t).strip().lower() for t in tags if str(t).strip()})
    return {
        "title": content.get("title", ""),
        "prompt": unix_newlines(content.get("prompt", "")),
        "rubric": _rubric_unix_newlines(content.get("rubric")),
        "solution": solution,
        "files": content.get("files") or [],
        "tags": tags,
        "metadata": content.get("metadata") or {},
        "examples": content.get("examples") or None,
    }


def _build_task_document(
    *,
    task_slug: str,
    number: int,
    environment_version: EnvironmentVersion,
    content: dict,
    known_blobs: set[str] | None = None,
    check_files: bool = True,
) -> tuple[dict, _Hashes]:
    """The task document for `content`, validated and storable, with its hashes; with `check_files`,
    each attached file's blob must exist (looked up unless `known_blobs` has it)."""
    content = _task_content_defaults(content)
    document = _task_document(
        slug=task_slug,
        number=number,
        title=content["title"],
        prompt=content["prompt"],
        environment_id=environment_version.environment.slug,
        environment_number=environment_version.number,
        environment_spec=environment_version.spec,
        files=content["files"],
        solution=content["solution"],
        rubric=content["rubric"],
        tags=content["tags"],
        metadata=content["metadata"],
        examples=content["examples"],
    )
    issues = validate_task(document)
    if issues:
        raise _issues_to_error(issues, message="Invalid task")
    if not str(content["title"]).strip():
        raise DomainError("A title is required.", details=[{"pointer": "/title", "message": "required"}])
    hashes = _document_hashes(document)
    if check_files and isinstance(content["files"], list):
        _check_blobs_exist(content["files"], "/files", known=known_blobs)
    return document, hashes


class _Hashes(NamedTuple):
    sha256: str
    content_sha256: str
    # The document's canonical JSON when it is the document itself (no 1.0 became 1): an import
    # stores it as it is instead of serialising the document once more.
    text: str | None


def _document_hashes(document: dict) -> _Hashes:
    """The hashes of a task document, from one canonical serialisation, which also refuses a NUL or a
    lone surrogate anywhere in it (with the pointer to it).

    Keys are sorted in canonical JSON and every other top-level key of a task document sorts
    before "version", so the full text is the text without the version, closed with it. (A
    document where that does not hold is serialised twice.)"""
    version = document.get("version")
    rest = {k: v for k, v in document.items() if k != "version"}
    text, exact = canonical_json_exact(rest)
    if not json_text_storable(text):
        nul_check(document, what="The task")  # raises, saying where; else a false alarm
    content_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if type(version) is not int or (rest and max(rest) > "version"):
        full, exact = canonical_json_exact(document)
    else:
        full = text[:-1] + ("," if rest else "") + f'"version":{version}}}'
    return _Hashes(hashlib.sha256(full.encode("utf-8")).hexdigest(), content_hash, full if exact else None)
