"""The sandbox interface the engine needs to run `command` and `python` checks and `stdout:` targets.

`sandbox.runtime` sandboxes implement this protocol (and more). The engine never
runs check code in its own process: everything goes through `exec`.
"""

from __future__ import annotations

from dataclasses import dataclass
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
