"""What every check evaluator shares: the per-grade `GradingContext` (reading workspace files, running
commands, caching normalised texts), `Outcome` and the three reasons not to score (`Missing`, `Failed`,
`Unscored`)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from .. import similarity
from ..limits import GradeLimits
from ..safe_files import NotRegularFile, has_link, read_regular
from ..sandbox import CheckSandbox, ExecResult, decode_output
from ..text import fold_lookalikes, normalise_unicode

MAX_FILE_BYTES = 50 * 1024 * 1024
#: JSON an agent wrote is measured before it is parsed: its length and its nesting depth.


class Unscored(Exception):
    """The check cannot be decided; the message is the reason shown to the author."""


class Failed(Exception):
    """The graded work broke the check (a timeout, a kill, a flood, an odd or oversized file, a parse error):
    the check fails with this reason. Fail closed: a positive check scores 0 and a penalty is charged, so no
    answer earns more by breaking a check than by doing the task (RUBRIC.md, "Scoring")."""


def failed_outcome(check, reason: str) -> Outcome:
    """The outcome of a check the graded work broke: goodness 0 (a penalty is charged)."""
    return Outcome(0.0 if check.points > 0 else 1.0, reason)


def sandbox_refused(exc: BaseException) -> bool:
    """Whether a sandbox file operation failed for what is in the sandbox, i.e. the agent's doing: a link, a
    FIFO or folder where a file goes, a file too large, a full /tmp or workspace. sandbox.runtime's backends
    raise these as permanent SandboxErrors; a transient one (the engine unreachable, the container gone) is
    the backend's own failure."""
    return isinstance(exc, (NotRegularFile, ValueError)) or bool(getattr(exc, "permanent", False))


class Missing(Exception):
    """What the check reads does not exist (a file the agent did not write): the check scores 0."""


@dataclass
class Outcome:
    score: float
    explanation: str
    votes: list | None = None
    tests: list | None = None  # a `tests` check's per-test results (TestResult dicts)


@dataclass
class GradingContext:
    """Everything one `grade()` call reads, plus per-call caches (normalised texts, command output)."""

    answer: str
    trajectory: str | None = None
    workspace: Path | None = None
    sandbox: CheckSandbox | None = None
    checks_module: str | None = None
    limits: GradeLimits = field(default_factory=GradeLimits)
    left_out: dict = field(default_factory=dict)  # path -> why a bounded snapshot did not copy it
    _text_cache: dict = field(default_factory=dict)
    _stdout_cache: dict = field(default_factory=dict)
    _file_text_cache: dict = field(default_factory=dict)
    _odd_texts: dict = field(default_factory=dict)  # target -> why its bytes are not plain UTF-8 text
    _sandbox_ran: bool = False  # a check has run something in the sandbox (require_sandbox)

    # ------------------------------------------------------------ files

    def read_bytes(self, relative: str) -> bytes:
        """A workspace file's bytes; `Missing` if absent, `Failed` if the agent made it unreadable (too
        large, not a regular file, a link anywhere on its path, left out of the snapshot), `Unscored`
        if there is nowhere to read from."""
        if self.workspace is not None:
            normalised = posixpath.normpath(relative)
            if normalised in self.left_out:
                raise Failed(f"file {relative!r} was left out of the workspace snapshot: {self.left_out[normalised]}")
            try:
                # Each component is opened without following links: a linked file or directory is refused.
                return read_regular(normalised, max_bytes=MAX_FILE_BYTES, root=self.workspace)
            except FileNotFoundError:
                raise Missing(f"file {relative!r} does not exist in the workspace") from None
            except NotRegularFile as exc:
                raise Failed(f"{relative!r} {exc.strerror}; only regular files are read") from None
            except ValueError:
                raise Failed(f"file {relative!r} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB") from None
            except OSError as exc:
                raise Failed(f"could not read {relative!r}: {exc.strerror}") from None
        if self.sandbox is not None:
            try:
                return self.sandbox.read_file(relative)
            except FileNotFoundError:
                raise Missing(f"file {relative!r} does not exist in the workspace") from None
            except Exception as exc:  # noqa: BLE001 - a backend error is a reason, not a crash
                if sandbox_refused(exc):
                    raise Failed(f"could not read {relative!r} from the sandbox: {exc}") from None
                raise Unscored(f"could not read {relative!r} from the sandbox: {exc}") from None
        raise Unscored("needs the workspace files, and none were given")

    def glob(self, pattern: str) -> list[str]:
        """Workspace paths matching `pattern`, none of them a link or reached through one, none
        left out of the snapshot (they are not there to check)."""
        if self.workspace is None:
            raise Unscored("needs the workspace files, and none were given")
        root = self.workspace.resolve()
        found = []
        try:
            paths = sorted(root.glob(pattern))
        except ValueError as exc:
            raise Unscored(f"bad glob {pattern!r}: {exc}") from None
        for path in paths:
            relative = path.relative_to(root).as_posix()
            if not has_link(root, relative):
                found.append(relative)
        return found

    # ------------------------------------------------------------ sandbox

    def require_sandbox(self) -> CheckSandbox:
        """The sandbox for a check that runs code in it, with the task's protected and grader files put back to
        their bytes first whenever an earlier check ran something there: any run may have been the agent's code
        (a `command` check running its script), which can rewrite a grader module or plant a shadow beside it
        for a later check to import. The first run needs none: the files were put back after the episode."""
        if self.sandbox is None:
            raise Unscored("needs a sandbox to run in, and none was given")
        if self._sandbox_ran:
            restore = getattr(self.sandbox, "restore_protected", None)
            if callable(restore):
                try:
                    restore()
                except Exception as exc:  # noqa: BLE001
                    if sandbox_refused(exc):
                        raise Failed(f"the task's protected and grader files could not be put back: {exc}") from None
                    raise Unscored(f"the sandbox could not put the task's files back: {exc}") from None
        self._sandbox_ran = True
        return self.sandbox

    def run(self, command: str, timeout_s: float) -> ExecResult:
        """Run a shell command in the sandbox's workspace folder; `Unscored` when the sandbox
        itself fails (the command's own failures are in the result)."""
        sandbox = self.require_sandbox()
        script = f"cd {_shell_quote(sandbox.workspace_path)} && {command}"
        try:
            return sandbox.exec(["/bin/sh", "-c", script], timeout_s=timeout_s)
        except Exception as exc:  # noqa: BLE001
            raise Unscored(f"the sandbox could not run the command: {exc}") from None

    def stdout_of(self, command: str) -> str:
        """A command's whole stdout; `Failed` when it timed out, was killed or printed past the cap
        (a check must not read a cut-off output: what it looks for may be past the cut)."""
        if command not in self._stdout_cache:
            result = self.run(command, timeout_s=STDOUT_TIMEOUT_S)
            broken = process_failure(result, STDOUT_TIMEOUT_S, what=f"the command {command!r}")
            if broken is None and result.stdout_truncated:
                broken = f"the command {command!r} printed more than the sandbox's output cap; its output was cut"
            self._stdout_cache[command] = Failed(broken) if broken else result.stdout
            if not broken and result.stdout_odd is not None:
                self._odd_texts[f"stdout:{command}"] = result.stdout_odd
        cached = self._stdout_cache[command]
        if isinstance(cached, Failed):
            raise Failed(str(cached))
        return cached

    # ------------------------------------------------------------ targets

    def target_text(self, target: str) -> str:
        """The text a check reads: the answer, the trajectory, a workspace file or a command's stdout."""
        if target == "answer":
            return self.answer
        if target == "trajectory":
            if self.trajectory is None:
                raise Unscored("reads the trajectory, and none was given")
            return self.trajectory
        if target.startswith("file:"):
            path = target[5:]
            if path not in self._file_text_cache:
                text, odd = decode_output(self.read_bytes(path))
                if odd is not None:
                    self._odd_texts[target] = odd
                self._file_text_cache[path] = text
            return self._file_text_cache[path]
        if target.startswith("stdout:"):
            return self.stdout_of(target[7:])
        raise Unscored(f"unknown target {target!r}")

    def odd_text(self, target: str) -> str | None:
        """Why a `file:` or `stdout:` target's bytes are not plain UTF-8 text (`sandbox.decode_output`: bytes
        that do not decode, NULs: UTF-16, or letters spaced by NULs), or None. Such a text, read with
        replacements, cannot show that a phrase is absent from it."""
        if not target.startswith(("file:", "stdout:")):
            return None
        self.target_text(target)
        return self._odd_texts.get(target)

    def unicode_text(self, text: str) -> str:
        """`text` without format characters and in NFKC (`text.normalise_unicode`), computed once per grade."""
        if text.isascii():
            return text
        key = (id(text), "unicode")
        cached = self._text_cache.get(key)
        if cached is not None and cached[0] is text:
            return cached[1]
        value = normalise_unicode(text)
        self._text_cache[key] = (text, value)
        return value

    def lookalike_text(self, text: str) -> str:
        """Normalised `text` with lookalike letters of other scripts read as Latin (`text.fold_lookalikes`),
        computed once per grade."""
        if text.isascii():
            return text
        key = (id(text), "lookalikes")
        cached = self._text_cache.get(key)
        if cached is not None and cached[0] is text:
            return cached[1]
        value = fold_lookalikes(text)
        self._text_cache[key] = (text, value)
        return value

    def compared_text(self, check) -> str:
        """The text a comparing check reads: its target, normalised unless the check opts out."""
        text = self.target_text(check.target)
        return self.unicode_text(text) if check.normalize_unicode else text

    def normalised(self, text: str, *, fold_case: bool, collapse_space: bool) -> str:
        key = (id(text), fold_case, collapse_space)
        cached = self._text_cache.get(key)
        if cached is not None and cached[0] is text:
            return cached[1]
        value = text
        if fold_case:
            value = value.casefold()
        if collapse_space:
            value = " ".join(value.split())
        self._text_cache[key] = (text, value)
        return value

    def tokens(self, text: str) -> tuple[list[str], str]:
        """Word tokens of `text` and their space-joined form (for BLEU), computed once per grade."""
        key = (id(text), "tokens")
        cached = self._text_cache.get(key)
        if cached is not None and cached[0] is text:
            return cached[1]
        words = similarity.tokens(text)
        value = (words, similarity.joined(words))
        self._text_cache[key] = (text, value)
        return value


STDOUT_TIMEOUT_S = 120


def process_failure(result: ExecResult, timeout_s: float, *, what: str) -> str | None:
    """Why a process the graded work ran in did not finish on its own (timed out, killed, no exit
    code), in words; None when it exited. Any of these fails its check."""
    if result.timed_out:
        return f"{what} timed out after {timeout_s:g} s"
    if result.oom_killed:
        return f"{what} was killed: out of memory"
    if result.exit_code is None:
        return f"{what} died without an exit code"
    return None


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _short(text: str, limit: int = 80) -> str:
    text = text.replace("\n", "\\n")
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _num(value: float) -> str:
    return f"{value:.12g}"


def _binary(met: bool, explanation: str) -> Outcome:
    return Outcome(1.0 if met else 0.0, explanation)
