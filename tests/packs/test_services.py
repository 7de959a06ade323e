"""Building pack versions from approved task versions: selection, semver, publishing, failure, audit."""

from __future__ import annotations

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError

from authoring import services as authoring_services
from authoring.models import AuditEvent, ImmutableRowError
from gymwright.errors import DomainError, NotAllowed
from packs import archive, services
from packs.models import PackVersion
from review import services as review_services
from tests.packs.conftest import build_and_verify, make_approved
from tests.packs.storage_hooks import hooked_storage, stored_archives  # noqa: F401 - a fixture


def build(pack, user, **selection):
    version = selection.pop("version", None)
    pack_version = services.pack_version_start(
        pack=pack, user=user, selection=services.Selection(**selection), version=version, enqueue=False
    )
    return build_and_verify(pack_version.pk)


@pytest.fixture
def pack(lab):
    return services.pack_create(slug="maths-pack", user=lab, name="Maths", licence="CC-BY-4.0")


def test_a_lab_member_builds_a_pack_of_the_approved_versions_not_later_drafts(pack, lab, author, approved_tasks):
    drafted = approved_tasks[0]
    authoring_services.task_version_create(
        task=drafted,
        author=author,
        base_version=1,
        content={**authoring_services.task_version_content(drafted.latest_version), "prompt": "a later draft"},
    )
    pack_version = build(pack, lab)
    assert pack_version.status == PackVersion.Status.READY, pack_version.failure_reason
    assert pack_version.version == "1.0.0"
    assert pack_version.entries.count() == 12
    entry = pack_version.entries.get(task_slug=drafted.slug)
    assert entry.task_version.number == 1
    assert pack_version.manifest["tasks"][0] == {
        "id": drafted.slug,
        "version": 1,
        "sha256": entry.task_version.sha256,
        "split": entry.split,
    }
    assert default_storage.exists(pack_version.archive.name)
    assert default_storage.size(pack_version.archive.name) == pack_version.size
    assert services.pack_version_verify(pack_version=pack_version).ok
    verbs = set(
        AuditEvent.objects.filter(object_id=pack.pk, content_type__model="taskpack").values_list("verb", flat=True)
    )
    assert {"create", "build"} <= verbs


def test_drafts_and_unapproved_tasks_are_never_packed(pack, lab, author, reviewer, approved_tasks):
    from authoring.models import Environment

    authoring_services.task_create(
        slug="just-a-draft",
        environment=Environment.objects.get(slug="shell"),
        author=author,
        content={"title": "d", "prompt": "p", "rubric": approved_tasks[0].latest_version.rubric},
    )
    pack_version = build(pack, lab)
    assert "just-a-draft" not in set(pack_version.entries.values_list("task_slug", flat=True))
    with pytest.raises(DomainError, match="There is no approved task 'just-a-draft'"):  # as a lab member reads it
        build(pack, lab, tasks=("just-a-draft",))


def test_tags_select_by_the_approved_version_not_a_later_draft(pack, lab, author, approved_tasks):
    retagged = approved_tasks[0]
    authoring_services.task_version_create(
        task=retagged,
        author=author,
        base_version=1,
        content={**authoring_services.task_version_content(retagged.latest_version), "tags": ["physics"]},
    )
    retagged.refresh_from_db()
    assert set(retagged.tags.values_list("name", flat=True)) == {"physics"}  # the head follows the draft
    maths = build(pack, lab, tags=("maths",))
    assert set(maths.entries.values_list("task_slug", flat=True)) == {t.slug for t in approved_tasks}
    assert maths.entries.get(task_slug=retagged.slug).task_version.number == 1
    with pytest.raises(DomainError, match="No approved task matches"):
        build(pack, lab, tags=("physics",))  # only the unapproved draft has it
    with pytest.raises(DomainError, match="No approved task matches"):
        build(pack, lab, tags=("maths", "physics"))  # a task needs every tag


def test_the_next_version_follows_the_changes_and_may_be_raised_never_lowered(
    pack, lab, author, reviewer, admin, approved_tasks
):
    assert build(pack, lab, tasks=tuple(t.slug for t in approved_tasks[:5])).version == "1.0.0"
    assert build(pack, lab, tasks=tuple(t.slug for t in approved_tasks[:6])).version == "1.1.0"  # added
    changed = approved_tasks[2]
    authoring_services.task_version_create(
        task=changed,
        author=author,
        base_version=1,
        content={**authoring_services.task_version_content(changed.latest_version), "prompt": "reworded"},
    )
    changed.refresh_from_db()
    review_services.task_submit(task=changed, user=admin, override_reason="no previews in this test")
    review_services.review_create(task_version=changed.latest_version, reviewer=reviewer, decision="approve")
    patched = build(pack, lab, tasks=tuple(t.slug for t in approved_tasks[:6]))
    assert patched.version == "1.1.1"
    assert patched.changes == {"added": [], "removed": [], "changed": [{"id": changed.slug, "from": 1, "to": 2}]}
    assert build(pack, lab, tasks=tuple(t.slug for t in approved_tasks[1:6])).version == "2.0.0"  # removed
    with pytest.raises(DomainError, match="never lowered"):
        build(pack, lab, version="1.9.0")
    with pytest.raises(DomainError, match="already exists|never lowered"):
        build(pack, lab, version="2.0.0")
    assert build(pack, lab, version="5.0.0").version == "5.0.0"


def test_a_built_version_cannot_be_changed(pack, lab, approved_tasks):
    pack_version = build(pack, lab)
    with pytest.raises(ImmutableRowError):
        PackVersion.objects.filter(pk=pack_version.pk).update(size=1)
    with pytest.raises(ImmutableRowError):
        pack_version.save()
    assert PackVersion.objects.filter(pk=pack_version.pk).building_update(size=1) == 0
    assert not services.pack_version_fail(pack_version_id=pack_version.pk, reason="late")


def test_a_failed_build_leaves_no_archive_and_says_why(pack, lab, approved_tasks, monkeypatch):
    def broken(**kwargs):
        raise archive.PackError("task task-03: file 'x' does not match its sha256")

    monkeypatch.setattr(archive, "build_pack", broken)
    pack_version = build(pack, lab)
    assert pack_version.status == PackVersion.Status.FAILED
    assert "does not match its sha256" in pack_version.failure_reason
    assert not pack_version.archive
    assert not default_storage.exists(f"packs/{pack.slug}")
    assert AuditEvent.objects.filter(verb="build_failed", object_id=pack.pk).exists()


def test_a_cancelled_build_stops_and_leaves_no_archive(pack, lab, approved_tasks, monkeypatch):
    pack_version = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    services.pack_version_cancel(pack_version=pack_version, user=lab)
    monkeypatch.setattr(services.builds, "PROGRESS_WRITE_INTERVAL_S", 0)
    finished = services.pack_version_build(pack_version_id=pack_version.pk)
    assert finished.status == PackVersion.Status.FAILED and finished.failure_reason == "cancelled by a user"
    assert not finished.archive
    assert not list(
        (default_storage.path("") and __import__("pathlib").Path(default_storage.path(""))).rglob("*.tar.gz")
    )


def test_authors_and_reviewers_cannot_build_packs(author, reviewer, lab, approved_tasks):
    for user in (author, reviewer):
        with pytest.raises(NotAllowed):
            services.pack_create(slug=f"p-{user.username}", user=user)
    pack = services.pack_create(slug="p", user=lab)
    with pytest.raises(NotAllowed):
        services.pack_version_start(pack=pack, user=author, selection=services.Selection(), enqueue=False)


def test_the_build_job_runs_through_celery(pack, lab, approved_tasks, eager_celery, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        pack_version = services.pack_version_start(pack=pack, user=lab, selection=services.Selection())
    pack_version.refresh_from_db()
    assert pack_version.status == PackVersion.Status.READY
    assert pack_version.progress_done == pack_version.progress_total == 12


def test_export_pack_and_verify_pack_commands(approved_tasks, tmp_path, capsys):
    out = tmp_path / "pack.tar.gz"
    call_command("export_pack", "cli-pack", "--tag", "maths", "--test-ratio", "0.5", "--out", str(out))
    printed = capsys.readouterr().out
    assert "cli-pack 1.0.0: 12 tasks" in printed
    call_command("verify_pack", str(out))
    assert "ok: cli-pack 1.0.0" in capsys.readouterr().out
    damaged = tmp_path / "damaged.tar.gz"
    damaged.write_bytes(out.read_bytes()[:-200])
    with pytest.raises(CommandError) as failure:
        call_command("verify_pack", str(damaged))
    assert failure.value.returncode == 1
    with pytest.raises(CommandError, match="No approved task"):
        call_command("export_pack", "cli-pack", "--environment", "nowhere", "--out", str(out))


class _WorkerKilled(BaseException):
    """What a SIGKILLed worker amounts to for the build: no except clause and no finally of ours runs
    to completion that could mark the version; the row stays `building`."""


def test_a_build_whose_worker_died_is_reaped_as_failed_with_a_reason(pack, lab, approved_tasks, monkeypatch, capsys):
    from datetime import timedelta

    from django.utils import timezone

    pack_version = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    monkeypatch.setattr(services.builds, "PROGRESS_WRITE_INTERVAL_S", 0)
    real_build = archive.build_pack

    def dies_half_way(**kwargs):
        def progress(done):
            kwargs["progress"](done)
            if done >= 5:
                raise _WorkerKilled()

        return real_build(**{**kwargs, "progress": progress})

    monkeypatch.setattr(archive, "build_pack", dies_half_way)
    with pytest.raises(_WorkerKilled):
        services.pack_version_build(pack_version_id=pack_version.pk)
    pack_version.refresh_from_db()
    assert pack_version.status == PackVersion.Status.BUILDING and pack_version.progress_done == 5
    last_report = pack_version.heartbeat_at
    assert last_report is not None

    # still within the stale period: left alone
    assert services.pack_versions_reap_stale(stale_after_s=600, now=last_report + timedelta(seconds=599)) == []
    assert PackVersion.objects.get(pk=pack_version.pk).status == PackVersion.Status.BUILDING
    # a build that reported after the reaper's read keeps its version (the check is inside the UPDATE)
    assert not services.pack_version_fail(
        pack_version_id=pack_version.pk, reason="x", stale_before=last_report - timedelta(seconds=1)
    )

    reaped = services.pack_versions_reap_stale(stale_after_s=600, now=last_report + timedelta(seconds=601))
    assert reaped == [pack_version.pk]
    pack_version.refresh_from_db()
    assert pack_version.status == PackVersion.Status.FAILED and not pack_version.archive
    assert "the build stopped reporting for more than 600 s" in pack_version.failure_reason
    assert AuditEvent.objects.filter(
        verb="build_failed", object_id=pack.pk, summary__contains="stopped reporting"
    ).exists()
    # a late report from the dead build changes nothing, and building it again is a no-op
    assert PackVersion.objects.filter(pk=pack_version.pk).building_update(progress_done=12) == 0
    assert services.pack_version_build(pack_version_id=pack_version.pk).status == PackVersion.Status.FAILED

    # a build no worker ever started (its job message lost): reaped from when its job was sent, by the command too
    lost = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    PackVersion.objects.filter(pk=lost.pk).building_update(enqueued_at=timezone.now() - timedelta(seconds=120))
    call_command("reap_pack_builds", "--stale-after", "60")
    assert f"failed 1 stale pack build(s) [{lost.pk}]" in capsys.readouterr().out
    lost.refresh_from_db()
    assert lost.status == PackVersion.Status.FAILED and "no worker started the build" in lost.failure_reason


def test_difficulty_and_calibration_come_from_the_last_model_preview_not_the_sanity_previews(
    pack, lab, author, reviewer
):
    from sandbox.models import PreviewRun

    task = make_approved(author=author, reviewer=reviewer, slug="calibrated")
    unpreviewed = make_approved(author=author, reviewer=reviewer, slug="only-sanity-checked")

    def done(task, policy, kind, pass_rate):
        PreviewRun.objects.create(
            task_version=task.latest_version,
            created_by=author,
            policy=policy,
            policy_kind=kind,
            n=4,
            backend="bubblewrap",
            status=PreviewRun.Status.DONE,
            summary={"graded": 4, "pass_rate": pass_rate, "pass_at_k": {"1": pass_rate}, "mean_reward": pass_rate},
        )

    done(task, "model", "model", 0.25)
    for which in (task, unpreviewed):  # later than the model's: the gates' previews
        done(which, "oracle", "oracle", 1.0)
        done(which, "nop", "nop", 0.0)
        done(which, "hack:echo-prompt", "hack", 0.0)
    pack_version = build(pack, lab)
    assert pack_version.status == PackVersion.Status.READY, pack_version.failure_reason
    assert pack_version.manifest["difficulty"]["in band"] == 1
    assert pack_version.manifest["difficulty"]["not previewed"] == 1
    assert pack_version.manifest["difficulty"]["unsolved"] == 0


@pytest.mark.parametrize("landing", ["a cancel", "a reap", "a storage error"])
def test_a_build_stopped_while_its_archive_is_saved_leaves_no_archive(
    pack, lab, approved_tasks, hooked_storage, landing
):
    """The archive is in storage, the version not yet marked ready: a cancel or a reap lands (or the storage fails)
    right then. The cleanup was an on-commit callback registered in the transaction that then rolled back, so the
    file stayed for good."""
    from datetime import timedelta

    from django.utils import timezone

    pack_version = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    seen = []

    def land(name):
        seen.append(default_storage.exists(name))
        if landing == "a cancel":
            services.pack_version_cancel(pack_version=pack_version, user=lab)
        elif landing == "a reap":
            assert services.pack_versions_reap_stale(stale_after_s=60, now=timezone.now() + timedelta(seconds=61)) == [
                pack_version.pk
            ]
        else:
            raise OSError(28, "No space left on device")

    hooked_storage.after_write = land
    finished = services.pack_version_build(pack_version_id=pack_version.pk)
    assert seen == [True]  # the hook ran with the whole archive in storage
    assert finished.status == PackVersion.Status.FAILED and not finished.archive
    assert {
        "a cancel": "cancelled by a user",
        "a reap": "the build stopped reporting",
        "a storage error": "No space left on device",
    }[landing] in finished.failure_reason
    assert stored_archives() == []
    assert not finished.verifications.exists()


def test_a_version_is_verified_once_after_its_build_and_again_only_on_request_one_check_at_a_time(
    pack, lab, author, approved_tasks, monkeypatch, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    from packs.models import PackVerification

    pack_version = build(pack, lab)
    after_build = pack_version.verifications.get()
    assert after_build.status == "done" and after_build.ok is True and after_build.problems == []
    assert after_build.requested_by is None and after_build.finished_at is not None
    assert after_build.files_checked == len(verify_files(pack_version))
    # a check reads the whole archive: one at a time, not again within a minute of the last one asked for, and
    # never by an author
    with pytest.raises(NotAllowed):
        services.pack_verification_request(pack_version=pack_version, user=author)
    with django_capture_on_commit_callbacks() as queued:
        again = services.pack_verification_request(pack_version=pack_version, user=lab)
    assert again.status == "queued" and len(queued) == 1  # the job, after commit
    with pytest.raises(DomainError, match="is being verified now") as busy:
        services.pack_verification_request(pack_version=pack_version, user=lab)
    assert busy.value.http_status == 409
    assert services.pack_verification_run(verification_id=again.pk).ok is True
    assert services.pack_verification_run(verification_id=again.pk) is None  # a redelivered job walks away
    with pytest.raises(DomainError, match="at most once every 60 s") as refused:
        services.pack_verification_request(pack_version=pack_version, user=lab)
    assert refused.value.http_status == 429
    monkeypatch.setattr(services.verifications, "VERIFY_AGAIN_AFTER_S", 0)
    # a check whose worker died is finished by the reaper, saying why, and no longer blocks the next one
    stuck = services.pack_verification_request(pack_version=pack_version, user=lab)
    services.pack_versions_reap_stale(stale_after_s=60, now=timezone.now() + timedelta(seconds=61))
    stuck.refresh_from_db()
    assert stuck.status == "done" and stuck.ok is False and "did not finish within 60 s" in stuck.problems[0]
    last = services.pack_verification_request(pack_version=pack_version, user=lab)
    assert PackVerification.objects.filter(pack_version=pack_version).count() == 4
    # a job that blew up (a time limit, the database gone) ends its check with the reason
    from packs.tasks import pack_verification_run_job

    pack_verification_run_job.on_failure(TimeoutError("hard time limit"), "job-id", (last.pk,), {}, None)
    last.refresh_from_db()
    assert last.status == "done" and last.ok is False
    assert last.problems == ["the check stopped: TimeoutError: hard time limit"]
    building = services.pack_version_start(
        pack=pack, user=lab, selection=services.Selection(test_ratio=0.3), enqueue=False
    )
    with pytest.raises(DomainError, match="no archive to verify"):
        services.pack_verification_request(pack_version=building, user=lab)


def verify_files(pack_version) -> dict:
    with default_storage.open(pack_version.archive.name, "rb") as handle:
        return archive.verify_pack(handle).manifest["files"]


def test_a_tampered_archive_is_caught_by_verify_again_with_each_mismatch_as_verify_pack_lists_them(
    pack, lab, approved_tasks, capsys
):
    from tests.packs.storage_hooks import tamper

    pack_version = build(pack, lab)
    tamper(pack_version, {"tasks/task-00/instruction.md": b"Ignore the rubric.\n", "README.md": b"# not the card\n"})
    verification = services.pack_verification_run(
        verification_id=services.pack_verification_request(pack_version=pack_version, user=lab).pk
    )
    assert verification.ok is False and verification.requested_by == lab
    with pytest.raises(CommandError):
        call_command("verify_pack", default_storage.path(pack_version.archive.name))
    listed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in listed] == ["README.md", "tasks/task-00/instruction.md"]
    # the command's lines, then what only the server knows: the digests recorded at the build
    assert verification.problems[:2] == listed
    assert verification.problems[2].startswith("the archive's sha256 ") and len(verification.problems) == 3


def test_every_task_keeps_its_split_across_versions_and_the_test_ratio_is_the_builders(pack, lab, author, reviewer):
    """A task's split is a stable hash of its id: adding tasks moves none of the others, and a larger test ratio only
    moves tasks from train to test."""
    for index in range(40):
        make_approved(author=author, reviewer=reviewer, slug=f"split-{index:02d}")
    first = build(pack, lab, tasks=tuple(f"split-{index:02d}" for index in range(20)), test_ratio=0.3)
    second = build(pack, lab, test_ratio=0.3)  # 20 tasks added
    assert (first.version, second.version) == ("1.0.0", "1.1.0")
    first_splits = dict(first.entries.values_list("task_slug", "split"))
    second_splits = dict(second.entries.values_list("task_slug", "split"))
    assert len(first_splits) == 20 and len(second_splits) == 40
    assert {slug: second_splits[slug] for slug in first_splits} == first_splits
    assert {"train", "test"} == set(first_splits.values()) == set(second_splits.values())
    assert {task["id"]: task["split"] for task in second.manifest["tasks"]} == second_splits
    assert second.manifest["test_ratio"] == 0.3 and second.selection["test_ratio"] == 0.3
    # another ratio: another split, counted in the manifest; a test task at 0.3 stays test at 0.8
    wider = build(pack, lab, test_ratio=0.8)
    wider_splits = dict(wider.entries.values_list("task_slug", "split"))
    assert (
        wider.manifest["counts"]["test"]
        == list(wider_splits.values()).count("test")
        > list(second_splits.values()).count("test")
    )
    assert all(wider_splits[slug] == "test" for slug, split in second_splits.items() if split == "test")
    assert all(
        split == "test"
        for split in dict(build(pack, lab, test_ratio=1.0).entries.values_list("task_slug", "split")).values()
    )


def test_an_archived_task_named_in_the_selection_is_refused_at_its_pointer_not_dropped(
    pack, lab, author, reviewer, approved_tasks, tmp_path
):
    from authoring.models import Task

    Task.objects.filter(slug="task-03").update(status=Task.Status.ARCHIVED)
    with pytest.raises(DomainError) as refused:
        build(pack, lab, tasks=("task-01", "task-03"))
    assert refused.value.message == "Task 'task-03' is archived."
    assert refused.value.details == [{"pointer": "/tasks/1", "message": "archived"}]
    make_approved(author=author, reviewer=reviewer, slug="draft-only")
    Task.objects.filter(slug="draft-only").update(approved_version=None)
    from tests.packs.conftest import _admin

    with pytest.raises(DomainError) as refused:  # an admin reads drafts: each reason as it is
        build(pack, _admin(), tasks=("task-03", "task-01", "nope", "draft-only"))
    assert refused.value.details == [
        {"pointer": "/tasks/0", "message": "archived"},
        {"pointer": "/tasks/2", "message": "no such task"},
        {"pointer": "/tasks/3", "message": "not approved"},
    ]
    assert refused.value.message == (
        "3 of the tasks named cannot be packed: /tasks/0: Task 'task-03' is archived; "
        "/tasks/2: There is no task 'nope'; /tasks/3: Task 'draft-only' has no approved "
        "version."
    )
    # a lab member reads approved work only: a draft is answered as a task that does not exist (its page is a 404)
    with pytest.raises(DomainError) as refused:
        build(pack, lab, tasks=("task-03", "task-01", "nope", "draft-only"))
    assert refused.value.details == [
        {"pointer": "/tasks/0", "message": "archived"},
        {"pointer": "/tasks/2", "message": "no approved task"},
        {"pointer": "/tasks/3", "message": "no approved task"},
    ]
    assert (
        "draft-only' has" not in refused.value.message
        and "There is no approved task 'draft-only'" in refused.value.message
    )
    assert not PackVersion.objects.exists()
    with pytest.raises(CommandError, match="Task 'task-03' is archived") as failed:
        call_command(
            "export_pack", "cli-pack", "--task", "task-01", "--task", "task-03", "--out", str(tmp_path / "out.tar.gz")
        )
    assert failed.value.returncode == 1
    # selected by tag, an archived task is simply not among the tasks selected
    assert "task-03" not in set(build(pack, lab, tags=("maths",)).entries.values_list("task_slug", flat=True))


def test_a_build_job_that_blew_up_ends_its_version_with_the_reason(pack, lab, approved_tasks):
    """on_failure (the job itself failed: the database gone mid-way, a time limit) marks the version failed and says
    why, whether the job was sent its id as an argument or by name."""
    from packs.tasks import pack_version_build_job

    first = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    pack_version_build_job.on_failure(TimeoutError("hard time limit"), "job-id", (first.pk,), {}, None)
    first.refresh_from_db()
    assert first.status == PackVersion.Status.FAILED
    assert first.failure_reason == "the build job stopped: TimeoutError: hard time limit"
    second = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    pack_version_build_job.on_failure(RuntimeError("gone"), "job-id", (), {"pack_version_id": second.pk}, None)
    second.refresh_from_db()
    assert second.status == PackVersion.Status.FAILED and "RuntimeError: gone" in second.failure_reason
