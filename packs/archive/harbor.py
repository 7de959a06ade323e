"""A task's Harbor folder (tasks/<id>/): task.toml, the agent's and the verifier's images, the instruction,
the reference solution, and the files every folder shares (the verifier's grader and scripts)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from grading.engine import canonical_json
from grading.engine.models import has_judge_checks

from .info import BUNDLE_DIR, PackError, PackInfo, sha256_hex


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _toml_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(_toml_string(v) for v in values) + "]"


# What the bundled grader reads to reach a judge (grading.engine.JudgeConfig.from_env). A task with judge
# checks names them in [verifier.env] as Harbor templates, resolved from the host's environment when the
# verifier runs (empty when unset: then the judge checks are unscored); a value is never written.
JUDGE_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "GYMWRIGHT_JUDGE_MODEL", "GYMWRIGHT_JUDGE_MAX_CHARS")


def harbor_task_toml(document: dict, *, info: PackInfo, difficulty: str, sha256: str) -> str:
    """Harbor's task.toml (schema 1.4, as `harbor init` writes it) with a separate verifier that
    receives the agent's /workspace as an artifact, so grading never shares the agent's sandbox.
    A task with judge checks passes the judge settings to the verifier by name and lets the verifier
    (not the agent) reach the network."""
    environment = document.get("environment") or {}
    limits = environment.get("limits") or {}
    timeout = float(limits.get("timeout_s") or 600)
    network = "no-network" if (environment.get("network") or "none") == "none" else "public"
    judged = has_judge_checks(document.get("rubric") or {})
    verifier = [
        "[verifier]",
        f"timeout_sec = {max(120.0, min(timeout, 3600.0))}",
        'environment_mode = "separate"',
    ]
    if judged and network == "no-network":
        verifier.append('network_mode = "public"')  # the judge's endpoint; the agent's phase keeps none
    if judged:
        verifier += ["", "[verifier.env]"] + [f'{name} = "${{{name}:-}}"' for name in JUDGE_ENV]
    lines = [
        'schema_version = "1.4"',
        'artifacts = ["/workspace"]',
        "",
        "[task]",
        f"name = {_toml_string('gymwright/' + document['id'])}",
        f"version = {_toml_string(str(int(document.get('version') or 1)) + '.0.0')}",
        f"description = {_toml_string(document.get('title') or document['id'])}",
        "authors = []",
        f"keywords = {_toml_list(document.get('tags') or [])}",
        "",
        "[metadata]",
        f"difficulty = {_toml_string(difficulty)}",
        f"category = {_toml_string(environment.get('id') or 'default')}",
        f"gymwright_task_id = {_toml_string(document['id'])}",
        f"gymwright_task_version = {int(document.get('version') or 1)}",
        f"gymwright_task_sha256 = {_toml_string(sha256)}",
        f"gymwright_pack = {_toml_string(info.slug + ' ' + info.version)}",
        "",
        *verifier,
        "",
        "[agent]",
        f"timeout_sec = {timeout}",
        "",
        "[environment]",
        f'network_mode = "{network}"',
        "build_timeout_sec = 600.0",
        f"cpus = {int(max(1, round(float(limits.get('cpus') or 1))))}",
        f"memory_mb = {int(limits.get('memory_mb') or 2048)}",
        'os = "linux"',
        "",
    ]
    return "\n".join(lines)


VERIFIER_DOCKERFILE = """FROM python:3.12-slim
# The verifier's own image: the pack's grader and its dependencies, baked in (no downloads at trial time).
COPY . /tests/
RUN pip install --no-cache-dir -r /tests/requirements.txt
WORKDIR /workspace
"""


SETUP_SCRIPT = "/tmp/gymwright-setup.sh"


def harbor_dockerfile(document: dict, *, has_workspace_files: bool, has_env_files: bool) -> str:
    """The agent's image: the environment's image or Dockerfile, its files (/env, /workspace), then its
    setup script (environment/setup.sh), run whole by /bin/sh in /workspace as the sandbox runs it: a
    script's comments, loops and continued lines mean what they mean there."""
    environment = document.get("environment") or {}
    if environment.get("dockerfile"):
        head = environment["dockerfile"].rstrip("\n")
    else:
        head = f"FROM {environment.get('image') or 'python:3.12-slim'}"
    lines = [head, "WORKDIR /workspace"]
    if has_env_files:
        lines.append("COPY env/ /env/")
    if has_workspace_files:
        lines.append("COPY workspace/ /workspace/")
    if environment.get("setup"):
        lines += [f"COPY setup.sh {SETUP_SCRIPT}", f"RUN /bin/sh {SETUP_SCRIPT} && rm -f {SETUP_SCRIPT}"]
    return "\n".join(lines) + "\n"


def harbor_instruction(document: dict) -> str:
    """The prompt, where to work and answer, and the environment's custom tools, which Gymwright's
    harness offers as tools and a Harbor agent calls from its shell."""
    prompt = document.get("prompt") or ""
    text = (
        prompt.rstrip("\n") + "\n\n---\n\nWork in `/workspace`. When you are done, write your final answer "
        "to `/workspace/answer.txt`.\n"
    )
    tools = (document.get("environment") or {}).get("custom_tools") or []
    if tools:
        text += (
            "\nThis environment has these tools. Call one by running its command with the call's arguments "
            "as a JSON object on standard input; its standard output is the result.\n\n"
        )
        for tool in tools:
            text += (
                f"- `{tool['name']}`: {(tool.get('description') or '').strip() or 'no description'}\n"
                f"  - command: `{tool['command']}`\n"
                f"  - arguments (JSON Schema): `{canonical_json(tool.get('parameters') or {})}`\n"
            )
    return text


def harbor_solve(document: dict) -> str:
    solution = document.get("solution") or {}
    lines = ["#!/bin/bash", "# The task's reference solution.", "set -euo pipefail", "cd /workspace"]
    if solution.get("script"):
        lines.append(solution["script"])
    if solution.get("answer") is not None:
        lines.append("cat > /workspace/answer.txt <<'GYMWRIGHT_ANSWER_EOF'")
        lines.append(solution["answer"])
        lines.append("GYMWRIGHT_ANSWER_EOF")
    return "\n".join(lines) + "\n"


def task_files(document: dict) -> Iterator[tuple[str, str, str, str]]:
    """(where, path, sha256, role) for every file a task names; where is 'task' or 'env'."""
    for entry in (document.get("environment") or {}).get("files") or []:
        yield "env", entry["path"], entry["sha256"], entry.get("role") or "workspace"
    for entry in document.get("files") or []:
        yield "task", entry["path"], entry["sha256"], entry.get("role") or "workspace"


class SharedFiles:
    """The bytes every Harbor task folder carries, with their digests computed once."""

    def __init__(self, requirements: bytes, grader_pyz: bytes):
        self.files = {
            "tests/Dockerfile": VERIFIER_DOCKERFILE.encode(),
            "tests/grade.py": (BUNDLE_DIR / "harbor_grade.py").read_bytes(),
            "tests/grader.pyz": grader_pyz,
            "tests/requirements.txt": requirements,
            "tests/test.sh": (BUNDLE_DIR / "test.sh").read_bytes(),
        }
        self.digests = {name: sha256_hex(data) for name, data in self.files.items()}
        self.executable = {"tests/test.sh"}
        # where each shared file is stored once: the grader's own copies, else the first task's
        self.first = {"tests/grader.pyz": "grader/grader.pyz", "tests/requirements.txt": "grader/requirements.txt"}


def harbor_files(
    document: dict,
    *,
    sha256_of_task: str,
    info: PackInfo,
    difficulty: str,
    read_blob,
    task_json: bytes,
    rubric_json: bytes,
) -> list[tuple[str, bytes, bool, str | None]]:
    """A task's own Harbor files as (path in the pack, bytes, executable, sha256 when already known).
    `task_json` is the task's canonical JSON (tests/task.json), `rubric_json` its rubric.json."""
    base = f"tasks/{document['id']}"
    files: list[tuple[str, bytes, bool, str | None]] = []
    has_env = has_workspace = False
    for where, path, sha256, role in task_files(document):
        data = read_blob(sha256)
        if sha256_hex(data) != sha256:
            raise PackError(f"task {document['id']}: file {path!r} does not match its sha256")
        if where == "env":
            # Under /env in the verifier too (its own image), for the checks; a grader-role one only there.
            files.append((f"{base}/tests/env-files/{path}", data, False, sha256))
            if role != "grader":
                files.append((f"{base}/environment/env/{path}", data, False, sha256))
                has_env = True
            continue
        files.append((f"{base}/files/{path}", data, False, sha256))
        if role in ("grader", "protected"):
            # Restored by the verifier after the episode (protected ones over the agent's copy).
            files.append((f"{base}/tests/grader-files/{path}", data, False, sha256))
        if role != "grader":
            files.append((f"{base}/environment/workspace/{path}", data, False, sha256))
            has_workspace = True
    files += [
        (f"{base}/instruction.md", harbor_instruction(document).encode("utf-8"), False, None),
        (
            f"{base}/task.toml",
            harbor_task_toml(document, info=info, difficulty=difficulty, sha256=sha256_of_task).encode("utf-8"),
            False,
            None,
        ),
        (
            f"{base}/environment/Dockerfile",
            harbor_dockerfile(document, has_workspace_files=has_workspace, has_env_files=has_env).encode(),
            False,
            None,
        ),
        (f"{base}/solution/solve.sh", harbor_solve(document).encode("utf-8"), True, None),
        *(
            [(f"{base}/environment/setup.sh", document["environment"]["setup"].encode("utf-8"), False, None)]
            if (document.get("environment") or {}).get("setup")
            else []
        ),
        (f"{base}/rubric.json", rubric_json, False, None),
        (f"{base}/tests/task.json", task_json, False, None),
    ]
    return files
