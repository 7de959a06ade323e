"""A task's Harbor folder (tasks/<id>/): task.toml, the agent's and the verifier's images, the instruction,
the reference solution, and the files every folder shares (the verifier's grader and scripts)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from json.encoder import encode_basestring as _json_string  # ensure_ascii=False's string encoder (C)

from grading.engine import canonical_json
from grading.engine.models import has_judge_checks
from sandbox.runtime.scripts import interpreter_command
from sandbox.runtime.spec import dockerfile_workdir

from .info import BUNDLE_DIR, PackError, PackInfo, sha256_hex


def _toml_string(value: str) -> str:
    # A JSON string is a valid TOML basic string. For a str, json.dumps(value, ensure_ascii=False) is the C
    # string encoder's text, without a JSONEncoder made per call (nine a task.toml).
    if type(value) is str:
        return _json_string(value)
    return json.dumps(value, ensure_ascii=False)


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
    setup script (environment/setup.sh), run whole in /workspace as the sandbox runs it, as written (its #!
    line, else bash, else sh: sandbox.runtime.scripts): a script's comments, loops and continued lines mean
    what they mean there."""
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
        lines += [
            f"COPY setup.sh {SETUP_SCRIPT}",
            f"RUN {interpreter_command(environment['setup'], SETUP_SCRIPT)} && rm -f {SETUP_SCRIPT}",
        ]
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
    origin = harbor_origin(document)
    if origin is not None:
        return _harbor_origin_files(
            document, origin=origin, base=base, read_blob=read_blob, task_json=task_json, rubric_json=rubric_json
        )
    files: list[tuple[str, bytes, bool, str | None]] = []
    has_env = has_workspace = False
    for where, path, sha256, role in task_files(document):
        data = read_blob(sha256)
        if sha256_hex(data) != sha256:
            raise PackError(f"task {document['id']}: file {path!r} does not match its sha256")
        if where == "env" and role == "build":  # the Dockerfile's build context, beside it
            files.append((f"{base}/environment/{path}", data, data[:2] == b"#!", sha256))
            continue
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


# ---------------------------------------------------------------- a task that came in as Harbor

# Where an imported Harbor task keeps its tests (packs.importer: grader files), and where the export puts
# Gymwright's own grader beside them.
HARBOR_TESTS = ".harbor/tests/"
HARBOR_TESTS_LIST = ".harbor/tests.list"
HARBOR_SOLUTION = ".harbor/solution/"
GYMWRIGHT_TESTS = "tests/gymwright/"


def harbor_origin(document: dict) -> dict | None:
    """The Harbor settings an imported Harbor task came with (`metadata.harbor`: task.toml's text and parsed
    form), when it came in as Harbor and still has its tests; None for any other task."""
    metadata = document.get("metadata") or {}
    harbor = metadata.get("harbor") if isinstance(metadata, dict) else None
    if not (
        isinstance(harbor, dict)
        and metadata.get("source") == "harbor"
        and isinstance(harbor.get("task_toml"), str)
        and isinstance(harbor.get("config"), dict)
    ):
        return None
    if not any(entry.get("path") == HARBOR_TESTS + "test.sh" for entry in document.get("files") or []):
        return None
    return harbor


def shared_file_path(document: dict, name: str) -> str:
    """Where a file every task folder shares (`SharedFiles`, "tests/...") goes in this task's folder: beside
    the task's own tests of one that came in as Harbor, so that they stay as they were."""
    if harbor_origin(document) is not None:
        return GYMWRIGHT_TESTS + name.removeprefix("tests/")
    return name


_TOML_HEADER = re.compile(r"^\s*\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(#.*)?$")


def toml_with(text: str, table: str, key: str, literal: str) -> str:
    """`text` (a task.toml) with `key = literal` in `[table]`: the key's line replaced where the table has
    it, else added at the table's top, else the table added at the end. Every other line is kept as it is."""
    lines = text.splitlines(keepends=True)
    start = end = None
    for number, line in enumerate(lines):
        header = _TOML_HEADER.match(line)
        if header and start is None and header.group(1) == table:
            start = number
        elif header and start is not None:
            end = number
            break
    if start is None:
        tail = "" if not text or text.endswith("\n") else "\n"
        return f"{text}{tail}\n[{table}]\n{key} = {literal}\n"
    end = len(lines) if end is None else end
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for number in range(start + 1, end):
        if pattern.match(lines[number]):
            newline = "\n" if lines[number].endswith("\n") else ""
            lines[number] = f"{key} = {literal}{newline}"
            return "".join(lines)
    lines.insert(start + 1, f"{key} = {literal}\n")
    return "".join(lines)


def harbor_origin_toml(document: dict, origin: dict) -> str:
    """The task's own task.toml, as it came in; a setting the author changed in Gymwright since (the episode's
    time limit, CPUs, memory, storage, the verifier's timeout) written over its value there, each in the
    key it came from. The network is Harbor's to give as the task asks: never written back."""
    from packs.importer.harbor_config import HarborSettings

    text = origin["task_toml"]
    config = origin["config"]
    imported = HarborSettings(config, text)
    before = imported.limits()
    now = ((document.get("environment") or {}).get("limits")) or {}
    environment = config.get("environment") if isinstance(config.get("environment"), dict) else {}
    changes: list[tuple[str, str, str]] = []
    if now.get("timeout_s") is not None and now.get("timeout_s") != before.get("timeout_s", 600):
        changes.append(("agent", "timeout_sec", f"{float(now['timeout_s'])}"))
    if now.get("cpus") is not None and now.get("cpus") != before.get("cpus", 1):
        changes.append(("environment", "cpus", f"{now['cpus']}"))
    for key, default in (("memory", 2048), ("storage", None)):
        field = "memory_mb" if key == "memory" else "workspace_mb"
        value = now.get(field)
        if value is not None and value != before.get(field, default):
            if key in environment and f"{key}_mb" not in environment:
                changes.append(("environment", key, json.dumps(f"{int(value)}M")))
            else:
                changes.append(("environment", f"{key}_mb", f"{int(value)}"))
    check = next(
        (c for c in (document.get("rubric") or {}).get("checks") or [] if c.get("id") == "tests_pass"),
        None,
    )
    if check is not None and check.get("timeout_s") is not None and check["timeout_s"] != imported.verifier_timeout():
        changes.append(("verifier", "timeout_sec", f"{float(check['timeout_s'])}"))
    for table, key, literal in changes:
        text = toml_with(text, table, key, literal)
    return text


def _harbor_origin_files(
    document: dict, *, origin: dict, base: str, read_blob, task_json: bytes, rubric_json: bytes
) -> list[tuple[str, bytes, bool, str | None]]:
    """The folder of a task that came in as Harbor, as Harbor ran it: its own task.toml, instruction,
    Dockerfile and build context, solution and tests (tests/test.sh its own, the verifier mode its own),
    with Gymwright's grader added under tests/gymwright/ (never in place of the task's tests).

    What the author added in Gymwright goes in after the task's own: workspace files into the image's
    work directory (COPY workspace/), environment files under /env, the setup script run as written."""
    environment = document.get("environment") or {}
    files: list[tuple[str, bytes, bool, str | None]] = []
    has_env = has_workspace = False
    for where, path, sha256, role in task_files(document):
        data = read_blob(sha256)
        if sha256_hex(data) != sha256:
            raise PackError(f"task {document['id']}: file {path!r} does not match its sha256")
        if where == "env":
            if role == "build":
                files.append((f"{base}/environment/{path}", data, data[:2] == b"#!", sha256))
                continue
            files.append((f"{base}/{GYMWRIGHT_TESTS}env-files/{path}", data, False, sha256))
            if role != "grader":
                files.append((f"{base}/environment/env/{path}", data, False, sha256))
                has_env = True
            continue
        files.append((f"{base}/files/{path}", data, False, sha256))
        if role in ("grader", "protected"):  # for Gymwright's grade, its verifier's tests among them
            files.append((f"{base}/{GYMWRIGHT_TESTS}grader-files/{path}", data, False, sha256))
        if path.startswith(HARBOR_SOLUTION):
            files.append((f"{base}/solution/{path[len(HARBOR_SOLUTION) :]}", data, data[:2] == b"#!", sha256))
            continue
        if path.startswith(HARBOR_TESTS):
            files.append((f"{base}/tests/{path[len(HARBOR_TESTS) :]}", data, data[:2] == b"#!", sha256))
            continue
        if path == HARBOR_TESTS_LIST:
            continue
        if role != "grader":
            files.append((f"{base}/environment/workspace/{path}", data, False, sha256))
            has_workspace = True
    dockerfile = environment.get("dockerfile")
    additions = []
    if dockerfile:
        workdir = dockerfile_workdir(dockerfile) or "/workspace"
        if has_env:
            additions.append("COPY env/ /env/")
        if has_workspace:
            additions.append(f"COPY workspace/ {workdir}/")
        if environment.get("setup"):
            additions += [
                f"COPY setup.sh {SETUP_SCRIPT}",
                f"RUN {interpreter_command(environment['setup'], SETUP_SCRIPT)} && rm -f {SETUP_SCRIPT}",
            ]
        text = dockerfile if not additions else dockerfile.rstrip("\n") + "\n\n# added in Gymwright\n"
        text += "\n".join(additions) + ("\n" if additions else "")
        files.append((f"{base}/environment/Dockerfile", text.encode("utf-8"), False, None))
    if environment.get("setup") and dockerfile:
        files.append((f"{base}/environment/setup.sh", environment["setup"].encode("utf-8"), False, None))
    solution = document.get("solution") or {}
    if solution.get("script"):
        files.append((f"{base}/solution/solve.sh", solution["script"].encode("utf-8"), True, None))
    files += [
        (f"{base}/instruction.md", (document.get("prompt") or "").encode("utf-8"), False, None),
        (f"{base}/task.toml", harbor_origin_toml(document, origin).encode("utf-8"), False, None),
        (f"{base}/rubric.json", rubric_json, False, None),
        (f"{base}/{GYMWRIGHT_TESTS}task.json", task_json, False, None),
    ]
    return files
