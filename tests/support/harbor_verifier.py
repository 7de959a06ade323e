"""A pack task's tests/test.sh run as Harbor's verifier runs it, in a bubblewrap sandbox: the task's tests at /tests,
`workspace` as /workspace, `logs` as /logs, the bundled grader's virtualenv on PATH."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.services import require_bwrap
from tests.support.venvs import grader_python


def run_test_sh(
    task_dir: Path, workspace: Path, logs: Path, *, timeout: float = 300, home: str | None = None
) -> subprocess.CompletedProcess:
    bwrap = require_bwrap()
    venv = Path(grader_python()).parent.parent
    base_python = Path(os.path.realpath(grader_python())).parents[1]
    # /tmp first: a checkout under /tmp (a CI clone) has its venv there, and a later tmpfs would hide it.
    command = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        *("--tmpfs", "/tmp"),
        *("--ro-bind", "/usr", "/usr"),
        *("--ro-bind", "/etc", "/etc"),
        *("--symlink", "usr/bin", "/bin"),
        *("--symlink", "usr/lib", "/lib"),
        *("--ro-bind-try", "/lib64", "/lib64"),
        *("--ro-bind", str(base_python), str(base_python)),
        *("--ro-bind", str(venv), str(venv)),
        *("--ro-bind", str(task_dir / "tests"), "/tests"),
        *("--bind", str(workspace), "/workspace"),
        *("--bind", str(logs), "/logs"),
        *("--proc", "/proc"),
        *("--dev", "/dev"),
        *("--setenv", "PATH", f"{venv}/bin:/usr/bin:/bin"),
        *(("--setenv", "HOME", home) if home else ()),
        *("--chdir", "/workspace"),
        "/tests/test.sh",
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
