"""One rollout: start a sandbox, run an episode, grade it in the same sandbox, clean up."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .backends.base import Backend
from .harness import run_episode, trajectory_text
from .policies import ModelConfig, Policy, make_policy
from .roles import FilePlan, GradingSandbox, mirror_files, neutralise_links, plan_files, protected_states
from .spec import NEEDS_DOCKER, SandboxError, SandboxSpec

log = logging.getLogger(__name__)

MAX_CAPTURED_FILE = 1024 * 1024
MAX_CAPTURED_TOTAL = 8 * 1024 * 1024


@dataclass
class RolloutResult:
    """What a rollout produced. `error` is None when the episode ran to an end
    (submitted, final answer, max steps, time limit) and was graded; otherwise
    it says why not, `error_kind` is "sandbox" | "model" | "grading" |
    "cancelled", and `retryable` whether running the rollout again may help."""

    trajectory: list[dict] = field(default_factory=list)
    answer: str = ""
    grade: Any = None  # grading.engine.Grade
    workspace_files: dict[str, bytes] = field(default_factory=dict)
    workspace_truncated: bool = False
    #: Workspace files the bounded snapshot did not copy: [{"path", "size", "reason"}].
    workspace_left_out: list[dict] = field(default_factory=list)
    error: str | None = None
    error_kind: str | None = None
    retryable: bool = False
    stop_reason: str = ""
    steps: int = 0
    usage: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)  # start_ms, episode_ms, grading_ms, total_ms

    def to_dict(self, *, include_files: bool = False) -> dict:
        """JSON-able form (the CLI's output). Files are listed with sizes, or
        included as UTF-8 text (replacement characters for binary) if asked."""
        files: Any = {path: len(data) for path, data in self.workspace_files.items()}
        if include_files:
            files = {path: data.decode("utf-8", errors="replace") for path, data in self.workspace_files.items()}
        return {
            "answer": self.answer,
            "grade": self.grade.model_dump(mode="json", by_alias=True) if self.grade is not None else None,
            "error": self.error,
            "error_kind": self.error_kind,
            "retryable": self.retryable,
            "stop_reason": self.stop_reason,
            "steps": self.steps,
            "usage": self.usage,
            "timings": self.timings,
            "workspace_files": files,
            "workspace_truncated": self.workspace_truncated,
            "workspace_left_out": self.workspace_left_out,
            "trajectory": self.trajectory,
        }


def run_rollout(
    task,
    *,
    policy: Policy,
    backend: Backend,
    files: Mapping[str, bytes] | None = None,
    env_files: Mapping[str, bytes] | None = None,
    judge=None,
    on_event: Callable[[dict], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    spec: SandboxSpec | None = None,
    system_prompt: str | None = None,
    start_files: Mapping[str, bytes] | None = None,
) -> RolloutResult:
    """Run one episode of `task` (a `Task` or a task dict) with `policy` in a
    fresh sandbox from `backend`, then grade it with grading.engine while the
    sandbox is still up (command and python checks run in it), capture the
    workspace files, and always stop the sandbox.

    `files` are the task's files (path -> bytes, into /workspace), `env_files`
    the environment's (into /env); their roles come from the task (see
    `roles`): grader files go in only after the episode, protected files are
    restored before the checks, and nothing the agent started still runs then. `on_event(dict)` gets {"type": "started"},
    {"type": "step", "step": n, ...}, {"type": "grading"} and {"type": "done",
    ...}; its exceptions are logged and ignored. `should_cancel()` is polled
    between steps and, every half second, while a command runs (which is then killed). `spec` overrides the spec built from the environment.
    `start_files` (an example answer's files) are in the workspace from the start, beside and over the
    task's workspace files, as if the agent had written them: never at a grader path, and a protected
    path is still restored before the checks.
    """
    from grading.engine import Task, parse_task

    started = time.monotonic()
    if not isinstance(task, Task):
        task = parse_task(task)
    spec = spec or SandboxSpec.from_environment(task.environment)
    result = RolloutResult()

    def emit(event: dict) -> None:
        if on_event is None:
            return
        try:
            on_event(event)
        except Exception:  # progress reporting must not kill a rollout
            log.exception("on_event callback failed")

    sandbox = None
    plan = plan_files(task, files or {}, env_files or {})
    plan.agent_files.update({path: data for path, data in (start_files or {}).items() if path not in plan.grader})
    if plan.build_files and not spec.build_context:
        spec = spec.with_overrides(build_context=tuple(sorted(plan.build_files.items())))
    work = tempfile.mkdtemp(prefix="gymwright-rollout-")
    try:
        try:
            sandbox = backend.start(spec, files=plan.agent_files, env_files=plan.agent_env_files)
        except SandboxError as exc:
            result.error, result.error_kind, result.retryable = exc.message, "sandbox", not exc.permanent
            return result
        result.timings["start_ms"] = _ms(started)
        # Cancelling kills a running command too, not only the next step.
        sandbox.interrupt = should_cancel
        emit({"type": "started", "sandbox": sandbox.id, "backend": backend.name})
        episode_started = time.monotonic()
        episode = run_episode(
            sandbox,
            prompt=task.prompt,
            spec=spec,
            policy=policy,
            system_prompt=system_prompt,
            on_event=emit,
            should_cancel=should_cancel,
            deadline=episode_started + spec.timeout_s,
        )
        result.timings["episode_ms"] = _ms(episode_started)
        result.trajectory, result.answer = episode.trajectory, episode.answer
        result.stop_reason, result.steps, result.usage = episode.stop_reason, episode.steps, episode.usage
        if episode.stop_reason == "error":
            result.error, result.error_kind, result.retryable = episode.error, "model", episode.error_retryable
            return result
        if episode.stop_reason == "cancelled":
            result.error, result.error_kind = "cancelled", "cancelled"
            return result
        emit({"type": "grading"})
        grading_started = time.monotonic()
        try:
            grade_episode(
                task,
                sandbox,
                plan,
                answer=episode.answer,
                trajectory=episode.trajectory,
                judge=judge,
                work_dir=Path(work),
                into=result,
            )
        except SandboxError as exc:
            result.error, result.error_kind, result.retryable = exc.message, "grading", not exc.permanent
        except Exception as exc:  # a grader bug must not lose the episode
            log.exception("grading failed")
            result.error, result.error_kind = f"grading failed: {type(exc).__name__}: {exc}", "grading"
        result.timings["grading_ms"] = _ms(grading_started)
        return result
    finally:
        if sandbox is not None:
            try:
                sandbox.stop()
            except Exception:
                log.exception("could not stop sandbox %s", sandbox.id)
        shutil.rmtree(work, ignore_errors=True)
        result.timings["total_ms"] = _ms(started)
        grade_obj = result.grade
        emit(
            {
                "type": "done",
                "error": result.error,
                "stop_reason": result.stop_reason,
                "reward": getattr(grade_obj, "reward", None),
                "passed": getattr(grade_obj, "passed", None),
            }
        )


@dataclass
class EpisodeGrade:
    """What grading an episode's sandbox gave: the grade and the agent's workspace as it left it."""

    grade: Any = None
    workspace_files: dict[str, bytes] = field(default_factory=dict)
    workspace_truncated: bool = False
    workspace_left_out: list[dict] = field(default_factory=list)


def grade_episode(
    task, sandbox, plan: FilePlan, *, answer: str, trajectory: list[dict], judge, work_dir: Path, into=None
):
    """Grade an episode that has ended in `sandbox` (still running): every process the agent left is ended,
    its links out of the workspace removed, the workspace snapshotted under `work_dir`, the task's protected
    and grader files (`plan`, from `roles.plan_files`) put in place, then every check of the rubric runs
    (command and python checks in this sandbox). The one grading step of every harness that drives a
    sandbox: `run_rollout` (previews, the CLI) and a pack's `env.TaskEnvironment`. Raises SandboxError
    when the sandbox fails (the grade is then not the work's). `into` (an EpisodeGrade, or a RolloutResult:
    the same attributes) gets the workspace as soon as it is captured, the grade last; it is returned."""
    from grading.engine import grade
    from grading.engine.models import ProtectedFileState

    sandbox.end_processes()
    # No link of the agent's leads a check outside the workspace or to the grader's files.
    links_removed = neutralise_links(sandbox, list(plan.after_episode))
    sandbox.open_verifier_paths()
    # The agent's workspace as it left it (what the viewer shows) ...
    snapshot = sandbox.snapshot(Path(work_dir) / "workspace")
    into = into if into is not None else EpisodeGrade()
    into.workspace_files, into.workspace_truncated = _capture(snapshot)
    # ... then the task's own files back in place for the checks.
    states = []
    left_out = {entry["path"]: entry["reason"] for entry in sandbox.snapshot_left_out}
    into.workspace_left_out = list(sandbox.snapshot_left_out)
    if plan.after_episode:
        found = sandbox.restore_files(plan.after_episode)
        states = protected_states(found, snapshot, plan.protected)
        mirror_files(snapshot, plan.after_episode)
        for path in plan.after_episode:
            left_out.pop(path, None)  # restored into the snapshot: there after all
    if plan.grader_env_files:
        sandbox.add_env_files(plan.grader_env_files)
    result = grade(
        task.rubric,
        answer=answer,
        workspace=snapshot,
        trajectory=trajectory_text(trajectory),
        sandbox=GradingSandbox(sandbox, restore=plan.after_episode),
        judge=judge,
        checks_module=task.environment.checks_module,
        left_out=left_out,
    )
    if states or links_removed:
        result = result.model_copy(
            update={
                "protected_files": [ProtectedFileState(**state) for state in states],
                "links_removed": links_removed,
            }
        )
    into.grade = result
    return into


def _ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)


def _capture(root: Path) -> tuple[dict[str, bytes], bool]:
    files: dict[str, bytes] = {}
    total, truncated = 0, False
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        size = path.stat().st_size
        if size > MAX_CAPTURED_FILE or total + size > MAX_CAPTURED_TOTAL:
            truncated = True
            continue
        files[path.relative_to(root).as_posix()] = path.read_bytes()
        total += size
    return files, truncated


# -- CLI -------------------------------------------------------------------


def _load_files(refs, directory: str | None, what: str) -> dict[str, bytes]:
    """Read the files a task or environment names from `directory`, checking sha256."""
    out: dict[str, bytes] = {}
    if not refs:
        return out
    if not directory:
        raise SystemExit(f"the task names {what} files; give their directory with --{what}")
    for ref in refs:
        path = Path(directory) / ref.path
        if not path.is_file():
            raise SystemExit(f"{what}: {ref.path} not found in {directory}")
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != ref.sha256:
            raise SystemExit(f"{what}: {ref.path} does not match its sha256 in the task")
        out[ref.path] = data
    return out


def rollout_from_cli(args) -> int:
    from grading.engine import SpecError, parse_task

    from .backends import get_backend

    try:
        task = parse_task(json.loads(Path(args.task).read_text()))
    except SpecError as exc:
        for issue in exc.issues:
            print(f"{issue.pointer or '/'}: {issue.message}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"cannot read {args.task}: {exc}", file=sys.stderr)
        return 2
    files = _load_files(task.files, args.files, "files")
    env_files = _load_files(task.environment.files, args.env_files, "env-files")
    model_config = None
    if args.policy == "model":
        model_config = ModelConfig.from_env(base_url=args.base_url, model=args.model, api_key=args.api_key)
    try:
        policy = make_policy(args.policy, task=task, model_config=model_config)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    judge = None
    if args.judge_base_url and args.judge_model:
        from grading.engine import JudgeClient, JudgeConfig
        from grading.engine.judge import max_text_chars_from_env

        judge = JudgeClient(
            JudgeConfig(
                base_url=args.judge_base_url,
                model=args.judge_model,
                api_key=os.environ.get("OPENAI_API_KEY", ""),
                max_text_chars=max_text_chars_from_env(),
            )
        )
    options = {}
    if args.backend == "docker" and os.environ.get("GYMWRIGHT_SANDBOX_IMAGE"):
        options["default_image"] = os.environ["GYMWRIGHT_SANDBOX_IMAGE"]
    try:
        backend = get_backend(args.backend, **options)
    except SandboxError as exc:
        print(json.dumps({"error": exc.message, "error_kind": "sandbox", "retryable": not exc.permanent}))
        return 3
    spec = SandboxSpec.from_environment(task.environment, image=args.image)
    if args.backend == "bubblewrap" and spec.dockerfile:
        print(
            f"note: this task {NEEDS_DOCKER}; on bubblewrap it runs on this host's own system: the "
            "Dockerfile's steps are not run and its build context is not used (its WORKDIR is still the "
            "workspace, and the setup script runs)",
            file=sys.stderr,
        )
    result = run_rollout(task, policy=policy, backend=backend, files=files, env_files=env_files, judge=judge, spec=spec)
    print(json.dumps(result.to_dict()))
    return 0 if result.error is None else 1
