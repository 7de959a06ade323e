"""A pack version's build: start it (entries pinned, job enqueued), run it through the pure writer
(packs.archive) into a temporary file, publish the archive to Django storage only when it is complete; fail,
cancel and reap builds. A failed or cancelled build stores no archive and keeps the reason."""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

import gymwright
from accounts import permissions
from authoring.models import AuditEvent, TaskVersion
from authoring.services import audit_record, blob_read
from grading.engine.calibration import binary_judged_checks
from grading.engine.scoring import SCORING_RULE
from gymwright import jobs
from gymwright.bulk import bulk_insert_rows
from gymwright.errors import DomainError, NotAllowed
from packs import archive
from packs.models import PackEntry, PackVerification, PackVersion, TaskPack
from packs.services.plans import Selection, UnchangedBuild, pack_version_plan
from packs.services.scratch import scratch_own, scratch_root
from packs.services.verifications import verification_enqueue, verifications_reap_stale
from review.blind import pack_entries as blind_pack_entries
from review.calibration import pack_judge_json
from sandbox.models import PreviewRun

logger = logging.getLogger(__name__)


# Seconds between progress writes (and cancel checks) of a build: the pack page polls about once a
# second. (Every 50 tasks was 400 queries for a 10,000-task build, ~6 % of its time.)
PROGRESS_WRITE_INTERVAL_S = 0.5
CHUNK = 500


@transaction.atomic
def pack_version_start(
    *,
    pack: TaskPack,
    user,
    selection: Selection,
    version: str | None = None,
    enqueue: bool = True,
    allow_unchanged: bool = True,
    on_unchanged: Callable[[UnchangedBuild], None] | None = None,
) -> PackVersion:
    """A new PackVersion in `building`, its entries pinned now; the build job is enqueued after commit.
    A build that changes nothing: with `allow_unchanged=False`, UnchangedBuild (carrying the plan) is raised;
    otherwise it goes ahead, and `on_unchanged` is told first (the command line's note), from the one plan."""
    pack = TaskPack.objects.select_for_update().get(pk=pack.pk)
    plan = pack_version_plan(pack=pack, user=user, selection=selection, version=version)
    if plan.unchanged and not allow_unchanged:
        raise UnchangedBuild(plan)
    if plan.unchanged and on_unchanged is not None:
        on_unchanged(UnchangedBuild(plan))
    text, proposal, changes, versions = plan.version, plan.semver, plan.changes, plan.rows
    try:
        with transaction.atomic():
            pack_version = PackVersion.objects.create(
                pack=pack,
                version=text,
                major=proposal[0],
                minor=proposal[1],
                patch=proposal[2],
                selection=selection.as_dict(),
                changes=changes,
                progress_total=len(versions),
                created_by=user,
                enqueued_at=timezone.now(),
            )  # NULL only when the broker does not take the job
    except IntegrityError:
        raise DomainError(f"{pack.slug} {text} was just started by someone else.", code="conflict", http_status=409)
    bulk_insert_rows(
        PackEntry,
        ("pack_version_id", "task_version_id", "task_slug", "split"),
        [(pack_version.pk, pk, slug, plan.split_by_slug[slug]) for pk, slug, _ in versions],
    )
    audit_record(
        actor=user,
        verb=AuditEvent.Verb.BUILD,
        target=pack,
        summary=f"{pack.slug} {text}: started a build of {len(versions)} tasks",
        data={"version": text, "tasks": len(versions)},
    )
    if enqueue:
        jobs.send_on_commit(_build_job(), [pack_version.pk], on_unsent=_builds_wait_for_broker)
    return pack_version


def _build_job() -> jobs.Job:
    from packs.tasks import pack_version_build_job

    return jobs.Job(pack_version_build_job)


def _builds_wait_for_broker(pack_version_ids: list[int]) -> None:
    """The broker did not take these builds' jobs: they wait for it (the API and the page say so), and the broker
    check sends them when it answers again."""
    PackVersion.objects.filter(pk__in=pack_version_ids, heartbeat_at__isnull=True).building_update(enqueued_at=None)


def pack_builds_resend(lost_before=None) -> list[int]:
    """The broker check's resender (gymwright.jobs): builds no worker has started whose job waits for the broker,
    or was sent before `lost_before` (the broker lost it). A build that is already under way is left alone."""
    unstarted = PackVersion.objects.filter(
        status=PackVersion.Status.BUILDING, heartbeat_at__isnull=True, cancel_requested=False
    )
    return jobs.resend(
        unstarted,
        lost_before=lost_before,
        job=_build_job(),
        on_unsent=_builds_wait_for_broker,
        update=lambda queryset, **changes: queryset.building_update(**changes),
    )


def _calibration(summary: dict | None, policy: str) -> dict | None:
    if not summary or summary.get("graded") in (None, 0):
        return None
    if summary.get("scoring_rule", SCORING_RULE) < SCORING_RULE:
        return None  # graded under the old scoring rule (unscored checks left out of max): run it again
    return {
        "policy": policy,
        "n": summary.get("graded"),
        "pass_rate": summary.get("pass_rate"),
        "pass_at_k": summary.get("pass_at_k"),
        "mean_reward": summary.get("mean_reward"),
    }


def _task_items(pack_version: PackVersion) -> Iterator[archive.TaskItem]:
    """The pinned task versions, in slug order, a chunk at a time, with their last finished model
    preview. Only a model measures difficulty: oracle, nop, probe and hack previews are sanity
    checks that pass or fail by design (the gates run the hack probes last, which made every gated
    task "unsolved")."""
    entries = (
        PackEntry.objects.filter(pack_version=pack_version)
        .order_by("task_slug")
        .values_list("task_version_id", flat=True)
    )
    ids = list(entries.iterator(chunk_size=5000))
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        versions = {row[0]: row for row in TaskVersion.objects.filter(pk__in=chunk).values_list("pk", "spec", "sha256")}
        previews: dict[int, dict | None] = {}
        judged_runs: dict[int, int] = {}  # version id -> its model preview, where the rubric has judged checks
        for run in (
            PreviewRun.objects.filter(task_version_id__in=chunk, status=PreviewRun.Status.DONE, policy_kind="model")
            .order_by("task_version_id", "-created_at", "-id")
            .values("task_version_id", "summary", "policy", "id")
        ):
            if run["task_version_id"] not in previews:
                previews[run["task_version_id"]] = _calibration(run["summary"], run["policy"])
                if previews[run["task_version_id"]] is not None and binary_judged_checks(
                    versions[run["task_version_id"]][1].get("rubric")
                ):
                    judged_runs[run["task_version_id"]] = run["id"]
        if judged_runs:
            _add_judge_calibration(previews, judged_runs)
        _add_human_prediction(previews, chunk)
        for pk in chunk:
            _, spec, sha256 = versions[pk]
            yield archive.TaskItem(document=spec, sha256=sha256, calibration=previews.get(pk))


def _add_human_prediction(previews: dict[int, dict | None], chunk: list[int]) -> None:
    """Each task with blind human scores gains "human_prediction" (review.blind): how its reward ranks rollouts
    against them, over the task's scored rollouts of any version; read for the whole chunk at once."""
    task_of = dict(TaskVersion.objects.filter(pk__in=chunk).values_list("pk", "task_id"))
    entries = blind_pack_entries(task_ids=set(task_of.values()))
    for version_id, task_id in task_of.items():
        if task_id in entries:
            previews[version_id] = {**(previews.get(version_id) or {}), "human_prediction": entries[task_id]}


def _add_judge_calibration(previews: dict[int, dict | None], judged_runs: dict[int, int]) -> None:
    """Each judged task's calibration gains "judge": its judges' TPR / TNR from reviewers' labels and its preview's
    pass rates corrected by them (review.calibration), as the preview page shows them."""
    runs = PreviewRun.objects.select_related("task_version__task__environment").filter(pk__in=judged_runs.values())
    for run in runs:
        judge = pack_judge_json(preview_run=run)
        if judge is not None:
            previews[run.task_version_id] = {**previews[run.task_version_id], "judge": judge}


def pack_info(pack_version: PackVersion) -> archive.PackInfo:
    pack = pack_version.pack
    return archive.PackInfo(
        slug=pack.slug,
        name=pack.name,
        version=pack_version.version,
        description=pack.description,
        licence=pack.licence,
        test_ratio=float(pack_version.selection.get("test_ratio", 0.1)),
        gymwright_version=gymwright.__version__,
    )


def _archive_name(pack_version: PackVersion) -> str:
    """Where this build attempt stores its archive: a name no other attempt uses (a redelivered job may build the
    same version twice at once), so that a failed attempt removes exactly the file it wrote, even a partial one."""
    return f"packs/{pack_version.pack.slug}/{pack_version.version}-{uuid.uuid4().hex[:12]}/{pack_version.filename}"


def _storage_delete_quietly(name: str) -> None:
    try:
        if default_storage.exists(name):
            default_storage.delete(name)
    except Exception:  # the build's outcome stands; the file is logged for a person to remove
        logger.exception("could not remove the unpublished pack archive %s", name)


def pack_version_build(*, pack_version_id: int) -> PackVersion:
    """Build a `building` PackVersion, publish its archive and verify it; a no-op for a finished one."""
    pack_version = PackVersion.objects.select_related("pack", "created_by").get(pk=pack_version_id)
    if pack_version.is_finished:
        return pack_version
    PackVersion.objects.filter(pk=pack_version.pk).building_update(heartbeat_at=timezone.now())
    scratch = Path(tempfile.mkdtemp(prefix=f"pack-{pack_version.pk}-", dir=scratch_root()))
    scratch_own(scratch)
    temporary = scratch / "archive.tar.gz"

    last_write = time.monotonic()

    def progress(done: int) -> None:
        nonlocal last_write
        now = time.monotonic()
        if now - last_write < PROGRESS_WRITE_INTERVAL_S and done != pack_version.progress_total:
            return
        last_write = now
        PackVersion.objects.filter(pk=pack_version.pk).building_update(progress_done=done, heartbeat_at=timezone.now())
        if PackVersion.objects.filter(pk=pack_version.pk, cancel_requested=True).exists():
            raise archive.BuildCancelled()

    user = pack_version.created_by
    # The stored file this attempt is responsible for until the version's row names it: removed on every way
    # out but publishing (a cancel or a reap that lands while it is being saved, any error after the save, an
    # error in the middle of the save). It is removed directly, not on commit: the transaction that finds the
    # build cancelled is the one that rolls back, and a rollback drops its on-commit callbacks.
    unpublished: str | None = None
    verification = None
    try:
        result = archive.build_pack(
            out=temporary,
            info=pack_info(pack_version),
            tasks=_task_items(pack_version),
            read_blob=lambda sha256: blob_read(sha256=sha256),
            scratch_dir=scratch / "tree",
            build_record={
                "created_at": pack_version.created_at.isoformat(),
                "created_by": user.get_username() if user else None,
            },
            progress=progress,
        )
        if result.size > settings.PACK_MAX_BYTES:
            raise archive.PackError(
                f"the archive is {result.size} bytes, over the {settings.PACK_MAX_BYTES}-byte "
                "limit (GYMWRIGHT_PACK_MAX_MB)"
            )
        unpublished = _archive_name(pack_version)
        with open(temporary, "rb") as handle:
            unpublished = default_storage.save(unpublished, File(handle), max_length=300)
        with transaction.atomic():
            updated = PackVersion.objects.filter(pk=pack_version.pk, cancel_requested=False).building_update(
                status=PackVersion.Status.READY,
                archive=unpublished,
                size=result.size,
                sha256=result.sha256,
                content_sha256=result.content_sha256,
                manifest=archive.manifest_summary(result.manifest),
                progress_done=pack_version.progress_total,
                finished_at=timezone.now(),
            )
            if updated != 1:  # cancelled, or reaped, while it was being written or saved
                raise archive.BuildCancelled()
            audit_record(
                actor=user,
                verb=AuditEvent.Verb.BUILD,
                target=pack_version.pack,
                summary=f"{pack_version.pack.slug} {pack_version.version}: built ({result.size} bytes)",
                data={
                    "version": pack_version.version,
                    "sha256": result.sha256,
                    "content_sha256": result.content_sha256,
                },
            )
            # in the same transaction: a ready version always has its check, queued if not run yet
            verification = PackVerification.objects.create(pack_version_id=pack_version.pk, enqueued_at=timezone.now())
        unpublished = None
    except archive.BuildCancelled:
        pack_version_fail(pack_version_id=pack_version.pk, reason="cancelled by a user")
    except (archive.PackError, DomainError) as exc:
        pack_version_fail(pack_version_id=pack_version.pk, reason=str(exc))
    except Exception as exc:
        logger.exception("pack build %s failed", pack_version.pk)
        pack_version_fail(pack_version_id=pack_version.pk, reason=f"internal error: {type(exc).__name__}: {exc}")
    finally:
        if unpublished is not None:
            _storage_delete_quietly(unpublished)
        shutil.rmtree(scratch, ignore_errors=True)
    if verification is not None:  # published: checked from storage, as "Verify again" does, by its own job
        verification_enqueue(verification.pk)
    return PackVersion.objects.select_related("pack").get(pk=pack_version.pk)


@transaction.atomic
def pack_version_fail(*, pack_version_id: int, reason: str, stale_before=None, unstarted: bool = False) -> bool:
    """Mark a building version failed with `reason` (no archive); False when it had already finished.
    With `stale_before`, only if its build has not reported since then (the reaper's check,
    repeated inside the UPDATE so that a build that just reported keeps going); with `unstarted`, only if
    no worker has started it."""
    pack_version = PackVersion.objects.select_related("pack", "created_by").get(pk=pack_version_id)
    queryset = PackVersion.objects.filter(pk=pack_version_id)
    if stale_before is not None:
        queryset = queryset.filter(_silent_since(stale_before))
    if unstarted:
        queryset = queryset.filter(heartbeat_at__isnull=True)
    updated = queryset.building_update(
        status=PackVersion.Status.FAILED, failure_reason=reason[:2000], finished_at=timezone.now()
    )
    if updated:
        audit_record(
            actor=pack_version.created_by,
            verb=AuditEvent.Verb.BUILD_FAILED,
            target=pack_version.pack,
            summary=f"{pack_version.pack.slug} {pack_version.version}: {reason}"[:300],
            data={"version": pack_version.version, "reason": reason[:2000]},
        )
    return bool(updated)


def _silent_since(moment) -> Q:
    """Builds silent since `moment`: started and not heard from since, or sent to the workers before it and never
    started. One whose job waits for the broker (`enqueued_at` NULL) is not silent: it has not been sent yet."""
    return Q(heartbeat_at__lt=moment) | Q(heartbeat_at__isnull=True, enqueued_at__lt=moment)


def pack_versions_reap_stale(*, stale_after_s: float | None = None, now=None) -> list[int]:
    """Fail building versions whose build stopped reporting (its worker died mid-build, or the job
    was lost before any worker took it), with the reason; a build that reports again afterwards
    finds its version finished and stops. Checks of an archive that stopped as long ago are finished as
    failed too. Safe from any number of processes: conditional UPDATEs."""
    stale_after_s = settings.PACK_BUILD_STALE_AFTER_S if stale_after_s is None else stale_after_s
    cutoff = (now or timezone.now()) - timedelta(seconds=stale_after_s)
    reaped = []
    for row in (
        PackVersion.objects.filter(status=PackVersion.Status.BUILDING)
        .filter(_silent_since(cutoff))
        .values("pk", "heartbeat_at")
    ):
        what = "the build stopped reporting" if row["heartbeat_at"] else "no worker started the build"
        reason = (
            f"{what} for more than {stale_after_s:g} s (its worker died or its job was lost); "
            "nothing was published — start the build again"
        )
        if pack_version_fail(pack_version_id=row["pk"], reason=reason, stale_before=cutoff):
            reaped.append(row["pk"])
            logger.warning("reaped stale pack build %s: %s", row["pk"], reason)
    verifications_reap_stale(stale_after_s=stale_after_s, now=now)
    return reaped


def pack_version_cancel(*, pack_version: PackVersion, user) -> None:
    if not permissions.can_build_packs(user):
        raise NotAllowed("Only lab members and admins can cancel builds.")
    if pack_version.is_finished:
        raise DomainError(f"{pack_version} has already finished.", code="invalid_state", http_status=409)
    PackVersion.objects.filter(pk=pack_version.pk).building_update(cancel_requested=True)
    # A build no worker has started (its job waits for the broker, or is queued) ends now; one that starts
    # later finds it finished, and one that started meanwhile sees the flag.
    pack_version_fail(pack_version_id=pack_version.pk, reason="cancelled by a user", unstarted=True)
