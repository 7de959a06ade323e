"""File roles at run time (task format: a file's `role`).

- `workspace`: copied into /workspace at the start; the agent may change it.
- `protected`: copied in at the start; after the episode, once every process
  the agent left is dead, put back to its original bytes (whatever the agent
  put there: other bytes, a link, a directory) before any check runs. The
  grade records what the agent had done to it.
- `grader`: never in the sandbox during the episode; copied in at its path
  only after it, for the checks. Environment files with this role are added
  under /env the same way.
- `build` (environment files only): the Dockerfile's build context, sent to
  the image build (docker); never in /env.

Before any of that, `neutralise_links` removes each symlink the agent left in
the workspace that leads outside it, nowhere, or to (or above, or into) a
protected or grader path: a check that runs `cmp out.txt expected.txt` must not
compare the grader's file with itself through the agent's link. The grade lists
the links removed (`links_removed`).

Checks then run with an environment that ignores what the agent may have
planted for Python outside the workspace (user site-packages in $HOME=/tmp,
stale bytecode): see `GRADING_ENV`.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from grading.engine.sandbox import NO_BYTECODE_ENV


@dataclass
class FilePlan:
    """A task's files split by role: what the agent gets, and what comes after the episode."""

    agent_files: dict[str, bytes] = field(default_factory=dict)
    agent_env_files: dict[str, bytes] = field(default_factory=dict)
    protected: dict[str, bytes] = field(default_factory=dict)
    grader: dict[str, bytes] = field(default_factory=dict)
    grader_env_files: dict[str, bytes] = field(default_factory=dict)
    build_files: dict[str, bytes] = field(default_factory=dict)

    @property
    def after_episode(self) -> dict[str, bytes]:
        """Workspace files written once the episode is over (protected first, then grader)."""
        return {**self.protected, **self.grader}


def plan_files(task, files: Mapping[str, bytes], env_files: Mapping[str, bytes]) -> FilePlan:
    """Split `files` (task files) and `env_files` by the roles `task` (a parsed Task) gives them.
    Files the task does not list keep today's behaviour (workspace)."""
    plan = FilePlan()
    roles = {ref.path: ref.effective_role for ref in task.files}
    env_roles = {ref.path: ref.effective_role for ref in task.environment.files}
    for path, data in files.items():
        role = roles.get(path, "workspace")
        if role == "grader":
            plan.grader[path] = data
        else:
            plan.agent_files[path] = data
            if role == "protected":
                plan.protected[path] = data
    for path, data in env_files.items():
        # /env is read-only to the agent already: protected there means workspace.
        if env_roles.get(path) == "grader":
            plan.grader_env_files[path] = data
        elif env_roles.get(path) == "build":
            plan.build_files[path] = data
        else:
            plan.agent_env_files[path] = data
    return plan


def protected_states(found: Mapping[str, str], snapshot: Path, protected: Mapping[str, bytes]) -> list[dict]:
    """What the agent did to each protected file: `found` is what `Sandbox.restore_files`
    saw at each path, `snapshot` the workspace copied out before the restoration."""
    states = []
    for path, original in protected.items():
        kind = found.get(path, "missing")
        if kind == "file":
            copy = snapshot / path
            same = False
            try:
                st = os.lstat(copy)
                if stat.S_ISREG(st.st_mode) and st.st_size == len(original):
                    same = hashlib.sha256(copy.read_bytes()).digest() == hashlib.sha256(original).digest()
            except OSError:
                same = False
            state = "unchanged" if same else "modified"
        elif kind == "missing":
            state = "deleted"
        else:
            state = "replaced"
        states.append({"path": path, "state": state})
    return states


# Runs in the sandbox once every process of the episode is gone (nothing races it), as the sandbox
# user, with the sandbox's own view of paths: `readlink -f` resolves each link as a check would.
# A link stays only when it resolves to something that exists inside the workspace and is not a
# task path the grader restores or adds ($@ after the workspace), nor a folder above one.
_NEUTRALISE = r"""
ws=$1
find "$ws" -type l -exec sh -c '
ws=$1; shift
for f do
  t=$(readlink -f "$f" 2>/dev/null)
  keep=0
  if [ -n "$t" ] && [ -e "$t" ]; then
    case "$t" in "$ws"/*) keep=1;; esac
    while IFS= read -r p; do
      [ -n "$p" ] || continue
      case "$t" in "$ws/$p"|"$ws/$p"/*) keep=0;; esac
      case "$ws/$p" in "$t"/*) keep=0;; esac
    done < "$GW_GUARDED"
  fi
  [ "$keep" = 1 ] && continue
  # a folder the agent made read-only is made writable again to remove it
  rm -f "$f" 2>/dev/null || { chmod u+w "$(dirname "$f")" 2>/dev/null; rm -f "$f"; } || { printf "!%s\n" "$f"; continue; }
  printf "%s\n" "${f#"$ws"/}"
done' sh "$ws" {} +
"""


def neutralise_links(sandbox, guarded: list[str]) -> list[str]:
    """Remove every symlink in the workspace that leads outside it, nowhere, or at (into, above) one of
    `guarded` (the task's protected and grader paths); the workspace paths of the links removed.
    Call after `end_processes()`. Raises SandboxError when a link cannot be removed."""
    from .spec import SandboxError

    workspace = sandbox.workspace_path.rstrip("/")
    # The guarded paths go through a file, not argv or the environment: a task may have many. It goes under
    # /env, which the agent cannot write: a /tmp the agent filled must not stop the grading.
    guarded_name = f".gymwright-guarded-{secrets.token_hex(8)}"
    sandbox.add_env_files({guarded_name: "".join(f"{path}\n" for path in guarded).encode()})
    result = sandbox.exec(
        ["/bin/sh", "-c", _NEUTRALISE, "sh", workspace], env={"GW_GUARDED": f"/env/{guarded_name}"}, timeout_s=120
    )
    lines = [line for line in (result.stdout or "").splitlines() if line]
    stuck = [line[1:] for line in lines if line.startswith("!")]
    if result.exit_code != 0 or stuck:
        raise SandboxError(
            f"could not remove the workspace's links before the checks: exit {result.exit_code}"
            + (f", {len(stuck)} left (e.g. {stuck[0]})" if stuck else "")
            + f": {(result.stderr or '')[-300:]}",
            permanent=True,
        )
    removed = [line for line in lines if not line.startswith("!")]
    if getattr(result, "stdout_truncated", False):
        removed.append("… (more; the list was cut)")
    return removed


def mirror_files(snapshot: Path, files: Mapping[str, bytes]) -> None:
    """Apply the restoration to the worker's copy of the workspace too, so that checks
    reading files on the worker (file_content, table_cell ...) see what the sandbox has."""
    from grading.engine.safe_files import place_files

    place_files(snapshot, files)


class GradingSandbox:
    """The sandbox as the checks see it: the same sandbox, but every exec gets an
    environment that makes Python ignore user site-packages (the agent's $HOME is
    /tmp) and read and write no bytecode (NO_BYTECODE_ENV)."""

    def __init__(self, sandbox, restore: Mapping[str, bytes] | None = None):
        self._sandbox = sandbox
        self._restore = dict(restore or {})
        self.workspace_path = sandbox.workspace_path
        # No per-grading bytecode folder: one shared by every check was a path the agent's code, run by an earlier
        # check, read from its environment and filled with bytecode for the grader's modules run by a later one.
        self.env = dict(NO_BYTECODE_ENV)

    def exec(self, command, *, timeout_s=None, stdin=None, env=None):
        return self._sandbox.exec(command, timeout_s=timeout_s, stdin=stdin, env={**(env or {}), **self.env})

    def write_file(self, path: str, data: bytes) -> None:
        self._sandbox.write_file(path, data)

    def read_file(self, path: str, **options) -> bytes:
        return self._sandbox.read_file(path, **options)

    def restore_protected(self) -> None:
        """The task's protected and grader files back to their bytes, again: a check before this one may have
        run the agent's code, which can change them (GradingContext.require_sandbox calls this before every run
        in the sandbox after the first)."""
        if self._restore:
            self._sandbox.restore_files(self._restore)

    def __getattr__(self, name):
        return getattr(self._sandbox, name)
