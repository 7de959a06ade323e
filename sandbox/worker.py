"""Executing one claimed rollout in a worker: the sandbox run, heartbeats, progress and storing.

State changes (claim, heartbeat, fail, re-queue, run refresh) are `sandbox.services`'
functions; this module drives them for one rollout. The worker process never runs
task code itself: everything the agent or the solution does runs inside a
`sandbox.runtime` backend.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection, transaction
from django.utils import timezone

from authoring.models import TaskVersion
from grading.engine.text import storable, storable_name, storable_text
from gymwright.errors import DomainError
from gymwright.process_cache import Kept
from sandbox.models import PreviewRun, Rollout
from sandbox.runtime.rollout import RolloutResult
from sandbox.services import (
    claimed_rollout,
    preview_run_refresh,
    rollout_claim,
    rollout_fail,
    rollout_heartbeat,
    rollout_requeue,
)

logger = logging.getLogger(__name__)

# Workspace files kept on the rollout for the viewer: text contents up to this size each,
# and no more than this in total (the listing itself is always complete up to MAX_FILES).
WORKSPACE_FILE_CONTENT_MAX = 64 * 1024
WORKSPACE_CONTENT_TOTAL_MAX = 1024 * 1024
WORKSPACE_MAX_FILES = 500
# Progress events arrive per step; the row is written at most this often (plus phase changes).
PROGRESS_WRITE_INTERVAL_S = 0.5
CANCEL_POLL_INTERVAL_S = 0.25


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _reconnecting(operation):
    """Run `operation()`; when the database connection was dropped under it (PostgreSQL
    restarted, the backend terminated), reconnect and run it once more.

    A worker keeps its connection between jobs and for the whole of a rollout; without this, a
    dropped connection would fail every later query of the rollout and its result would be
    lost until the reaper re-ran it. The operations retried are conditional UPDATEs (or
    whole transactions), so running one twice changes nothing the first did not."""
    try:
        return operation()
    except (OperationalError, InterfaceError):
        if connection.in_atomic_block:
            raise  # not ours to reconnect: an outer transaction (eager jobs in tests) holds it
        logger.warning("the database connection was lost; reconnecting", exc_info=True)
        connection.close()
        return operation()


class _Heartbeat(threading.Thread):
    """Beats every few seconds while the rollout runs, even through a long tool call,
    so only a dead worker goes stale. Uses its own database connection."""

    def __init__(self, rollout_id: int, attempt: int, interval_s: float):
        super().__init__(daemon=True, name=f"rollout-{rollout_id}-heartbeat")
        self.rollout_id, self.attempt, self.interval_s = rollout_id, attempt, interval_s
        self.stop_event = threading.Event()
        self.lost = False

    def run(self) -> None:
        try:
            while not self.stop_event.wait(self.interval_s):
                try:
                    if not rollout_heartbeat(rollout_id=self.rollout_id, attempt=self.attempt):
                        self.lost = True
                        return
                except Exception:  # a missed beat is not fatal; the next one may work
                    logger.exception("heartbeat of rollout %s failed", self.rollout_id)
                    close_old_connections()  # a dropped connection: the next beat opens a new one
        finally:
            connection.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=10)


class _Progress:
    """on_event and should_cancel for the runtime: throttled writes and reads."""

    def __init__(self, rollout_id: int, attempt: int, preview_run_id: int):
        self.rollout_id, self.attempt, self.preview_run_id = rollout_id, attempt, preview_run_id
        # The claim has just written the row (phase "starting"): the first write waits its turn.
        self.last_write = time.monotonic()
        self.steps = 0
        self.grading = False
        self.last_cancel_check = 0.0
        self.cancelled = False
        self.lost = False

    def on_event(self, event: dict) -> None:
        """The runtime's events: {"type": "started" | "step" | "grading" | "done", ...}.

        Writes are throttled by time: at most one per PROGRESS_WRITE_INTERVAL_S, except the
        switch to grading (a status change the page shows). "done" writes nothing: the
        result is stored right after it.
        """
        kind = event["type"]
        if kind == "step":
            self.steps = max(self.steps, event["step"])
        if kind == "done":
            return
        grading = kind == "grading"
        now = time.monotonic()
        if not grading and now - self.last_write < PROGRESS_WRITE_INTERVAL_S:
            return
        self.last_write = now
        progress = {"phase": kind, "step": event["step"]} if kind == "step" else {"phase": kind}
        if not _reconnecting(
            lambda: rollout_heartbeat(
                rollout_id=self.rollout_id,
                attempt=self.attempt,
                progress=progress,
                steps=self.steps,
                phase_grading=grading and not self.grading,
            )
        ):
            self.lost = True
        self.grading = self.grading or grading

    def should_cancel(self) -> bool:
        if self.cancelled or self.lost:
            return True
        now = time.monotonic()
        if now - self.last_cancel_check >= CANCEL_POLL_INTERVAL_S:
            self.last_cancel_check = now
            held = _reconnecting(lambda: _claim_and_cancel(rollout_id=self.rollout_id, attempt=self.attempt))
            if not held:
                self.lost = True  # reaped and re-queued elsewhere: stop doing work nobody will keep
            else:
                self.cancelled = held[0]
        return self.cancelled or self.lost


def _claim_and_cancel(*, rollout_id: int, attempt: int) -> list[bool]:
    """Asked every CANCEL_POLL_INTERVAL_S while a rollout runs: [] when the claim is lost; [cancel_requested] while
    it holds."""
    return list(claimed_rollout(rollout_id, attempt).values_list("preview_run__cancel_requested", flat=True))


def _rollout_to_run(*, rollout_id: int) -> list[Rollout]:
    return list(
        Rollout.objects.select_related(
            # the task's environment with its judge choice: the grade's judge resolves without a query of its own
            "preview_run__task_version__task__environment__judge_choice",
            "preview_run__task_version__environment_version",
        ).filter(pk=rollout_id)
    )


def rollout_execute(*, rollout_id: int, worker: str | None = None) -> str:
    """Run one rollout end to end in this worker; returns what happened ("done", "error", "skipped", ...).

    Claims the rollout (walks away when another worker has it), runs the episode
    through `sandbox.runtime.run_rollout` with the configured backend, stores the
    trajectory, workspace files and grade. Any exception becomes an error with
    its reason; a transient sandbox failure re-queues the rollout once.
    """
    worker = worker or worker_name()
    attempt = rollout_claim(rollout_id=rollout_id, worker=worker)
    if attempt is None:
        logger.info("rollout %s is not queued any more; another worker has it or it is finished", rollout_id)
        return "skipped"
    rollout = _rollout_to_run(rollout_id=rollout_id)[0]
    preview_run = rollout.preview_run
    heartbeat = _Heartbeat(rollout_id, attempt, interval_s=max(1.0, min(30.0, settings.ROLLOUT_STALE_AFTER_S / 4)))
    heartbeat.start()
    progress = _Progress(rollout_id, attempt, preview_run.pk)
    started = time.monotonic()
    try:
        result = _run_in_sandbox(preview_run=preview_run, progress=progress)
    except Exception as exc:  # noqa: BLE001 - every failure is stored with its reason
        heartbeat.stop()
        reason = failure_reason(exc)
        if _is_transient(exc) and attempt < Rollout.MAX_ATTEMPTS:
            if _reconnecting(
                lambda: rollout_requeue(
                    rollout_id=rollout_id, attempt=attempt, note=f"retrying after: {reason}", countdown=5
                )
            ):
                return "requeued"
        _reconnecting(lambda: rollout_fail(rollout_id=rollout_id, attempt=attempt, reason=reason))
        return "error"
    heartbeat.stop()
    if (
        result.error
        and result.retryable
        and result.grade is None
        and not progress.cancelled
        and not progress.lost
        and attempt < Rollout.MAX_ATTEMPTS
    ):
        if rollout_requeue(
            rollout_id=rollout_id, attempt=attempt, note=f"retrying after: {result.error}"[:500], countdown=5
        ):
            return "requeued"
    try:
        duration_ms = int((time.monotonic() - started) * 1000)
        return _reconnecting(
            lambda: _rollout_store(
                rollout=rollout, attempt=attempt, result=result, progress=progress, duration_ms=duration_ms
            )
        )
    except Exception as exc:
        logger.exception("could not store rollout %s", rollout_id)
        reason = f"could not store the result: {failure_reason(exc)}"
        _reconnecting(lambda: rollout_fail(rollout_id=rollout_id, attempt=attempt, reason=reason))
        return "error"


def failure_reason(exc: BaseException) -> str:
    from sandbox.runtime import SandboxError

    name = type(exc).__name__
    if name == "SoftTimeLimitExceeded":
        return "time limit exceeded: the rollout ran past the task's timeout plus the worker's margin"
    if isinstance(exc, SandboxError):
        return f"sandbox: {exc.message}"  # written for the user already; the class name says nothing more
    message = str(exc).strip()
    return f"{name}: {message}" if message else name


def _is_transient(exc: BaseException) -> bool:
    # A database connection dropped before the sandbox started (PostgreSQL restarting): running
    # the rollout again, once, will do.
    return getattr(exc, "permanent", True) is False or isinstance(exc, (OperationalError, InterfaceError))


def _rollout_store(
    *, rollout: Rollout, attempt: int, result: RolloutResult, progress: _Progress, duration_ms: int
) -> str:
    preview_run = rollout.preview_run
    if progress.lost:
        logger.info("rollout %s attempt %s lost its claim; discarding its result", rollout.pk, attempt)
        return "lost"
    # Everything the agent wrote, made storable (grading.engine.text): a rollout is stored with its grade whatever
    # its names and text hold.
    trajectory = _jsonable(result.trajectory)
    error = storable_text(result.error or "")
    if progress.cancelled or result.error_kind == "cancelled":
        status = Rollout.Status.CANCELLED
        error = error or "cancelled while running"
    elif error and result.grade is None:
        status = Rollout.Status.ERROR
    else:
        status = Rollout.Status.DONE
    with transaction.atomic():
        stored_grade = None
        if result.grade is not None:  # a rollout cancelled after it was graded keeps its grade too
            from grading.services import grade_record

            stored_grade = grade_record(
                grade=result.grade, task_version=preview_run.task_version, source="rollout", rollout_id=rollout.pk
            )
        now = timezone.now()
        updated = claimed_rollout(rollout.pk, attempt).update(
            status=status,
            trajectory=trajectory,
            answer=storable_text(result.answer),
            workspace_files=_workspace_listing(result.workspace_files, left_out=result.workspace_left_out),
            grade=stored_grade,
            reward=result.grade.reward if result.grade is not None else None,
            passed=result.grade.passed if result.grade is not None else None,
            error=error[:5000],
            duration_ms=duration_ms,
            steps=max(progress.steps, result.steps),
            prompt_tokens=int(result.usage.get("prompt_tokens", 0)),
            completion_tokens=int(result.usage.get("completion_tokens", 0)),
            finished_at=now,
            heartbeat_at=now,
            progress={"phase": "finished"},
        )
        if not updated:
            # Reaped while finishing: the newer attempt owns the row; drop this grade too.
            transaction.set_rollback(True)
            return "lost"
    preview_run_refresh(preview_run_id=preview_run.pk, known_running=True)
    return status


def _workspace_listing(files: dict, *, left_out: list[dict] = ()) -> list[dict]:
    """Stored files with their first characters; then the files the snapshot left out, with the reason."""
    listing, budget = [], WORKSPACE_CONTENT_TOTAL_MAX
    for path in sorted(files)[:WORKSPACE_MAX_FILES]:
        data = files[path]
        if isinstance(data, str):
            data = data.encode()
        entry: dict[str, Any] = {**_name_fields(path), "size": len(data or b""), "content": None, "truncated": False}
        if data is not None and b"\x00" not in data[:8192]:
            shown = data[:WORKSPACE_FILE_CONTENT_MAX]
            if len(shown) <= budget:
                entry["content"] = storable_text(shown.decode("utf-8", errors="replace"))
                entry["truncated"] = len(data) > len(shown)
                budget -= len(shown)
        listing.append(entry)
    for item in list(left_out)[:WORKSPACE_MAX_FILES]:
        listing.append(
            {
                **_name_fields(str(item.get("path", ""))),
                "size": int(item.get("size") or 0),
                "content": None,
                "truncated": False,
                "left_out": storable_text(str(item.get("reason", ""))),
            }
        )
    return listing


def _name_fields(path: str) -> dict[str, str]:
    """{"path": readable} for a workspace file, and "raw_name_b64" (its name's bytes in base64) when the name is not
    UTF-8 text: the name b'a\\xffb' is listed as the six characters a\\xffb, with its bytes kept."""
    readable, raw = storable_name(path)
    return {"path": readable} if raw is None else {"path": readable, "raw_name_b64": raw}


def _jsonable(value: Any) -> Any:
    """Plain JSON (dataclasses, pydantic models, bytes and the like turned into JSON types)."""

    def default(obj):
        if hasattr(obj, "model_dump"):
            return obj.model_dump(mode="json")
        if hasattr(obj, "__dataclass_fields__"):
            from dataclasses import asdict

            return asdict(obj)
        if isinstance(obj, bytes):
            return obj.decode("utf-8", errors="replace")
        if isinstance(obj, (set, tuple)):
            return list(obj)
        return str(obj)

    # PostgreSQL's jsonb refuses NUL characters and lone surrogates in strings: storable escapes them.
    return storable(json.loads(json.dumps(value, default=default)))


# -- the runtime, behind one function so tests can see exactly where the sandbox starts ----------


def task_files(task_version: TaskVersion) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """(workspace files, environment files) of a version, read from their blobs by sha256.

    A preview runs the same version's files N times in each worker: a blob's bytes never change for its sha256, so
    a worker process keeps the last ones it read (BLOB_CACHE_BYTES in all, none larger than a quarter of it) and
    asks the database and the storage only for the others."""
    from authoring.models import Blob

    spec = task_version.spec
    environment = spec.get("environment") or {}
    wanted = [("task", entry) for entry in spec.get("files") or []]
    wanted += [("env", entry) for entry in environment.get("files") or []]
    contents = {
        sha256: data for _, entry in wanted if (data := _blob_cache_get(sha256 := str(entry.get("sha256")))) is not None
    }
    missing = {str(entry.get("sha256")) for _, entry in wanted} - contents.keys()
    if missing:
        for blob in Blob.objects.filter(sha256__in=missing):
            with blob.file.open("rb") as handle:
                contents[blob.sha256] = data = handle.read()
            _blob_cache_put(blob.sha256, data)
    files: dict[str, bytes] = {}
    env_files: dict[str, bytes] = {}
    for where, entry in wanted:
        data = contents.get(str(entry.get("sha256")))
        if data is None:
            raise DomainError(
                f"The content of file {entry.get('path')!r} ({str(entry.get('sha256'))[:12]}) is missing from storage.",
                code="missing_blob",
            )
        (files if where == "task" else env_files)[entry["path"]] = data
    return files, env_files


BLOB_CACHE_BYTES = 64 * 1024 * 1024
_blob_cache = Kept(max_size=BLOB_CACHE_BYTES, max_value=BLOB_CACHE_BYTES // 4)  # a blob over a quarter: not kept


def _blob_cache_get(sha256: str) -> bytes | None:
    return _blob_cache.get(sha256)


def _blob_cache_put(sha256: str, data: bytes) -> None:
    _blob_cache.put(sha256, data)


def policy_model_config():
    """The runtime's ModelConfig for the `model` policy, from the admin's endpoint or the environment."""
    from grading.endpoints import endpoint_config_for
    from sandbox.runtime.policies import ModelConfig

    config = endpoint_config_for("policy", max_age_s=settings.ENDPOINT_CACHE_S)
    if config is None:
        raise DomainError("No policy model is configured.", code="no_policy_model")
    params = dict(config.params or {})
    return ModelConfig(
        base_url=config.base_url,
        model=config.model,
        api_key=config.api_key,
        temperature=params.pop("temperature", None),
        max_tokens=params.pop("max_tokens", None),
        extra=params,
    )


def _run_in_sandbox(*, preview_run: PreviewRun, progress: _Progress) -> RolloutResult:
    from grading.engine import parse_task
    from sandbox.runtime.backends import get_backend
    from sandbox.runtime.policies import make_policy
    from sandbox.runtime.rollout import run_rollout

    task_version = preview_run.task_version
    task = parse_task(task_version.spec)
    files, env_files = task_files(task_version)
    policy = make_policy(
        preview_run.policy,
        task=task,
        model_config=policy_model_config() if preview_run.policy_kind == "model" else None,
    )
    backend = get_backend(preview_run.backend, **_backend_options(preview_run.backend))
    from grading.endpoints import judge_client_for, judge_environment_of

    judge = judge_client_for(
        task_version.rubric, environment=judge_environment_of(task_version), max_age_s=settings.ENDPOINT_CACHE_S
    )
    if not connection.in_atomic_block:
        # The worker is about to block for minutes; don't hold an idle connection meanwhile.
        close_old_connections()
    return run_rollout(
        task,
        policy=policy,
        backend=backend,
        files=files,
        env_files=env_files,
        judge=judge,
        on_event=progress.on_event,
        should_cancel=progress.should_cancel,
    )


def _backend_options(backend: str) -> dict:
    from sandbox.runtime.backends.base import HostLimits

    limits = HostLimits(
        snapshot_max_bytes=settings.SANDBOX_SNAPSHOT_MAX_MB * 1024 * 1024,
        snapshot_max_files=settings.SANDBOX_SNAPSHOT_MAX_FILES,
        io_timeout_s=settings.SANDBOX_IO_TIMEOUT_S,
    )
    if backend == "bubblewrap":
        from pathlib import Path

        from gymwright.datadir import WorkDirError, sandbox_work_dir_check
        from sandbox.runtime import SandboxError

        try:
            work_dir = sandbox_work_dir_check(Path(settings.SANDBOX_WORK_DIR))
        except WorkDirError as exc:
            raise SandboxError(str(exc), permanent=True) from None
        options: dict[str, Any] = {"work_dir": str(work_dir), "limits": limits}
        if settings.SANDBOX_EGRESS:
            from sandbox.runtime.egress_filter import EgressPolicy

            try:
                options["egress"] = EgressPolicy.from_strings(settings.SANDBOX_EGRESS_ALLOW)
            except ValueError as exc:
                raise SandboxError(f"GYMWRIGHT_SANDBOX_EGRESS_ALLOW: {exc}", permanent=True) from exc
        return options
    options = {
        "limits": limits,
        "build_memory_mb": settings.SANDBOX_BUILD_MEMORY_MB,
        "build_cpus": settings.SANDBOX_BUILD_CPUS,
        "build_network": settings.SANDBOX_BUILD_NETWORK or None,
        "egress_network": (settings.SANDBOX_DOCKER_NETWORK or None) if settings.SANDBOX_EGRESS else None,
    }
    if settings.SANDBOX_IMAGE:
        options["default_image"] = settings.SANDBOX_IMAGE
    return options
