"""Dry runs: grading a candidate answer against the rubric in the editor, at once or by a worker."""

from __future__ import annotations

import logging
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from grading import engine
from grading.endpoints import judge_client_for, judge_config_for
from grading.engine.models import has_judge_checks, normalised_relative_path
from grading.models import DryRun, Grade
from grading.services.grades import grade_record
from grading.services.rubrics import rubric_from_text, rubric_parse
from gymwright import jobs
from gymwright.errors import DomainError
from gymwright.storable_input import nul_check

logger = logging.getLogger(__name__)


MAX_WORKSPACE_FILES = 200


def _dry_run_stale_after_s() -> float:
    """How long a RUNNING dry run may go on before it counts as stale (its worker died).

    The engine reports no progress while judging, so this is generous: ten judge
    timeouts, at least five minutes.
    """
    return max(300.0, settings.JUDGE_TIMEOUT_S * 10)


@dataclass(frozen=True)
class WorkspaceFile:
    """An uploaded file and where it goes in the dry run's workspace."""

    path: str
    upload: Any  # a Django File / UploadedFile


@dataclass(frozen=True)
class DryRunOutcome:
    """Either a finished grade document (graded in the request) or a DryRun a worker finishes."""

    document: dict | None = None
    dry_run: DryRun | None = None


def workspace_path_check(path: str) -> str:
    """A dry run's workspace path, normalised (the engine's path rules), or DomainError saying what is wrong."""
    try:
        return normalised_relative_path((path or "").strip())
    except ValueError as exc:
        raise DomainError(
            f"Workspace {exc}.", code="invalid_path", details=[{"pointer": "/files", "message": str(exc)}]
        ) from None


def answer_from_file(*, data: bytes, name: str = "answer file") -> str:
    """The text of an uploaded answer file: UTF-8 (a BOM is dropped), or DomainError."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DomainError(
            f"The {name} is not UTF-8 text (byte 0x{data[exc.start]:02x} at position {exc.start}); "
            "save it as UTF-8 or paste the answer instead.",
            code="invalid_answer",
            details=[{"pointer": "/answer_file", "message": "not UTF-8"}],
        ) from None
    return text.removeprefix("\ufeff")


def _workspace_files_check(files: list[WorkspaceFile]) -> list[WorkspaceFile]:
    if len(files) > MAX_WORKSPACE_FILES:
        raise DomainError(
            f"Too many workspace files ({len(files)}); at most {MAX_WORKSPACE_FILES}.", code="too_many_files"
        )
    checked, seen, total = [], set(), 0
    for item in files:
        path = workspace_path_check(item.path)
        if path in seen:
            raise DomainError(
                f"Two workspace files have the path {path!r}.",
                code="invalid_path",
                details=[{"pointer": "/files", "message": f"duplicate path {path!r}"}],
            )
        seen.add(path)
        total += item.upload.size or 0
        if total > settings.UPLOAD_MAX_BYTES:
            raise DomainError(
                f"The workspace files are larger than {size_text(settings.UPLOAD_MAX_BYTES)} in total.",
                code="too_large",
                http_status=413,
            )
        checked.append(WorkspaceFile(path=path, upload=item.upload))
    return checked


def size_text(size: int) -> str:
    """A byte count for people: "50 MB", or "1000 bytes" under a megabyte."""
    return f"{size / (1024 * 1024):g} MB" if size >= 1024 * 1024 else f"{size} bytes"


def _write_workspace(root: Path, files: list[tuple[str, bytes | Any]]) -> Path:
    for path, content in files:
        destination = (root / path).resolve()
        # workspace_path_check already refused '..'; this is the last line against symlink tricks.
        if not destination.is_relative_to(root.resolve()):
            raise DomainError(f"Workspace path {path!r} leaves the workspace.", code="invalid_path")
        try:
            destination.parent.mkdir(parents=True, exist_ok=True)
            with open(destination, "wb") as out:
                if isinstance(content, bytes):
                    out.write(content)
                else:
                    content.seek(0)
                    for chunk in content.chunks():
                        out.write(chunk)
        except (IsADirectoryError, NotADirectoryError, FileExistsError):
            raise DomainError(
                f"Workspace path {path!r} collides with another file's folder.",
                code="invalid_path",
                details=[{"pointer": "/files", "message": f"{path!r} is both a file and a folder"}],
            )
    return root


def _grade_deterministic(rubric, *, answer: str, files: list[WorkspaceFile]) -> dict:
    """Grade without a judge or a sandbox: judge checks 'no judge model configured', command/python 'needs a sandbox'.

    The rubric and files are untrusted, so the grading runs in a child process with CPU, memory
    and wall-time limits (grading.engine.isolated): nothing an author sends can stall the web process.
    """
    from grading.engine.isolated import GradeStopped, grade_in_subprocess

    process = _dry_run_process_limits()
    with tempfile.TemporaryDirectory(prefix="gymwright-dry-run-") as tmp:
        workspace = _write_workspace(Path(tmp), [(item.path, item.upload) for item in files]) if files else None
        try:
            return grade_in_subprocess(rubric.to_document(), answer=answer, workspace=workspace, process=process)
        except GradeStopped as exc:
            raise DomainError(
                f"The dry run was stopped: {exc}. Simplify the costly check (a pattern with nested "
                "repeats, a very large file) and run it again.",
                code="grading_stopped",
            ) from None


def _dry_run_process_limits():
    from grading.engine.isolated import ProcessLimits

    return ProcessLimits(
        cpu_s=settings.DRY_RUN_CPU_S,
        memory_mb=settings.DRY_RUN_MEMORY_MB,
        timeout_s=settings.DRY_RUN_TIMEOUT_S,
        cpu_setting="GYMWRIGHT_DRY_RUN_CPU_S",
        memory_setting="GYMWRIGHT_DRY_RUN_MEMORY_MB",
        timeout_setting="GYMWRIGHT_DRY_RUN_TIMEOUT_S",
    )


def _judge_environment(task):
    """The environment whose judge choice grades a dry run: its task's (none on New task: the default judge)."""
    return task.environment if task is not None else None


def dry_run_start(
    *, rubric_text: str, answer: str, files: list[WorkspaceFile] | None = None, user, task=None, task_version=None
) -> DryRunOutcome:
    """Grade a candidate answer against the rubric as it is in the editor (not saved).

    Without judge checks, or with no judge configured, it grades at once and returns the
    grade document. With judge checks and a judge, it stores a DryRun (inputs in the
    database and Django storage, so any worker can take it), enqueues the job after
    commit and returns the DryRun, whose `preview` holds the deterministic part.
    """
    rubric = rubric_from_text(text=rubric_text)
    nul_check(rubric.to_document(), what="The rubric")
    nul_check(answer, pointer="/answer", what="The answer")
    files = _workspace_files_check(list(files or []))
    document = _grade_deterministic(rubric, answer=answer, files=files)
    if not has_judge_checks(rubric) or judge_config_for(rubric, environment=_judge_environment(task)) is None:
        return DryRunOutcome(document=document)

    from grading import tasks

    folder = f"dry-runs/{uuid.uuid4().hex}"
    stored_files = []
    try:
        for item in files:
            item.upload.seek(0)
            name = default_storage.save(f"{folder}/{item.path}", item.upload)
            stored_files.append({"path": item.path, "name": name, "size": item.upload.size})
        with transaction.atomic():
            dry_run = DryRun(
                task=task,
                task_version=task_version,
                rubric=rubric.to_document(),
                answer=answer,
                files=stored_files,
                preview=document,
                created_by=user,
                enqueued_at=timezone.now(),
            )
            dry_run.full_clean()
            dry_run.save()
            jobs.send_on_commit(jobs.Job(tasks.dry_run_grade), [dry_run.id], on_unsent=_dry_runs_wait_for_broker)
    except Exception:
        _delete_stored_files(stored_files)
        raise
    if not transaction.get_connection().in_atomic_block:  # sent as it committed, or waiting for the broker
        dry_run.refresh_from_db(fields=["enqueued_at"])
    return DryRunOutcome(document=document, dry_run=dry_run)


def _delete_stored_files(stored_files: list[dict]) -> None:
    for item in stored_files:
        try:
            default_storage.delete(item["name"])
        except OSError:  # already gone: nothing to clean up
            logger.warning("could not delete dry-run file %s", item.get("name"))


def dry_run_grade(*, dry_run_id: int) -> DryRun | None:
    """Grade a queued DryRun with the judge and store its Grade. Returns None if another worker has it."""
    claimed = DryRun.objects.filter(id=dry_run_id, status=DryRun.Status.QUEUED).update(
        status=DryRun.Status.RUNNING, started_at=timezone.now()
    )
    if claimed != 1:
        return None  # already taken (a redelivered message) or gone
    dry_run = DryRun.objects.select_related("task_version", "created_by", "task__environment").get(id=dry_run_id)
    rubric = rubric_parse(data=dry_run.rubric)
    judge = judge_client_for(rubric, environment=_judge_environment(dry_run.task))
    with tempfile.TemporaryDirectory(prefix="gymwright-dry-run-") as tmp:
        workspace = None
        if dry_run.files:
            contents = []
            for item in dry_run.files:
                with default_storage.open(item["name"], "rb") as stored:
                    contents.append((workspace_path_check(item["path"]), stored.read()))
            workspace = _write_workspace(Path(tmp), contents)
        result = engine.grade(rubric, answer=dry_run.answer, workspace=workspace, judge=judge, sandbox=None)
    with transaction.atomic():
        grade = grade_record(
            grade=result, task_version=dry_run.task_version, source=Grade.Source.DRY_RUN, user=dry_run.created_by
        )
        DryRun.objects.filter(id=dry_run.id, status=DryRun.Status.RUNNING).update(
            status=DryRun.Status.DONE, grade=grade, finished_at=timezone.now()
        )
    _delete_stored_files(dry_run.files)
    dry_run.refresh_from_db()
    return dry_run


def dry_run_fail(*, dry_run_id: int, error: str) -> None:
    """Mark an unfinished DryRun as failed with a reason the panel shows."""
    with transaction.atomic():
        dry_run = DryRun.objects.select_for_update().filter(id=dry_run_id).first()
        if dry_run is None or dry_run.is_finished:
            return
        dry_run.status = DryRun.Status.ERROR
        dry_run.error = (error or "grading failed")[:2000]
        dry_run.finished_at = timezone.now()
        dry_run.save(update_fields=["status", "error", "finished_at"])
    _delete_stored_files(dry_run.files)


def dry_run_fail_if_stale(*, dry_run: DryRun) -> DryRun:
    """A RUNNING dry run whose worker went silent too long is failed, so the panel stops waiting."""
    if dry_run.status == DryRun.Status.RUNNING and dry_run.started_at is not None:
        if (timezone.now() - dry_run.started_at).total_seconds() > _dry_run_stale_after_s():
            dry_run_fail(dry_run_id=dry_run.id, error="The worker grading this dry run stopped; run it again.")
            dry_run.refresh_from_db()
    return dry_run


def _dry_runs_wait_for_broker(dry_run_ids: list[int]) -> None:
    DryRun.objects.filter(pk__in=dry_run_ids, status=DryRun.Status.QUEUED).update(enqueued_at=None)


def dry_runs_resend(lost_before=None) -> list[int]:
    """The broker check's resender (gymwright.jobs) for dry runs that wait for the broker or that it lost."""
    from grading import tasks

    return jobs.resend(
        DryRun.objects.filter(status=DryRun.Status.QUEUED),
        lost_before=lost_before,
        job=jobs.Job(tasks.dry_run_grade),
        on_unsent=_dry_runs_wait_for_broker,
    )
