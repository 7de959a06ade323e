"""The sandbox interface the engine needs to run `command` and `python` checks and `stdout:` targets.

`sandbox.runtime` sandboxes implement this protocol (and more). The engine never
runs check code in its own process: everything goes through `exec`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

# The environment of every command the checks run: Python reads and writes no bytecode at all (the prefix names a
# path under /dev/null, where nothing can exist), so no `.pyc` the agent's code planted (beside a module, or under
# a cache prefix it read from its own environment during an earlier check) stands in for a grader's module.
NO_BYTECODE_ENV = {
    "PYTHONNOUSERSITE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONPYCACHEPREFIX": "/dev/null/gymwright-no-bytecode",
}


@dataclass
class ExecResult:
    exit_code: int | None  # None when killed before exiting (timeout)
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    oom_killed: bool
    duration_ms: int
    # Why stdout's bytes are not plain UTF-8 text (`decode_output`), or None: such output, read with replacement
    # characters, cannot show that a phrase is absent from it. Not part of the CLI's exec result.
    stdout_odd: str | None = field(default=None, compare=False)


def decode_output(data: bytes) -> tuple[str, str | None]:
    """Bytes the agent's side produced (a workspace file, a command's output) as text, and why they are not
    plain UTF-8 text: bytes that do not decode (UTF-16, a stray byte; read with replacement characters) or NULs
    (letters spaced by NULs). None where they are plain text. The one rule for every text a check reads."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), "is not UTF-8 text"
    return text, ("holds NUL bytes" if "\x00" in text else None)


@runtime_checkable
class CheckSandbox(Protocol):
    workspace_path: str  # absolute path of the workspace INSIDE the sandbox, e.g. "/workspace"

    def exec(
        self,
        command: str | list[str],
        *,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult: ...

    def write_file(self, path: str, data: bytes) -> None: ...  # path relative to the workspace, or absolute under /tmp

    # A regular file's bytes; refused (a permanent error, or NotRegularFile/ValueError) when it is not a regular
    # file, is larger than `max_bytes` or, with follow_links=False, is a link or reached through one.
    def read_file(self, path: str, *, max_bytes: int = ..., follow_links: bool = True) -> bytes: ...

    # Optional: `restore_protected()` puts the task's protected and grader files back to their bytes.
    # Called before every run in the sandbox after the grade's first (GradingContext.require_sandbox).
