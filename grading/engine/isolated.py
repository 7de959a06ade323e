"""Grade in a child process with CPU-time, memory and wall-time limits.

A dry run grades an author's rubric against an answer and files the author
uploaded: all of it untrusted. Run in the web process, a costly check would hold
the server (and, for C code that keeps the GIL, every thread in it); run here,
the worst it can do is use up the child's limits, after which the child is
killed and the caller gets a `GradeStopped` that says which limit was hit.

The child is `python -I -m grading.engine.isolated`: isolated mode (no
PYTHON* variables, no current directory or user site on sys.path), its limits
set on itself before it reads any input, input as JSON on stdin, the grade
document as JSON on stdout. It grades without a judge or a sandbox.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .limits import GradeLimits


class GradeStopped(Exception):
    """The child was stopped by a limit (or died); the message says which."""


@dataclass(frozen=True)
class ProcessLimits:
    cpu_s: int = 30
    memory_mb: int = 1024
    timeout_s: float = 60.0
    # The names the caller documents these limits under, used in messages.
    cpu_setting: str = "cpu_s"
    memory_setting: str = "memory_mb"
    timeout_setting: str = "timeout_s"


_OUTPUT_CAP = 32 * 1024 * 1024


def grade_in_subprocess(
    rubric: dict,
    *,
    answer: str,
    workspace: Path | str | None,
    limits: GradeLimits | None = None,
    process: ProcessLimits = ProcessLimits(),
) -> dict:
    """Grade in a limited child process; the grade document, or `GradeStopped`."""
    request = {
        "rubric": rubric,
        "answer": answer,
        "workspace": str(workspace) if workspace is not None else None,
        "limits": asdict(limits or GradeLimits.from_env()),
    }
    return _run_child(request, process)


def grade_many_in_subprocess(
    rubric: dict,
    *,
    items: list[tuple[str, Path | str | None]],
    limits: GradeLimits | None = None,
    process: ProcessLimits = ProcessLimits(),
) -> list[dict]:
    """Grade several (answer, workspace) pairs against one rubric in ONE limited child (a task's
    example answers): the limits bound the whole batch. A list of grade documents, or `GradeStopped`."""
    request = {
        "rubric": rubric,
        "items": [
            {"answer": answer, "workspace": str(workspace) if workspace else None} for answer, workspace in items
        ],
        "limits": asdict(limits or GradeLimits.from_env()),
    }
    documents = _run_child(request, process)
    if not isinstance(documents, list) or len(documents) != len(items):
        raise GradeStopped("the grading process answered the wrong number of grades")
    return documents


def _run_child(request: dict, process: ProcessLimits):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        # One thread per numeric library: their per-thread arenas would eat the address-space cap.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    child = subprocess.Popen(
        [sys.executable, "-I", "-m", "grading.engine.isolated", str(int(process.cpu_s)), str(int(process.memory_mb))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd="/",
        start_new_session=True,
    )
    try:
        stdout, stderr = child.communicate(json.dumps(request).encode(), timeout=process.timeout_s)
    except subprocess.TimeoutExpired:
        _kill(child)
        raise GradeStopped(
            f"grading took longer than {process.timeout_s:g} s ({process.timeout_setting}) and was stopped"
        ) from None
    except BaseException:
        _kill(child)
        raise
    code = child.returncode
    if code == -signal.SIGXCPU or (code == -signal.SIGKILL and b"MemoryError" not in stderr):
        raise GradeStopped(
            f"grading used more than {process.cpu_s} s of CPU time ({process.cpu_setting}) and was stopped"
        )
    if code != 0 and (b"MemoryError" in stderr or code == -signal.SIGSEGV):
        # Native libraries that cannot map memory under the cap may crash rather than raise.
        raise GradeStopped(
            f"grading needed more than {process.memory_mb} MB of memory ({process.memory_setting}) and was stopped"
        )
    if code != 0 or len(stdout) > _OUTPUT_CAP:
        tail = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise GradeStopped(f"the grading process failed (exit {code}): {tail[0][:300]}")
    return json.loads(stdout)


def _kill(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.communicate()


def _set_limits(cpu_s: int, memory_mb: int) -> None:
    import resource

    # Soft CPU limit sends SIGXCPU (default action: terminate); the hard one a second later SIGKILL.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv: list[str]) -> int:
    _set_limits(int(argv[0]), int(argv[1]))  # before reading anything untrusted
    request: dict[str, Any] = json.loads(sys.stdin.buffer.read())
    from .scoring import grade

    limits = GradeLimits(**request["limits"])
    if "items" in request:
        documents = [
            grade(
                request["rubric"],
                answer=item["answer"],
                workspace=item["workspace"],
                judge=None,
                sandbox=None,
                limits=limits,
            ).to_document()
            for item in request["items"]
        ]
        sys.stdout.write(json.dumps(documents))
        return 0
    result = grade(
        request["rubric"],
        answer=request["answer"],
        workspace=request["workspace"],
        judge=None,
        sandbox=None,
        limits=limits,
    )
    sys.stdout.write(json.dumps(result.to_document()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
