"""What a sandbox is made of: the spec built from a task's environment, and the error type.

Pure data, no I/O. Backends read a `SandboxSpec`; they never look at a Task.
"""

from __future__ import annotations

import hashlib
import json
import math
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from grading.engine.models import DEFAULT_TOOLS, Limits
from grading.engine.sandbox import decode_output

DEFAULT_OUTPUT_CAP = 64 * 1024
# What a backend that builds no image (bubblewrap) says of an environment with a Dockerfile: the task page,
# the preview form and the CLI say it in these words.
NEEDS_DOCKER = "needs the docker backend (its Dockerfile builds the environment)"
_FORMAT_LIMITS = Limits()  # the task format's defaults: what a task that sets no limit gets


class SandboxError(Exception):
    """A sandbox could not be started or used.

    `permanent=True` means retrying cannot help (bad image name, a Dockerfile
    that does not build, a setup script that fails); `permanent=False` means a
    transient failure (engine unreachable, out of disk, a race) that a retry of
    the whole rollout may fix.
    """

    def __init__(self, message: str, permanent: bool = False):
        super().__init__(message)
        self.message = message
        self.permanent = permanent

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class SandboxSpec:
    """Everything a backend needs to start one sandbox.

    `timeout_s` is the wall limit of a whole rollout; `exec_timeout_s` the
    default limit of one exec when the caller gives none. `cpus` and
    `memory_mb` apply to the whole sandbox (all its processes together),
    `pids` caps the number of live processes, `output_cap` the bytes kept of
    each of stdout and stderr per exec, `workspace_mb` / `tmp_mb` the size of
    the writable /workspace and /tmp. `workdir` is the Dockerfile's work directory (its last
    WORKDIR, see `dockerfile_workdir`): a link to /workspace in the sandbox, so that a task written
    for that image (Harbor's and Terminal-Bench's /app) finds the agent's work where it expects it.
    `build_context` holds the files the Dockerfile's COPY and ADD read ((path, bytes), environment
    files with role `build`); they are part of the image's cache tag.
    """

    image: str | None = None
    dockerfile: str | None = None
    setup: str | None = None
    network: Literal["none", "allowed", "egress"] = "none"
    cpus: float = float(_FORMAT_LIMITS.cpus)
    memory_mb: int = _FORMAT_LIMITS.memory_mb
    timeout_s: float = float(_FORMAT_LIMITS.timeout_s)
    max_steps: int = _FORMAT_LIMITS.max_steps
    exec_timeout_s: float = 120.0
    setup_timeout_s: float = 600.0
    pids: int = 256
    output_cap: int = DEFAULT_OUTPUT_CAP
    workspace_mb: int = 512
    tmp_mb: int = 256
    tools: tuple[str, ...] = DEFAULT_TOOLS
    custom_tools: tuple[dict, ...] = ()
    environment_id: str | None = None
    workdir: str | None = None
    build_context: tuple[tuple[str, bytes], ...] = field(default=(), repr=False)

    def __post_init__(self):
        if self.network not in ("none", "allowed", "egress"):
            raise ValueError(f"network must be 'none' or 'allowed'/'egress', not {self.network!r}")
        for name in (
            "cpus",
            "memory_mb",
            "timeout_s",
            "max_steps",
            "exec_timeout_s",
            "pids",
            "output_cap",
            "workspace_mb",
            "tmp_mb",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0 or math.isnan(value):
                raise ValueError(f"{name} must be a positive number, not {value!r}")

    @property
    def network_allowed(self) -> bool:
        # The task schema says "egress"; the CLI and older docs say "allowed".
        return self.network in ("allowed", "egress")

    def with_overrides(self, **changes: Any) -> SandboxSpec:
        """A copy with some fields replaced (None values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def build_dockerfile(self) -> str | None:
        """The Dockerfile an image is built from: the environment's, and when it has a `workdir`, a last
        step that moves what the image has there to WORKDIR_COPY (copied into /workspace when a sandbox
        starts) and leaves a link to /workspace in its place."""
        if not self.dockerfile:
            return None
        if not self.workdir:
            return self.dockerfile
        workdir, parent = self.workdir, posixpath.dirname(self.workdir)
        return (
            self.dockerfile.rstrip("\n") + "\n\n# gymwright: the agent works in /workspace; "
            f"WORKDIR {workdir} is a link to it\nUSER 0\n"
            f"RUN if [ -d {workdir} ] && [ ! -L {workdir} ]; then mkdir -p {posixpath.dirname(WORKDIR_COPY)} "
            f"&& mv {workdir} {WORKDIR_COPY}; else rm -f {workdir}; fi && mkdir -p {parent} "
            f"&& ln -s /workspace {workdir}\n"
        )

    def dockerfile_tag(self) -> str | None:
        """The cache tag of the image built from `build_dockerfile()`: content-addressed."""
        dockerfile = self.build_dockerfile()
        if not dockerfile:
            return None
        digest = hashlib.sha256(dockerfile.encode())
        for path, data in sorted(self.build_context):
            digest.update(b"\0" + path.encode() + b"\0" + hashlib.sha256(data).digest())
        return f"gymwright-env:{digest.hexdigest()[:32]}"

    @classmethod
    def from_environment(cls, environment: Any, **overrides: Any) -> SandboxSpec:
        """Build a spec from a task's `environment` (pydantic model or plain dict).

        Unknown limit keys are ignored here: the task schema (grading.engine)
        is where unknown keys are rejected.
        """
        env = _as_dict(environment)
        limits = _as_dict(env.get("limits") or {})
        values: dict[str, Any] = {
            "image": env.get("image") or None,
            "dockerfile": env.get("dockerfile") or None,
            "setup": env.get("setup") or None,
            "network": env.get("network") or "none",
            "environment_id": env.get("id"),
            "workdir": dockerfile_workdir(env.get("dockerfile") or ""),
        }
        limit_keys = {
            "cpus": "cpus",
            "memory_mb": "memory_mb",
            "timeout_s": "timeout_s",
            "max_steps": "max_steps",
            "pids": "pids",
            "output_cap": "output_cap",
            "output_cap_bytes": "output_cap",
            "workspace_mb": "workspace_mb",
            "tmp_mb": "tmp_mb",
            "exec_timeout_s": "exec_timeout_s",
        }
        for key, name in limit_keys.items():
            if limits.get(key) is not None:
                values[name] = limits[key]
        if env.get("tools"):
            values["tools"] = tuple(env["tools"])
        if env.get("custom_tools"):
            values["custom_tools"] = tuple(_as_dict(tool) for tool in env["custom_tools"])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


# Where an image's own work directory goes when its WORKDIR becomes a link to /workspace (docker).
WORKDIR_COPY = "/opt/gymwright/workdir"
# A WORKDIR shown as a link to /workspace: a plain absolute path, not in a folder the sandbox provides
# or the system needs (bubblewrap binds the host's /usr, /etc, /bin ... read-only).
_WORKDIR_PATTERN = re.compile(r"^(/[A-Za-z0-9._-]+)+$")
_WORKDIR_RESERVED = (
    "workspace",
    "tmp",
    "env",
    "logs",
    "tests",
    "usr",
    "etc",
    "bin",
    "sbin",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "proc",
    "dev",
    "sys",
    "run",
)


_REMOTE_SOURCE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://|git@)")
# Parser directives the engine knows: they are read only in the comment lines that open the file (leading blanks
# allowed), and the first other line (an unknown directive, a plain comment, an empty line, an instruction) ends
# them. The engine accepts no escape character but these two (any other fails the build).
_PARSER_DIRECTIVE = re.compile(r"#[ \t]*(syntax|escape|check)[ \t]*=[ \t]*(.*?)[ \t]*\Z", re.IGNORECASE)
_ESCAPES = ("\\", "`")
# The blanks the engine's parser trims before a line (Go's unicode.IsSpace); Python's str.strip() also trims
# U+001C..U+001F, which the engine keeps: a line that starts with one of them is no comment there.
_ENGINE_BLANKS = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
# The longest Dockerfile read: a real one is a few kilobytes; one past this is refused by the docker backend.
DOCKERFILE_MAX_CHARS = 1024 * 1024


def _continuation(escape: str) -> re.Pattern:
    # The engine's rule: the escape character (blanks after it allowed) continues the line, unless it is itself
    # escaped (`RUN echo \\` ends there); a line that is only the escape character continues too.
    e = re.escape(escape)
    return re.compile(rf"([^{e}]){e}[ \t]*\Z|^{e}[ \t]*\Z")


def dockerfile_instructions(dockerfile: str, *, escape: str | None = None) -> list[tuple[int, str, str]]:
    """(first line, KEYWORD, arguments) of each instruction, joined as the Docker engine's parser joins them: lines
    end at a line feed only (a carriage return before it dropped), a byte order mark opens the file unseen, the
    `escape` directive names the continuation character (the `escape` argument overrides it), a continuation line
    keeps its leading blanks and is joined with nothing between, comment and empty lines are skipped, also inside a
    continued instruction. The one reader of Dockerfiles here: rules that read them must not disagree.
    Heredoc bodies are read as instructions, as engines without BuildKit read them."""
    lines = [line.rstrip("\r\n") for line in dockerfile.removeprefix("\ufeff").split("\n")]
    if escape is None:
        escape = "\\"
        for line in lines:
            match = _PARSER_DIRECTIVE.match(line.lstrip(_ENGINE_BLANKS))
            if match is None:
                break
            if match.group(1).lower() == "escape" and match.group(2) in _ESCAPES:
                escape = match.group(2)
    continued = _continuation(escape)
    found: list[tuple[int, str, str]] = []
    index = 0
    while index < len(lines):
        line = lines[index].lstrip(_ENGINE_BLANKS)
        index += 1
        start = index
        if line.startswith("#"):
            continue  # a comment (or a directive)
        logical, continues = continued.subn(r"\1", line)
        if not continues and not logical:
            continue
        pieces = [logical]
        while continues and index < len(lines):
            line = lines[index]
            index += 1
            stripped = line.lstrip(_ENGINE_BLANKS)
            if not stripped or stripped.startswith("#"):
                continue  # a comment or an empty line inside a continued instruction
            piece, continues = continued.subn(r"\1", line)
            pieces.append(piece)
        text = "".join(pieces)
        if text.strip(_ENGINE_BLANKS):
            found.append(_instruction(start, text))  # continued past the last line: the engine runs it as it is
    return found


def _instruction(line: int, text: str) -> tuple[int, str, str]:
    words = text.split(None, 1)
    return line, words[0].upper(), (words[1].strip() if len(words) == 2 else "")


def dockerfile_remote_sources(dockerfile: str) -> list[tuple[int, str]]:
    """(line, source) of each ADD source the Docker engine would fetch itself: a URL, a git address, or a
    variable that may expand to one (ONBUILD ADD too). The engine fetches them on the host's network, outside
    the build's network mode; a local file is COPY's (or ADD's without a variable).

    Read with each escape character the engine accepts, whatever the directives say: engines differ in the
    directives they know (before BuildKit's `check`, a `# check=` line ends them and the `escape` after it is a
    comment), and an ADD one reading joins to the line before is its own instruction in the other."""
    found: list[tuple[int, str]] = []
    for escape in _ESCAPES:
        for item in _remote_sources(dockerfile_instructions(dockerfile, escape=escape)):
            if item not in found:
                found.append(item)
    return sorted(found)


def _remote_sources(instructions: list[tuple[int, str, str]]) -> list[tuple[int, str]]:
    found = []
    for at, keyword, rest in instructions:
        if keyword == "ONBUILD":
            _, keyword, rest = _instruction(at, rest or "-")
        if keyword != "ADD" or not rest:
            continue
        sources: list = []
        if rest.startswith("["):
            try:
                sources = json.loads(rest)[:-1]
            except (ValueError, TypeError):
                sources = [rest]
        else:
            sources = [word for word in rest.split() if not word.startswith("--")][:-1]
        for source in sources:
            if not isinstance(source, str) or _REMOTE_SOURCE.match(source) or "$" in source:
                found.append((at, str(source)))
    return found


def dockerfile_workdir(dockerfile: str) -> str | None:
    """The work directory a Dockerfile leaves its image in (its last WORKDIR, relative ones resolved
    against the one before), when it can be a link to /workspace: None for none, /workspace itself,
    one with variables in it, or one in a reserved folder (/usr, /tmp, /etc ...)."""
    workdir = None
    if len(dockerfile) > DOCKERFILE_MAX_CHARS:
        return None  # not read: the docker backend refuses to build it
    for _, keyword, rest in dockerfile_instructions(dockerfile):
        if keyword == "FROM":
            workdir = None  # a new stage starts from its base image's
        elif keyword == "WORKDIR" and rest:
            value = rest.strip('"').strip("'")
            workdir = posixpath.normpath(posixpath.join(workdir or "/", value))
    if (
        not workdir
        or not _WORKDIR_PATTERN.match(workdir)
        or ".." in workdir.split("/")
        or workdir.split("/")[1] in _WORKDIR_RESERVED
        or workdir == "/opt"
        or (workdir + "/").startswith("/opt/gymwright/")
    ):
        return None
    return workdir


def _as_dict(value: Any) -> dict:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "model_dump"):
        return value.model_dump()
    raise TypeError(f"expected a mapping or a pydantic model, got {type(value).__name__}")


@dataclass
class CappedBuffer:
    """Keeps the first `cap` bytes written to it and counts the rest.

    Output past the cap is read and discarded so that a command printing a
    gigabyte costs the worker no more than `cap` bytes of memory.
    """

    cap: int
    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.data)

    def text(self) -> str:
        return self.decoded()[0]

    def decoded(self) -> tuple[str, str | None]:
        """The text and why its bytes are not plain UTF-8 text (`decode_output`), or None."""
        return decode_output(bytes(self.data))
