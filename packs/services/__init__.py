"""Writes for task packs, one module per thing (as Zulip's zerver/actions): packs (create a pack, record a
download), plans (what a selection picks and the version a build would get), builds (start, run, fail, cancel
and reap a PackVersion's build), scratch (a build's folder on this host) and verifications (checks of a stored
archive). Callers import from here.

A build reads the approved version of each selected task (Task.approved_version, never a later
draft) in task-slug order, streams them through the pure writer (packs.archive) into a temporary
file, and publishes the archive to Django storage only when it is complete. A failed or
cancelled build stores no archive and keeps the reason.
"""

from packs.services.builds import (
    _calibration,
    pack_builds_resend,
    pack_info,
    pack_version_build,
    pack_version_cancel,
    pack_version_fail,
    pack_version_start,
    pack_versions_reap_stale,
)
from packs.services.health import dataset_check_fail, dataset_check_run, dataset_check_start
from packs.services.packs import pack_create, pack_version_download_record
from packs.services.plans import (
    BuildPlan,
    Selection,
    UnchangedBuild,
    pack_changes,
    pack_version_plan,
    pack_version_propose,
    parse_semver,
    selected_versions,
)
from packs.services.scratch import pack_scratch_reap
from packs.services.verifications import (
    pack_verification_fail,
    pack_verification_request,
    pack_verification_run,
    pack_verifications_resend,
    pack_version_verify,
)

__all__ = [
    "BuildPlan",
    "Selection",
    "UnchangedBuild",
    "_calibration",
    "dataset_check_fail",
    "dataset_check_run",
    "dataset_check_start",
    "pack_builds_resend",
    "pack_changes",
    "pack_create",
    "pack_info",
    "pack_scratch_reap",
    "pack_verification_fail",
    "pack_verification_request",
    "pack_verification_run",
    "pack_verifications_resend",
    "pack_version_build",
    "pack_version_cancel",
    "pack_version_download_record",
    "pack_version_fail",
    "pack_version_plan",
    "pack_version_propose",
    "pack_version_start",
    "pack_version_verify",
    "pack_versions_reap_stale",
    "parse_semver",
    "selected_versions",
]
