"""Building pack versions from approved task versions: selection, semver, publishing, failure, audit."""

from __future__ import annotations

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError

from authoring import services as authoring_services
from review import services as review_services
from authoring.models import AuditEvent, ImmutableRowError
from gymwright.errors import DomainError, NotAllowed
from packs import archive, services
from packs.models import PackVersion
from tests.packs.conftest import make_approved


def build(pack, user, **selection):
    version = selection.pop("version", None)
    pack_version = services.pack_version_start(pack=pack, user=user, selection=services.Selection(**selection),
                                               version=version, enqueue=False)
    return services.pack_version_build(pack_version_id=pack_version.pk)


@pytest.fixture
def pack(lab):
    return services.pack_create(slug="maths-pack", user=lab, name="Maths", licence="CC-BY-4.0")


def test_a_lab_member_builds_a_pack_of_the_approved_versions_not_later_drafts(pack, lab, author, approved_tasks):
    drafted = approved_tasks[0]
    authoring_services.task_version_create(task=drafted, author=author, base_version=1, content={
        **authoring_services.task_version_content(drafted.latest_version), "prompt": "a later draft"})
    pack_version = build(pack, lab)
    assert pack_version.status == PackVersion.Status.READY, pack_version.failure_reason
    assert pack_version.version == "1.0.0"
    assert pack_version.entries.count() == 12
    entry = pack_version.entries.get(task_slug=drafted.slug)
    assert entry.task_version.number == 1
    assert pack_version.manifest["tasks"][0] == {"id": drafted.slug, "version": 1,
                                                 "sha256": entry.task_version.sha256, "split": entry.split}
    assert default_storage.exists(pack_version.archive.name)
    assert default_storage.size(pack_version.archive.name) == pack_version.size
    assert services.pack_version_verify(pack_version=pack_version).ok
    verbs = set(AuditEvent.objects.filter(object_id=pack.pk, content_type__model="taskpack").values_list("verb", flat=True))
    assert {"create", "build"} <= verbs


def test_drafts_and_unapproved_tasks_are_never_packed(pack, lab, author, reviewer, approved_tasks):
    from authoring.models import Environment
    authoring_services.task_create(slug="just-a-draft", environment=Environment.objects.get(slug="shell"), author=author,
                                   content={"title": "d", "prompt": "p", "rubric": approved_tasks[0].latest_version.rubric})
    pack_version = build(pack, lab)
    assert "just-a-draft" not in set(pack_version.entries.values_list("task_slug", flat=True))
    with pytest.raises(DomainError, match="no approved version"):
        build(pack, lab, tasks=("just-a-draft",))


def test_tags_select_by_the_approved_version_not_a_later_draft(pack, lab, author, approved_tasks):
    retagged = approved_tasks[0]
    authoring_services.task_version_create(task=retagged, author=author, base_version=1, content={
        **authoring_services.task_version_content(retagged.latest_version), "tags": ["physics"]})
    retagged.refresh_from_db()
    assert set(retagged.tags.values_list("name", flat=True)) == {"physics"}  # the head follows the draft
    maths = build(pack, lab, tags=("maths",))
    assert set(maths.entries.values_list("task_slug", flat=True)) == {t.slug for t in approved_tasks}
    assert maths.entries.get(task_slug=retagged.slug).task_version.number == 1
    with pytest.raises(DomainError, match="No approved task matches"):
        build(pack, lab, tags=("physics",))  # only the unapproved draft has it
    with pytest.raises(DomainError, match="No approved task matches"):
        build(pack, lab, tags=("maths", "physics"))  # a task needs every tag


def test_the_next_version_follows_the_changes_and_may_be_raised_never_lowered(pack, lab, author, reviewer, admin,
                                                                              approved_tasks):
    assert build(pack, lab, tasks=tuple(t.slug for t in approved_tasks[:5])).version == "1.0.0"
    assert build(pack, lab, tasks=tuple(t.slug for t in approved_tasks[:6])).version == "1.1.0"  # added
    changed = approved_tasks[2]
    authoring_services.task_version_create(task=changed, author=author, base_version=1, content={
        **authoring_services.task_version_content(changed.latest_version), "prompt": "reworded"})
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
    monkeypatch.setattr(services, "PROGRESS_WRITE_INTERVAL_S", 0)
    finished = services.pack_version_build(pack_version_id=pack_version.pk)
    assert finished.status == PackVersion.Status.FAILED and finished.failure_reason == "cancelled by a user"
    assert not finished.archive
    assert not list((default_storage.path("") and __import__("pathlib").Path(default_storage.path(""))).rglob("*.tar.gz"))


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
    monkeypatch.setattr(services, "PROGRESS_WRITE_INTERVAL_S", 0)
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
    assert not services.pack_version_fail(pack_version_id=pack_version.pk, reason="x",
                                          stale_before=last_report - timedelta(seconds=1))

    reaped = services.pack_versions_reap_stale(stale_after_s=600, now=last_report + timedelta(seconds=601))
    assert reaped == [pack_version.pk]
    pack_version.refresh_from_db()
    assert pack_version.status == PackVersion.Status.FAILED and not pack_version.archive
    assert "the build stopped reporting for more than 600 s" in pack_version.failure_reason
    assert AuditEvent.objects.filter(verb="build_failed", object_id=pack.pk,
                                     summary__contains="stopped reporting").exists()
    # a late report from the dead build changes nothing, and building it again is a no-op
    assert PackVersion.objects.filter(pk=pack_version.pk).building_update(progress_done=12) == 0
    assert services.pack_version_build(pack_version_id=pack_version.pk).status == PackVersion.Status.FAILED

    # a build no worker ever started (its job message lost): reaped from its creation time, by the command too
    lost = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    PackVersion.objects.filter(pk=lost.pk).building_update(created_at=timezone.now() - timedelta(seconds=120))
    call_command("reap_pack_builds", "--stale-after", "60")
    assert f"failed 1 stale pack build(s) [{lost.pk}]" in capsys.readouterr().out
    lost.refresh_from_db()
    assert lost.status == PackVersion.Status.FAILED and "no worker started the build" in lost.failure_reason


def test_difficulty_and_calibration_come_from_the_last_model_preview_not_the_sanity_previews(pack, lab, author,
                                                                                          reviewer):
    from sandbox.models import PreviewRun

    task = make_approved(author=author, reviewer=reviewer, slug="calibrated")
    unpreviewed = make_approved(author=author, reviewer=reviewer, slug="only-sanity-checked")

    def done(task, policy, kind, pass_rate):
        PreviewRun.objects.create(task_version=task.latest_version, created_by=author, policy=policy,
                                  policy_kind=kind, n=4, backend="bubblewrap", status=PreviewRun.Status.DONE,
                                  summary={"graded": 4, "pass_rate": pass_rate, "pass_at_k": {"1": pass_rate},
                                           "mean_reward": pass_rate})

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
