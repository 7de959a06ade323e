"""A Harbor task's settings and build context, as an import reads them.

Every field of task.toml is kept: the file's own text and its parsed form go to the task's metadata
(`metadata.harbor`), its [metadata] table's fields to the task's metadata beside them, and what Gymwright
has a setting for is mapped to it: [agent].timeout_sec to the episode's time limit, [environment] cpus,
memory and storage to the sandbox's limits, `allow_internet` to network egress (refused in words when the
operator has it off), `docker_image` to the environment's image, [verifier].timeout_sec and [verifier.env]
to the verifier check, [solution.env] to the oracle. The export writes task.toml back from its own text
(packs.archive.harbor), so nothing is lost on the way through.

The build context (every file under environment/ but the Dockerfile) goes with the environment as files
with role `build`, bounded (IMPORT_BUILD_CONTEXT_MAX_FILES, IMPORT_BUILD_CONTEXT_MAX_MB, the upload limit
per file, the import's read budget) and under the task format's path rules; a link is refused.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import re
import shlex
from pathlib import Path
from typing import Any

from django.conf import settings

from grading.engine.models import relative_path_problem
from gymwright.egress_setting import egress_refusal
from packs.importer.extract import _ReadBudget
from packs.importer.records import ImportFailed

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_SIZE_MB = {"": 1 / (1 << 20), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def json_safe(value: Any) -> Any:
    """A parsed TOML value as JSON holds it (dates and times as their TOML text)."""
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_safe(item) for item in value]
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _table(config: dict, name: str) -> dict:
    value = config.get(name)
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def _megabytes(table: dict, key: str) -> int | None:
    """`<key>_mb` (a number) or `<key>` ("2G", "512M", a number of megabytes) of an [environment] table."""
    number = _number(table.get(f"{key}_mb"))
    if number is None:
        value = table.get(key)
        number = _number(value)
        if number is None and isinstance(value, str) and (match := _SIZE.match(value)):
            number = float(match.group(1)) * _SIZE_MB[match.group(2).lower()]
    return None if number is None else max(1, int(number))


class HarborSettings:
    """What an import makes of a parsed task.toml (see the module)."""

    def __init__(self, config: dict, text: str):
        self.config = config
        self.text = text
        self.agent = _table(config, "agent")
        self.environment = _table(config, "environment")
        self.verifier = _table(config, "verifier")

    @property
    def needs_network(self) -> bool:
        """The task says it needs the network: `allow_internet = true`."""
        return self.environment.get("allow_internet") is True

    @property
    def may_use_network(self) -> bool:
        """Harbor gives the task the network (its default `network_mode`, "public", or an allow-list) without
        the task saying it needs it: `harbor init` writes "public" into every task.toml."""
        if self.environment.get("allow_internet") is False:
            return False
        mode = self.environment.get("network_mode", "public")
        return not (isinstance(mode, str) and mode in ("none", "no-network"))

    @property
    def network(self) -> str:
        """The environment's network here: egress where the task needs or may use it and the operator allows it."""
        return "egress" if (self.needs_network or self.may_use_network) and egress_refusal() is None else "none"

    def refusal(self) -> str | None:
        """Why this server cannot run the task as written (it needs network egress, which is off), in words."""
        if self.needs_network and (why := egress_refusal()):
            return f"needs network access ([environment] allow_internet = true in task.toml), and {why}"
        return None

    def note(self, *, solution_files: int = 0) -> str:
        """What the report says of a task that runs here otherwise than Harbor would run it."""
        notes = []
        if self.may_use_network and not self.needs_network and self.network == "none":
            written = "network_mode" in self.environment
            mode = self.environment.get("network_mode", "public")
            origin = "as written" if written else "Harbor's default"
            notes.append(
                f"runs without network here: task.toml's network_mode is {mode!r} ({origin}), and {egress_refusal()}"
            )
        gpus = _number(self.environment.get("gpus"))
        if gpus is not None:
            notes.append(f"asks for {int(gpus)} GPU(s), which sandboxes here do not have (kept for the export)")
        if solution_files:
            notes.append(
                f"solution/ has {solution_files} file(s) beside solve.sh: kept for the export, but the oracle here "
                "runs solve.sh without them (Harbor puts them in /solution)"
            )
        return "; ".join(notes)

    def limits(self) -> dict:
        """The environment's limits, from [agent] and [environment], within the task format's bounds."""
        limits: dict = {}
        timeout = _number(self.agent.get("timeout_sec"))
        if timeout is not None:
            limits["timeout_s"] = max(1, min(int(math.ceil(timeout)), 86400))
        cpus = _number(self.environment.get("cpus"))
        if cpus is not None:
            limits["cpus"] = int(cpus) if cpus == int(cpus) and cpus <= 64 else min(cpus, 64.0)
        memory = _megabytes(self.environment, "memory")
        if memory is not None:
            limits["memory_mb"] = max(16, min(memory, 262144))
        storage = _megabytes(self.environment, "storage")
        if storage is not None:
            limits["workspace_mb"] = max(1, min(storage, 1 << 20))
        return limits

    def verifier_timeout(self) -> int:
        return max(1, min(int(math.ceil(_number(self.verifier.get("timeout_sec")) or 600)), 86400))

    def verifier_exports(self) -> str:
        """Shell lines exporting [verifier.env]'s literal values to the tests (a `${VAR}` template names a
        variable of the host Harbor runs on: never read into a sandbox, and kept for the export)."""
        env = _table(self.verifier, "env")
        return "".join(
            f"export {key}={shlex.quote(str(value))}\n"
            for key, value in env.items()
            if _ENV_NAME.match(str(key)) and isinstance(value, (str, int, float)) and "${" not in str(value)
        )

    def metadata(self) -> dict:
        """The task's metadata: task.toml's [metadata] fields, and the whole file (text and parsed)."""
        own = {str(key): json_safe(value) for key, value in _table(self.config, "metadata").items()}
        return {**own, "harbor": {"task_toml": self.text, "config": json_safe(self.config)}}


def build_context_files(
    environment: Path, where: str, budget: _ReadBudget, *, skip: set[str]
) -> tuple[list[dict], dict[str, bytes]]:
    """Every regular file under `environment` but those in `skip` (names at its top) as an environment file with role
    `build`, with its bytes; ImportFailed (that task only) for a link, a device, a path the task format
    refuses, or more files or bytes than the build-context limits."""
    max_files = settings.IMPORT_BUILD_CONTEXT_MAX_FILES
    max_bytes = settings.IMPORT_BUILD_CONTEXT_MAX_BYTES
    entries: list[dict] = []
    files: dict[str, bytes] = {}
    total = 0
    if not environment.is_dir() or environment.is_symlink():
        return entries, files
    for path in sorted(environment.rglob("*")):
        relative = path.relative_to(environment).as_posix()
        if relative.split("/")[0] in skip:
            continue
        if path.is_symlink():
            raise ImportFailed(f"{where}/{relative}: a symbolic link in the build context; links are not imported.")
        if path.is_dir():
            continue
        if not path.is_file():
            raise ImportFailed(f"{where}/{relative}: not a regular file (a device, fifo or socket).")
        problem = relative_path_problem(relative)
        if problem:
            raise ImportFailed(f"{where}/{relative}: the path {problem}.")
        if len(entries) >= max_files:
            raise ImportFailed(
                f"{where}: the build context has more than {max_files} files "
                "(GYMWRIGHT_IMPORT_BUILD_CONTEXT_MAX_FILES)."
            )
        size = path.stat().st_size
        if size > settings.UPLOAD_MAX_BYTES:
            raise ImportFailed(
                f"{where}/{relative}: larger than the {settings.UPLOAD_MAX_BYTES // (1 << 20)} MB upload limit "
                "(GYMWRIGHT_UPLOAD_MAX_MB)."
            )
        total += size
        if total > max_bytes:
            raise ImportFailed(
                f"{where}: the build context is larger than {max_bytes // (1 << 20)} MB "
                "(GYMWRIGHT_IMPORT_BUILD_CONTEXT_MAX_MB)."
            )
        budget.take(f"{where}/{relative}", size)
        data = path.read_bytes()
        sha256 = hashlib.sha256(data).hexdigest()
        entries.append({"path": relative, "sha256": sha256, "role": "build"})
        files[sha256] = data
    return entries, files
