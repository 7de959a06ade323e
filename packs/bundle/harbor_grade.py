"""Harbor verifier for a Gymwright pack task: grade /workspace with the bundled grader.

Run by tests/test.sh inside the verifier's container. Reads the task (tests/task.json), copies
the task's grader-only and protected files (tests/grader-files/) into the workspace after the
episode (protected ones put back to their original bytes) and the environment's files
(tests/env-files/) under /env, reads the agent's final answer from /workspace/answer.txt, runs
every check (command and python checks run here, in the verifier's container, without the judge's
settings in their environment), and writes /logs/verifier/reward.json (reward, reward_upper, passed, complete,
unscored: numbers, which Harbor reads as the trial's rewards), reward.txt (the reward alone: an
incomplete grade's lower bound, docs/formats.md "Scoring") and the full grade to grade.json.

Nothing in the workspace is trusted (the agent wrote it): answer.txt is read as a file, never through a
link, only if it is a regular file of at most ANSWER_MAX_BYTES (otherwise the answer is empty, which fails
every check on it); this script runs as `python -I` (test.sh); and the Python the checks' commands start
reads no bytecode from the workspace and writes none (PYTHONPYCACHEPREFIX names a path where nothing can
exist), so a `.pyc` the agent planted in a `__pycache__` beside a restored grader file is never run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "grader.pyz"))

# The app's own rules for what a check's command reads (no bytecode, no user site: a usercustomize the agent left
# in HOME) and for how its output is decoded.
from grading.engine import ExecResult, JudgeClient, JudgeConfig, grade, parse_task  # noqa: E402
from grading.engine.sandbox import NO_BYTECODE_ENV, decode_output  # noqa: E402

WORKSPACE = Path(os.environ.get("GYMWRIGHT_WORKSPACE", "/workspace"))
ENV_DIR = Path(os.environ.get("GYMWRIGHT_ENV_DIR", "/env"))
LOGS = Path(os.environ.get("GYMWRIGHT_VERIFIER_LOGS", "/logs/verifier"))
OUTPUT_CAP = 1 << 20
ANSWER_MAX_BYTES = 1 << 20
# The judge's settings ([verifier.env] in task.toml) are the grader's, not the checks': commands the
# checks run (often the agent's own code) get an environment without them.
JUDGE_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "GYMWRIGHT_JUDGE_MODEL")


class ContainerSandbox:
    """Runs check commands in this container (Harbor's verifier is the sandbox)."""

    workspace_path = str(WORKSPACE)

    def exec(self, command, *, timeout_s=None, stdin=None, env=None):
        started = time.monotonic()
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        before = _pids()
        try:
            return self._run(argv, started, timeout_s=timeout_s, stdin=stdin, env=env)
        finally:
            # Nothing a check started outlives it (as in Gymwright's own sandboxes): a background process of the
            # agent's code must not rewrite a grader file after it is put back, or the report of a later check.
            _end_new_processes(before)

    def _run(self, argv, started, *, timeout_s, stdin, env):
        try:
            base = {name: value for name, value in os.environ.items() if name not in JUDGE_ENV}
            done = subprocess.run(
                argv,
                cwd=WORKSPACE,
                input=stdin,
                capture_output=True,
                timeout=timeout_s,
                env={**base, **(env or {}), **NO_BYTECODE_ENV},
            )
        except subprocess.TimeoutExpired as exc:
            return ExecResult(
                None,
                decode_output((exc.stdout or b"")[:OUTPUT_CAP])[0],
                (exc.stderr or b"")[:OUTPUT_CAP].decode("utf-8", "replace"),
                False,
                False,
                True,
                False,
                int((time.monotonic() - started) * 1000),
            )
        stdout, stdout_odd = decode_output(done.stdout[:OUTPUT_CAP])
        return ExecResult(
            done.returncode,
            stdout,
            done.stderr[:OUTPUT_CAP].decode("utf-8", "replace"),
            len(done.stdout) > OUTPUT_CAP,
            len(done.stderr) > OUTPUT_CAP,
            False,
            False,
            int((time.monotonic() - started) * 1000),
            stdout_odd=stdout_odd,
        )

    def write_file(self, path, data):
        target = Path(path) if path.startswith("/") else WORKSPACE / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def read_file(self, path, *, max_bytes=None, follow_links=True):
        from grading.engine.checks import MAX_FILE_BYTES
        from grading.engine.safe_files import read_regular

        limit = min(max_bytes or MAX_FILE_BYTES, MAX_FILE_BYTES)
        if follow_links:
            return read_regular(WORKSPACE / path, max_bytes=limit)
        # No link anywhere below the root it is under (/ for an absolute path such as a tests check's report).
        root = Path("/") if path.startswith("/") else WORKSPACE
        return read_regular(path.lstrip("/") if path.startswith("/") else path, max_bytes=limit, root=root)

    def restore_protected(self):
        """The grader and protected files back to their bytes before every check's run after the first: an
        earlier check may have run the agent's code, which can change them (GradingContext.require_sandbox)."""
        try:
            restore_grader_files()
        except OSError as exc:
            # The workspace refused the write (filled by the agent's code, or what it left there): the checks after
            # fail on it, never unscored — an unscored penalty is not charged.
            raise RestoreRefused(f"cannot restore the task's files: {exc}") from None


class RestoreRefused(Exception):
    """The workspace refused the grader's files: `permanent` (grading.engine.checks.sandbox_refused)."""

    permanent = True


def _pids() -> set[int]:
    try:
        return {int(name) for name in os.listdir("/proc") if name.isdigit()}
    except OSError:
        return set()


def _zombie(pid: int) -> bool:
    """Dead and waiting to be reaped (by init, which in a container may never do it): nothing left to end."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[:1] == [b"Z"]
    except OSError:
        return True  # gone


# prctl(2): orphans of this process's descendants are re-parented to it, not to init.
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this verifier the reaper of its descendants' orphans: a check's daemon that double-forked or called
    setsid stays this process's descendant, so `_end_new_processes` finds it. False where Linux refuses."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rpartition(b")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid in _pids():
        parent = _ppid(pid)
        if parent is not None:
            children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _end_new_processes(before: set[int], rounds: int = 50) -> None:
    """Kill every descendant of this verifier that started since `before`: stop them all first, so none forks a
    replacement between the listing and the kill, and list again until none is left. Descendants only: every
    process that merely started meanwhile was killed before, which outside a container of its own (a verifier run
    on a host) stopped and killed the host's processes, a database's backends among them."""
    import signal

    me = os.getpid()
    for _ in range(rounds):
        mine = _descendants(me) - before
        new = {pid for pid in mine if not _zombie(pid)}
        for pid in mine - new:
            _reap(pid)
        if not new:
            return
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in new:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        for pid in new:
            _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)  # our children's zombies (orphans are ours too, as their subreaper)
    except ChildProcessError:
        pass


def read_answer() -> str:
    """The agent's final answer, /workspace/answer.txt: "" when it is absent, or is not a regular file (a link,
    a FIFO, a folder), or is over ANSWER_MAX_BYTES; said on stderr."""
    from grading.engine.safe_files import NotRegularFile, read_regular

    try:
        data = read_regular(WORKSPACE / "answer.txt", max_bytes=ANSWER_MAX_BYTES)
    except FileNotFoundError:
        return ""
    except NotRegularFile as exc:
        print(f"answer.txt {exc.strerror}: the answer is empty", file=sys.stderr)
        return ""
    except ValueError:
        print(f"answer.txt is larger than {ANSWER_MAX_BYTES} bytes: the answer is empty", file=sys.stderr)
        return ""
    except OSError as exc:
        print(f"answer.txt could not be read ({exc.strerror}): the answer is empty", file=sys.stderr)
        return ""
    return data.decode("utf-8", errors="replace")


def _files_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def restore_grader_files() -> None:
    """Grader files, and protected ones back to their bytes, whatever the agent put there (links, directories):
    never written through a link; and nothing left beside a grader module that Python would import instead."""
    from grading.engine.safe_files import place_files, remove_module_shadows

    grader_files = TESTS / "grader-files"
    if grader_files.is_dir():
        files = _files_under(grader_files)
        remove_module_shadows(WORKSPACE, files)
        place_files(WORKSPACE, files)


def main() -> int:
    from grading.engine.safe_files import place_files

    become_subreaper()  # before any check runs: what they start stays ours to end
    task = parse_task(json.loads((TESTS / "task.json").read_text(encoding="utf-8")))
    restore_grader_files()
    env_files = TESTS / "env-files"
    if env_files.is_dir():  # the verifier's image is not the agent's: the checks find /env as the agent had it
        ENV_DIR.mkdir(parents=True, exist_ok=True)
        place_files(ENV_DIR, _files_under(env_files))
    answer = read_answer()  # after the grader files are placed: answer.txt may not be one of them
    config = JudgeConfig.from_env()
    judge = JudgeClient(config) if config is not None else None
    result = grade(
        task.rubric,
        answer=answer,
        workspace=WORKSPACE,
        sandbox=ContainerSandbox(),
        judge=judge,
        checks_module=task.environment.checks_module,
    )
    document = result.to_document()
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / "grade.json").write_text(json.dumps(document, indent=1, ensure_ascii=False), encoding="utf-8")
    unscored = sum(1 for check in document["checks"] if check["status"] != "scored")
    rewards = {
        "reward": float(document["reward"]),
        "reward_upper": float(document["reward_upper"]),
        "passed": int(bool(document["passed"])),
        "complete": int(bool(document["complete"])),
        "unscored": unscored,
    }
    (LOGS / "reward.json").write_text(json.dumps(rewards) + "\n", encoding="utf-8")
    (LOGS / "reward.txt").write_text(f"{document['reward']}\n", encoding="utf-8")
    print(f"reward {document['reward']} (passed: {document['passed']}, complete: {document['complete']})")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # the judge client's threads need not be joined
