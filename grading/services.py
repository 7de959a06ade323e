"""Writes for grading: storing grades, dry runs, reviewers' judge labels.

Every function here is keyword-only, validates its input and raises DomainError
(never a bare exception) for anything a user can get wrong.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from authoring.permissions import can_review
from grading import engine
from grading.endpoints import judge_client_for, judge_config_for
from grading.engine import example_answers as engine_examples
from grading.engine import scoring
from grading.engine.models import normalised_relative_path
from grading.engine.text import storable, storable_text
from grading.models import CheckResult, DryRun, ExampleRun, Grade, JudgeLabel
from gymwright import jobs
from gymwright.errors import DomainError, NotAllowed
from gymwright.nul import nul_check
from gymwright.text import comment_text

logger = logging.getLogger(__name__)


def _engine_document(grade: engine.Grade) -> dict:
    return grade.to_document()


def _invalid_grade(pointer: str, message: str) -> DomainError:
    return DomainError(
        f"Not a valid {engine.GRADE_SCHEMA} document: {pointer}: {message}",
        code="invalid_grade",
        details=[{"pointer": pointer, "message": message}],
    )


def grade_from_document(document: Any) -> engine.Grade:
    """The engine's typed Grade for a gymwright.grade/v1 dict (an import, a test), or DomainError
    with the JSON pointer of each problem. Grades the engine made need no such check."""
    if not isinstance(document, dict):
        raise DomainError(f"Expected a grade, got {type(document).__name__}", code="invalid_grade")
    try:
        grade = engine.Grade.model_validate(document)
    except ValidationError as exc:
        details = [
            {"pointer": "".join(f"/{part}" for part in error["loc"]), "message": error["msg"]} for error in exc.errors()
        ]
        summary = "; ".join(f"{d['pointer']}: {d['message']}" for d in details[:5])
        raise DomainError(
            f"Not a valid {engine.GRADE_SCHEMA} document: {summary}", code="invalid_grade", details=details
        ) from None
    for name in ("earned", "max"):
        if not math.isfinite(getattr(grade, name)):
            raise _invalid_grade(f"/{name}", "expected a finite number")
    seen: set[str] = set()
    for check, _, _, pointer in engine.flat_checks(grade.checks):
        if check.id in seen:
            raise _invalid_grade(f"{pointer}/id", f"duplicate check id {check.id!r}")
        seen.add(check.id)
    return grade


def _current_rule(grade: engine.Grade, task_version) -> tuple[engine.Grade, int]:
    """The grade, stored as given, and the scoring rule its totals follow. A document from before
    `reward_upper` (an import of an old grade): complete, both rules agree (its upper bound is its reward);
    incomplete, it is rule 1 (the migration's `scoring.retotal` is what totals such grades again)."""
    if grade.reward_upper is not None:
        return grade, scoring.SCORING_RULE
    if grade.complete:
        return grade.model_copy(update={"reward_upper": grade.reward}), scoring.SCORING_RULE
    return grade, 1


@transaction.atomic
def grade_record(
    *, grade: engine.Grade, task_version=None, source: str, user=None, rollout_id: int | None = None
) -> Grade:
    """Store the engine's Grade with one row per check, exactly as the engine computed it (its text made storable:
    an explanation may quote what the agent wrote, a NUL or a lone surrogate included)."""
    if source not in Grade.Source.values:
        raise DomainError(f"Unknown grade source {source!r}", code="invalid_grade")
    if not isinstance(grade, engine.Grade):
        raise DomainError(
            f"Expected the engine's Grade, got {type(grade).__name__}; use grade_from_document for a dict",
            code="invalid_grade",
        )
    grade, rule = _current_rule(grade, task_version)
    stored = Grade(
        task_version=task_version,
        rollout_id=rollout_id,
        source=source,
        reward=grade.reward,
        reward_upper=grade.reward_upper,
        earned=grade.earned,
        max=grade.max,
        passed=grade.passed,
        gated=grade.gated,
        complete=grade.complete,
        scoring_rule=rule,
        document=storable(grade.to_document()),
        created_by=user if user is not None and getattr(user, "is_authenticated", False) else None,
    )
    # The related rows are objects the caller holds; checking that they exist costs a query each.
    # The table's constraints are the database's to enforce; here only the fields' own rules.
    stored.full_clean(exclude=["task_version", "created_by"], validate_unique=False, validate_constraints=False)
    stored.save()
    CheckResult.objects.bulk_create(
        [
            CheckResult(
                grade=stored,
                position=position,
                depth=depth,
                parent_check_id=parent,
                check_id=check.id,
                kind=check.kind,
                title="",
                status=check.status,
                score=check.score,
                points=check.points,
                awarded=check.awarded,
                required=check.required,
                explanation=storable_text(check.explanation),
                votes=storable(list(check.votes or [])),
                duration_ms=check.duration_ms,
            )
            for position, (check, parent, depth, _) in enumerate(engine.flat_checks(grade.checks))
        ]
    )
    return stored


# ---------------------------------------------------------------- rubrics from the editor


def rubric_parse(*, data: Any):
    """The engine Rubric for `data`, or DomainError listing every problem with its JSON pointer."""
    if not isinstance(data, dict):
        raise DomainError(
            "The rubric must be a JSON object.",
            code="invalid_rubric",
            details=[{"pointer": "", "message": f"expected an object, got {type(data).__name__}"}],
        )
    try:
        return engine.parse_rubric(data)
    except engine.SpecError as exc:
        details = [{"pointer": issue.pointer, "message": issue.message} for issue in exc.issues]
        count = len(details)
        raise DomainError(
            f"The rubric has {count} problem{'s' if count != 1 else ''}.", code="invalid_rubric", details=details
        ) from None


def rubric_from_text(*, text: str):
    """Parse the raw JSON of the editor's rubric textarea, then the rubric itself."""
    if not text or not text.strip():
        raise DomainError(
            "The rubric is empty.",
            code="invalid_rubric",
            details=[{"pointer": "", "message": "write a gymwright.rubric/v1 JSON object"}],
        )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        message = f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        raise DomainError(
            f"The rubric is {message}.", code="invalid_rubric", details=[{"pointer": "", "message": message}]
        ) from None
    except ValueError as exc:  # an integer over Python's 4300-digit limit
        message = f"not valid JSON: {str(exc)[:200]}"
        raise DomainError(
            f"The rubric is {message}.", code="invalid_rubric", details=[{"pointer": "", "message": message}]
        ) from None
    except RecursionError:  # the C decoder recurses once per level of nesting
        raise DomainError(
            "The rubric is nested too deeply to read.",
            code="invalid_rubric",
            details=[{"pointer": "", "message": "nested too deeply"}],
        ) from None
    return rubric_parse(data=data)


def rubric_has_judge_checks(rubric) -> bool:
    return any(check.kind == "llm_judge" for check in rubric.iter_checks())


# ---------------------------------------------------------------- dry runs

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
    if not rubric_has_judge_checks(rubric) or judge_config_for(rubric) is None:
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
    dry_run = DryRun.objects.select_related("task_version", "created_by").get(id=dry_run_id)
    rubric = rubric_parse(data=dry_run.rubric)
    judge = judge_client_for(rubric)
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


# ---------------------------------------------------------------- reviewers' judge labels

# A scaled judge and a reviewer agree when their scores (in [0, 1]) are this close.
SCORE_AGREEMENT_TOLERANCE = 0.1


def judge_verdict_of(check_result: CheckResult) -> tuple[str, float | None]:
    """The judge's verdict on a scored llm_judge check: ("met" | "not_met", None) or ("score", score)."""
    if check_result.is_binary_judgement:
        return (JudgeLabel.Verdict.MET if check_result.score >= 0.5 else JudgeLabel.Verdict.NOT_MET), None
    return JudgeLabel.Verdict.SCORE, check_result.score


@transaction.atomic
def judge_label_record(
    *, check_result: CheckResult, reviewer, verdict: str, score: float | None = None, comment: str = ""
) -> JudgeLabel:
    """Record (or replace) `reviewer`'s verdict on one judged check.

    `verdict` is "agree" (the judge's own verdict), "met", "not_met", or "score" with
    `score` in [0, 1] for scaled judges. One label per reviewer and check.
    """
    if not can_review(reviewer):
        raise NotAllowed("Only reviewers and admins can confirm or overrule the judge.")
    if check_result.kind != "llm_judge":
        raise DomainError(
            f"{check_result.check_id} is a {check_result.kind} check, not a judged one.", code="not_judged"
        )
    if check_result.status != CheckResult.Status.SCORED:
        raise DomainError(
            f"The judge gave no verdict on {check_result.check_id} to confirm or overrule.", code="not_judged"
        )
    judge_verdict, judge_score = judge_verdict_of(check_result)
    if verdict == "agree":
        verdict, score = judge_verdict, judge_score
    if verdict not in JudgeLabel.Verdict.values:
        raise DomainError(
            f"Unknown verdict {verdict!r}: use agree, met, not_met or score.",
            code="invalid",
            details=[{"pointer": "/verdict", "message": "use agree, met, not_met or score"}],
        )
    if verdict == JudgeLabel.Verdict.SCORE:
        if score is None or not 0 <= score <= 1:
            raise DomainError(
                "A score verdict needs a score between 0 and 1.",
                code="invalid",
                details=[{"pointer": "/score", "message": "a number between 0 and 1"}],
            )
        agrees = judge_score is not None and abs(score - judge_score) <= SCORE_AGREEMENT_TOLERANCE
    else:
        score = None
        agrees = verdict == judge_verdict
    comment = comment_text(comment, pointer="/comment", what="The comment")  # a review comment's rules
    label, _ = JudgeLabel.objects.update_or_create(
        check_result=check_result,
        reviewer=reviewer,
        defaults={"verdict": verdict, "score": score, "agrees": agrees, "comment": comment},
    )
    return label


# ---------------------------------------------------------------- example answers (the rubric's own tests)


# The sandbox app grades example answers whose checks run in the sandbox (grading cannot import it):
# `example_sandbox_grader_register(enqueue)`, where enqueue(example_run) queues its job after commit.
_SANDBOX_GRADERS: list[Callable[[ExampleRun], None]] = []


def example_sandbox_grader_register(enqueue: Callable[[ExampleRun], None]) -> None:
    if enqueue not in _SANDBOX_GRADERS:
        _SANDBOX_GRADERS.append(enqueue)


def _examples_need_sandbox(rubric: dict) -> bool:
    """Whether a rubric's example answers are graded in the sandbox: it has checks that run there
    (command, python, tests, stdout targets) and this installation can (a sandbox grader is registered)."""
    return bool(_SANDBOX_GRADERS) and "sandbox" in engine_examples.rubric_needs(rubric)


def example_answers_schedule(*, versions, bulk: bool = False) -> None:
    """Grade the example answers of new task versions (authoring's version-created hook).

    A rubric without judge checks (or with no judge configured) is graded at once, like a dry
    run, in one bounded child process for all of a version's examples; one with judge checks
    and a judge is graded by a worker (enqueued after commit), and so is every version of a bulk
    import; one with checks that run in the sandbox by a sandbox worker, each example as a rollout.
    Versions without examples get no run.
    """
    if not bulk:
        for version in versions:
            example_answers_run(task_version=version)
        return
    # An import's batch: new versions (no earlier runs), one INSERT for their runs, graded by workers;
    # the judge configuration comes from this process's cache, not a lookup per version.
    now = timezone.now()
    runs = ExampleRun.objects.bulk_create(
        [
            ExampleRun(
                task_version=version,
                total=len(version.spec["examples"]),
                enqueued_at=now,
                needs_judge=_examples_need_judge(version.spec.get("rubric") or {}, max_age_s=60),
                needs_sandbox=_examples_need_sandbox(version.spec.get("rubric") or {}),
                requested_by_id=version.author_id,
            )
            for version in versions
            if version.spec.get("examples")
        ]
    )
    if runs:
        from grading import tasks

        for run in runs:
            if run.needs_sandbox:
                _SANDBOX_GRADERS[0](run)
        jobs.send_on_commit(
            jobs.Job(tasks.example_answers_grade),
            [run.id for run in runs if not run.needs_sandbox],
            on_unsent=example_runs_wait_for_broker,
        )


def example_runs_wait_for_broker(example_run_ids: list[int]) -> None:
    """The broker did not take these runs' jobs: they wait for it, and the broker check sends them."""
    ExampleRun.objects.filter(pk__in=example_run_ids, status=ExampleRun.Status.QUEUED).update(enqueued_at=None)


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


def example_runs_resend(lost_before=None) -> list[int]:
    """The broker check's resender for example answers graded by workers."""
    from grading import tasks

    # runs graded in the sandbox are sent by sandbox.examples with their own time limits, not here
    return jobs.resend(
        ExampleRun.objects.filter(status=ExampleRun.Status.QUEUED, needs_sandbox=False),
        lost_before=lost_before,
        job=jobs.Job(tasks.example_answers_grade),
        on_unsent=example_runs_wait_for_broker,
    )


def _examples_need_judge(rubric: dict, *, max_age_s: float = 0) -> bool:
    """Whether a rubric's example answers go to a worker: it has judge checks and a judge is configured."""
    return "judge" in engine_examples.rubric_needs(rubric) and judge_config_for(rubric, max_age_s=max_age_s) is not None


def example_answers_run(*, task_version, user=None) -> ExampleRun | None:
    """(Re)grade `task_version`'s example answers; the new ExampleRun, or None when it has none.

    With a `user` (the task page's "Grade again"), only someone who may edit or review the task
    may ask, and not while a run is still going.
    """
    if user is not None:
        from authoring.permissions import can_edit_task

        if not (can_edit_task(user, task_version.task) or can_review(user)):
            raise NotAllowed("Only the task's authors and reviewers can grade its example answers again.")
    examples = task_version.spec.get("examples") or []
    if not examples:
        return None
    rubric = task_version.spec.get("rubric") or {}
    needs_judge = _examples_need_judge(rubric)
    with transaction.atomic():
        previous = ExampleRun.objects.select_for_update().filter(task_version=task_version).first()
        if previous is not None:
            if user is not None and not previous.is_finished:
                raise DomainError(
                    "The example answers are being graded; wait for this run to finish.",
                    code="already_running",
                    http_status=409,
                )
            previous.delete()
        needs_sandbox = _examples_need_sandbox(rubric)
        run = ExampleRun.objects.create(
            task_version=task_version,
            total=len(examples),
            needs_judge=needs_judge,
            needs_sandbox=needs_sandbox,
            enqueued_at=timezone.now(),
            requested_by=user if user is not None else task_version.author,
        )
        if needs_sandbox:
            _SANDBOX_GRADERS[0](run)
            return run
        if needs_judge:
            from grading import tasks

            jobs.send_on_commit(jobs.Job(tasks.example_answers_grade), [run.id], on_unsent=example_runs_wait_for_broker)
            return run
    try:
        with transaction.atomic():  # a savepoint: a failure here leaves the caller's transaction usable
            return example_answers_grade(example_run_id=run.id) or run
    except Exception as exc:  # grading the examples must never lose the version being saved
        logger.exception("grading the example answers of version %s failed", task_version.pk)
        example_answers_fail(example_run_id=run.id, error=f"Grading failed: {exc}")
        run.refresh_from_db()
        return run


def _example_workspace(root: Path, example: dict) -> Path:
    """The example's files in a fresh workspace; an empty one without files, so that a check on a
    file the example lacks is "not met" (as after a rollout), not unscored."""
    return _write_workspace(root, engine_examples.example_workspace_files(example))


def example_result(example: dict, document: dict | None, *, error: str = "") -> dict:
    """What an ExampleRun stores for one example: its verdict's fields and its grade document (None, with
    `error` saying why, when it has none)."""
    if document is None:
        verdict = engine_examples.example_failed(example, error or "not graded")
    else:
        verdict = engine_examples.example_verdict(example, document)
    return {**verdict.to_dict(), "grade": document}


def example_answers_claim(*, example_run_id: int) -> ExampleRun | None:
    """Claim a queued ExampleRun for grading (QUEUED → RUNNING); None if another worker has it or it was
    replaced."""
    claimed = ExampleRun.objects.filter(id=example_run_id, status=ExampleRun.Status.QUEUED).update(
        status=ExampleRun.Status.RUNNING, started_at=timezone.now()
    )
    if claimed != 1:
        return None  # a redelivered message, or the run was replaced
    return ExampleRun.objects.select_related("task_version").get(id=example_run_id)


def example_answers_progress(*, example_run_id: int, graded: int) -> None:
    ExampleRun.objects.filter(id=example_run_id, status=ExampleRun.Status.RUNNING).update(graded=graded)


def example_answers_finish(*, example_run_id: int, results: list[dict]) -> ExampleRun:
    """Store a running ExampleRun's results (one `example_result` per example) and mark it done."""
    ExampleRun.objects.filter(id=example_run_id, status=ExampleRun.Status.RUNNING).update(
        status=ExampleRun.Status.DONE, results=results, graded=len(results), finished_at=timezone.now()
    )
    return ExampleRun.objects.get(id=example_run_id)


def example_answers_grade(*, example_run_id: int) -> ExampleRun | None:
    """Grade a queued ExampleRun and store each example's verdict. None if another worker has it."""
    from grading.engine.isolated import GradeStopped, grade_many_in_subprocess

    run = example_answers_claim(example_run_id=example_run_id)
    if run is None:
        return None
    spec = run.task_version.spec
    examples = spec.get("examples") or []
    rubric = rubric_parse(data=spec.get("rubric"))
    judge = judge_client_for(rubric, max_age_s=settings.ENDPOINT_CACHE_S) if run.needs_judge else None
    results = []
    if judge is None:
        # Deterministic: the dry run's path, every example in one bounded child process.
        with tempfile.TemporaryDirectory(prefix="gymwright-examples-") as tmp:
            items = []
            for index, example in enumerate(examples):
                root = Path(tmp) / str(index)
                root.mkdir()
                items.append((example["answer"], _example_workspace(root, example)))
            try:
                documents = grade_many_in_subprocess(
                    rubric.to_document(), items=items, process=_dry_run_process_limits()
                )
                results = [example_result(example, document) for example, document in zip(examples, documents)]
            except GradeStopped as exc:
                results = [example_result(example, None, error=f"grading was stopped: {exc}") for example in examples]
    else:
        # Judged: in this worker, like a judged dry run, one example at a time with progress.
        for index, example in enumerate(examples):
            with tempfile.TemporaryDirectory(prefix="gymwright-examples-") as tmp:
                workspace = _example_workspace(Path(tmp), example)
                graded = engine.grade(rubric, answer=example["answer"], workspace=workspace, judge=judge, sandbox=None)
            results.append(example_result(example, graded.to_document()))
            example_answers_progress(example_run_id=run.id, graded=index + 1)
    return example_answers_finish(example_run_id=run.id, results=results)


def example_answers_fail(*, example_run_id: int, error: str) -> None:
    """Mark an unfinished ExampleRun as failed with the reason the task page shows."""
    ExampleRun.objects.filter(
        id=example_run_id, status__in=[ExampleRun.Status.QUEUED, ExampleRun.Status.RUNNING]
    ).update(status=ExampleRun.Status.ERROR, error=(error or "grading failed")[:2000], finished_at=timezone.now())


def example_run_fail_if_stale(*, run: ExampleRun | None, now=None) -> ExampleRun | None:
    """A run no worker finished in time (a worker died, or none is running) is failed with the
    reason, so the page stops waiting and offers "Grade again" (the rollout reaper applies it to sandbox runs)."""
    if run is None or run.is_finished:
        return run
    since = run.started_at if run.status == ExampleRun.Status.RUNNING and run.started_at else run.created_at
    limit = _dry_run_stale_after_s()
    if run.needs_sandbox:  # each example is a rollout of up to the environment's time limit
        limits = (run.task_version.spec.get("environment") or {}).get("limits") or {}
        limit += run.total * (float(limits.get("timeout_s") or 600) + settings.ROLLOUT_STALE_AFTER_S)
    if ((now or timezone.now()) - since).total_seconds() > limit:
        waiting = "no worker took the job" if run.status == ExampleRun.Status.QUEUED else "the worker stopped"
        example_answers_fail(example_run_id=run.pk, error=f"Grading did not finish: {waiting}; grade them again.")
        run.refresh_from_db()
    return run
