"""Checks of a stored archive against its manifest and the digests recorded at build time: queued after a build and
by "Verify again", run by a worker, reaped when they stop."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from accounts import permissions
from gymwright import jobs
from gymwright.errors import DomainError, NotAllowed
from packs import archive
from packs.models import PackVerification, PackVersion


def pack_verifications_resend(lost_before=None) -> list[int]:
    """The broker check's resender for checks of an archive (queued, their job waiting or lost)."""
    return jobs.resend(
        PackVerification.objects.filter(status=PackVerification.Status.QUEUED),
        lost_before=lost_before,
        job=_verification_job(),
        on_unsent=_verifications_wait_for_broker,
    )


def verification_enqueue(verification_id: int) -> None:
    """Send a queued check to a worker once its row is committed. Its own job, not the build's: reading and hashing
    the whole archive took as long again as writing it (4.5 s of a 10,000-task build's 10 s), and a build is done
    when its archive is published; the page shows the check running, then its result. A broker that cannot take
    the job now leaves the check queued, waiting for it (gymwright.jobs); a build is not failed for it."""
    jobs.send_on_commit(_verification_job(), [verification_id], on_unsent=_verifications_wait_for_broker)


def _verification_job() -> jobs.Job:
    from packs.tasks import pack_verification_run_job

    return jobs.Job(pack_verification_run_job)


def _verifications_wait_for_broker(verification_ids: list[int]) -> None:
    PackVerification.objects.filter(pk__in=verification_ids, status=PackVerification.Status.QUEUED).update(
        enqueued_at=None
    )


# "Verify again" is refused this soon after the end of the version's last check someone asked for: each check reads
# the whole archive.
VERIFY_AGAIN_AFTER_S = 60
PROBLEMS_KEPT = 1000  # a check's problems stored and shown; a wrecked archive can have one per file


class _HashingReader:
    """A read-only stream that hashes what is read through it: the archive is read once for both checks."""

    def __init__(self, handle):
        self.handle, self.digest = handle, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.digest.update(data)
        return data


def pack_version_verify(*, pack_version: PackVersion) -> archive.Verification:
    """Check the stored archive against its manifest (archive.verify_pack, what `manage.py verify_pack` runs) and
    against the sha256 and content_sha256 recorded at build time, in one read of the archive."""
    with default_storage.open(pack_version.archive.name, "rb") as handle:
        reader = _HashingReader(handle)
        result = archive.verify_pack(reader)
        while reader.read(1 << 20):  # what the tar reader left (its end blocks, the gzip trailer, anything after)
            pass
    digest = reader.digest.hexdigest()
    digest_problems = []
    if digest != pack_version.sha256:
        digest_problems.append(f"the archive's sha256 {digest} is not the recorded {pack_version.sha256}")
    if result.manifest and result.manifest.get("content_sha256") != pack_version.content_sha256:
        digest_problems.append("the manifest's content_sha256 is not the recorded one")
    return archive.Verification(
        result.ok and not digest_problems, result.problems + digest_problems, result.manifest, result.files_checked
    )


def verifications_reap_stale(*, stale_after_s: float, now=None, pack_version_id: int | None = None) -> int:
    """Finish checks that stopped (their worker died) or never started, so that the version can be checked
    again and its page stops waiting; a check reads one archive, far less than the builds' stale period."""
    cutoff = (now or timezone.now()) - timedelta(seconds=stale_after_s)
    stale = PackVerification.objects.filter(
        Q(status=PackVerification.Status.RUNNING, started_at__lt=cutoff)
        | Q(status=PackVerification.Status.QUEUED, enqueued_at__lt=cutoff)
    )  # a check waiting for the broker waits
    if pack_version_id is not None:
        stale = stale.filter(pack_version_id=pack_version_id)
    return stale.update(
        status=PackVerification.Status.DONE,
        ok=False,
        finished_at=timezone.now(),
        problems=[
            f"the check did not finish within {stale_after_s:g} s (its worker died or its job was lost): verify again"
        ],
    )


def pack_verification_request(*, pack_version: PackVersion, user) -> PackVerification:
    """ "Verify again": a queued check of the stored archive, run by a worker after commit. One check at a time per
    version, and not within VERIFY_AGAIN_AFTER_S of the end of the last one someone asked for (each reads the
    whole archive)."""
    if not permissions.can_build_packs(user):
        raise NotAllowed("Only lab members and admins can verify packs.")
    if pack_version.status != PackVersion.Status.READY:
        raise DomainError(
            f"{pack_version} is {pack_version.get_status_display().lower()}; there is no archive to verify.",
            code="invalid_state",
            http_status=409,
        )
    verifications_reap_stale(stale_after_s=settings.PACK_BUILD_STALE_AFTER_S, pack_version_id=pack_version.pk)
    # the check that followed the build does not count: the first "Verify again" is never refused for it
    last = (
        pack_version.verifications.filter(status=PackVerification.Status.DONE, requested_by__isnull=False)
        .order_by("-finished_at")
        .first()
    )
    since = (timezone.now() - last.finished_at).total_seconds() if last is not None else None
    if since is not None and since < VERIFY_AGAIN_AFTER_S:
        raise DomainError(
            f"{pack_version} was checked {since:.0f} s ago; verify again at most once every "
            f"{VERIFY_AGAIN_AFTER_S} s (each check reads the whole archive).",
            code="too_soon",
            http_status=429,
        )
    try:
        with transaction.atomic():
            verification = PackVerification.objects.create(
                pack_version=pack_version, requested_by=user, enqueued_at=timezone.now()
            )
    except IntegrityError:  # pack_verification_one_at_a_time
        raise DomainError(
            f"{pack_version} is being verified now; its result will show here.", code="conflict", http_status=409
        )
    verification_enqueue(verification.pk)
    return verification


def pack_verification_run(*, verification_id: int) -> PackVerification | None:
    """Run a queued check (claimed with a conditional UPDATE: a redelivered job walks away) and store its result;
    an archive that cannot be read is a failed check that says why."""
    claimed = PackVerification.objects.filter(pk=verification_id, status=PackVerification.Status.QUEUED).update(
        status=PackVerification.Status.RUNNING, started_at=timezone.now()
    )
    if claimed != 1:
        return None
    verification = PackVerification.objects.select_related("pack_version__pack").get(pk=verification_id)
    try:
        result = pack_version_verify(pack_version=verification.pack_version)
        ok, problems, files_checked = result.ok, result.problems, result.files_checked
    except OSError as exc:
        ok, problems, files_checked = False, [f"the stored archive cannot be read: {exc}"], 0
    if len(problems) > PROBLEMS_KEPT:
        problems = problems[:PROBLEMS_KEPT] + [
            f"… and {len(problems) - PROBLEMS_KEPT} more problems "
            "(manage.py verify_pack on the downloaded archive lists them all)"
        ]
    PackVerification.objects.filter(pk=verification_id, status=PackVerification.Status.RUNNING).update(
        status=PackVerification.Status.DONE,
        ok=ok,
        problems=problems,
        files_checked=files_checked,
        finished_at=timezone.now(),
    )
    verification.refresh_from_db()
    return verification


def pack_verification_fail(*, verification_id: int, reason: str) -> bool:
    """Finish a check whose job blew up, with the reason; False when it had already finished."""
    unfinished = PackVerification.objects.exclude(status=PackVerification.Status.DONE).filter(pk=verification_id)
    return bool(
        unfinished.update(
            status=PackVerification.Status.DONE, ok=False, problems=[reason[:2000]], finished_at=timezone.now()
        )
    )
