"""Pack builds around a job broker that is down (a Redis of the test's own), failed versions' numbers, and the scratch
folders of builds no process runs any more."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.utils import timezone

from gymwright import jobs
from gymwright.errors import DomainError
from packs import services
from packs.models import PackVersion
from tests.packs.test_web_and_api import token_client


@pytest.mark.redis
def test_a_build_started_while_the_broker_is_down_waits_for_it_and_keeps_its_number(
    transactional_db, lab, approved_tasks, broker_down, client, settings
):
    api = token_client(lab)
    assert api.post("/api/packs/", {"slug": "outage"}, format="json").status_code == 201
    response = api.post("/api/packs/outage/versions/", {"version": "2.0.0"}, format="json")
    assert response.status_code == 202, response.content
    assert response.json()["version"] == "2.0.0" and response.json()["waiting_for_broker"] is True
    client.force_login(lab)
    assert "Waiting for the job broker" in client.get("/packs/outage/2.0.0/").content.decode()
    waiting = PackVersion.objects.get(pack__slug="outage")
    # not silent, only unsent: the stale reaper leaves a build that waits for the broker alone
    later = timezone.now() + timezone.timedelta(seconds=settings.PACK_BUILD_STALE_AFTER_S + 1)
    assert services.pack_versions_reap_stale(now=later) == []

    broker_down.start()
    assert jobs.broker_check().resent["pack builds"] == [waiting.pk]  # sent by the check once the broker answers
    assert api.get("/api/packs/outage/versions/2.0.0/").json()["waiting_for_broker"] is False
    assert jobs.broker_check().resent["pack builds"] == []


@pytest.mark.redis
def test_cancelling_a_build_that_waits_for_the_broker_ends_it_at_once_and_frees_its_number(
    transactional_db, lab, approved_tasks, broker_down
):
    pack = services.pack_create(slug="cancelled", user=lab)
    waiting = services.pack_version_start(pack=pack, user=lab, selection=services.Selection())
    waiting.refresh_from_db()
    assert waiting.waiting_for_broker and waiting.version == "1.0.0"
    services.pack_version_cancel(pack_version=waiting, user=lab)  # no worker will ever see the flag
    waiting.refresh_from_db()
    assert waiting.status == PackVersion.Status.FAILED and waiting.failure_reason == "cancelled by a user"
    broker_down.start()
    assert jobs.broker_check().resent["pack builds"] == []  # a finished build is not sent
    assert services.pack_version_plan(pack=pack, user=lab, selection=services.Selection()).version == "1.0.0"


def test_a_failed_version_never_published_so_its_number_is_free_again(db, lab, approved_tasks):
    from tests.packs.conftest import build_and_verify

    pack = services.pack_create(slug="reuse", user=lab)
    first = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    assert services.pack_version_fail(pack_version_id=first.pk, reason="its worker died")
    # the next proposal is the failed one's number, and asking for it by name is not "reusing" a version
    assert services.pack_version_plan(pack=pack, user=lab, selection=services.Selection()).version == "1.0.0"
    again = services.pack_version_start(
        pack=pack, user=lab, selection=services.Selection(), version="1.0.0", enqueue=False
    )
    assert again.version == "1.0.0" and again.pk != first.pk
    # a number held by a build under way, or a ready version, is not free
    with pytest.raises(DomainError, match="never lowered or reused"):
        services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), version="1.0.0", enqueue=False)
    assert build_and_verify(again.pk).status == PackVersion.Status.READY
    assert services.pack_version_plan(pack=pack, user=lab, selection=services.Selection()).version == "1.0.1"
    # the failed attempt keeps its row and reason; the number's page is the ready version
    assert PackVersion.objects.get(pk=first.pk).failure_reason == "its worker died"
    from packs.selectors import pack_version_get_for_user

    assert pack_version_get_for_user(slug="reuse", version="1.0.0", user=lab).pk == again.pk


# ---------------------------------------------------------------------------------------------- scratch


def _scratch(root: Path, pack_version_id: int, *, owner: dict | None) -> Path:
    folder = root / f"pack-{pack_version_id}-x{os.urandom(3).hex()}"
    (folder / "tree").mkdir(parents=True)
    (folder / "tree" / "task.json").write_text("{}")
    if owner is not None:
        (folder / "owner.json").write_text(json.dumps(owner))
    return folder


def test_scratch_folders_of_builds_no_process_runs_are_removed_and_running_ones_kept(
    db, lab, approved_tasks, settings, tmp_path
):
    settings.PACK_SCRATCH_DIR = tmp_path / "scratch"
    pack = services.pack_create(slug="scratch", user=lab)
    building = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    root, host = Path(settings.PACK_SCRATCH_DIR), socket.gethostname()
    me = {"host": host, "pid": os.getpid(), "started": services.scratch._process_start(os.getpid())}
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = {"host": host, "pid": int(dead.stdout), "started": "1"}
    # A killed build's process that its killed parent never waited for: a zombie until init reaps it. It builds
    # nothing, though /proc still shows it with its start time.
    zombie_process = subprocess.Popen([sys.executable, "-c", "pass"])
    while Path(f"/proc/{zombie_process.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        time.sleep(0.01)
    zombie_start = Path(f"/proc/{zombie_process.pid}/stat").read_text().rpartition(")")[2].split()[19]
    zombie = {"host": host, "pid": zombie_process.pid, "started": zombie_start}

    running = _scratch(root, building.pk, owner=me)  # this process builds in it
    killed = _scratch(root, building.pk, owner=gone)  # its worker was killed: the version is still building
    reused_pid = _scratch(root, building.pk, owner={**me, "started": "0"})  # the pid now names another process
    elsewhere = _scratch(root, building.pk, owner={**me, "host": "another-host"})  # that host's to judge
    just_made = _scratch(root, building.pk, owner=None)  # its owner.json is being written
    zombie_owned = _scratch(root, building.pk, owner=zombie)
    finished = _scratch(root, 999999, owner=me)  # no such building version
    not_ours = root / "import-7"
    not_ours.mkdir()

    removed = services.pack_scratch_reap()
    zombie_process.wait()
    assert sorted(removed) == sorted([killed.name, reused_pid.name, finished.name, zombie_owned.name])
    assert all(path.exists() for path in (running, elsewhere, just_made, not_ours))
    old = time.time() - services.scratch.SCRATCH_UNOWNED_GRACE_S - 5
    os.utime(just_made, (old, old))
    assert services.pack_scratch_reap() == [just_made.name]


def test_a_build_records_its_owner_in_its_scratch_and_removes_the_folder_when_done(
    db, lab, approved_tasks, settings, tmp_path, monkeypatch
):
    from packs import archive
    from tests.packs.conftest import build_and_verify

    settings.PACK_SCRATCH_DIR = tmp_path / "scratch"
    seen = []
    real = archive.build_pack

    def build_pack(**kwargs):
        folder = Path(kwargs["scratch_dir"]).parent
        seen.append(json.loads((folder / "owner.json").read_text()))
        assert services.pack_scratch_reap() == []  # a running build's folder is kept
        return real(**kwargs)

    monkeypatch.setattr(archive, "build_pack", build_pack)
    pack = services.pack_create(slug="owned", user=lab)
    pack_version = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    assert build_and_verify(pack_version.pk).status == PackVersion.Status.READY
    assert seen == [
        {"host": socket.gethostname(), "pid": os.getpid(), "started": services.scratch._process_start(os.getpid())}
    ]
    assert list(Path(settings.PACK_SCRATCH_DIR).iterdir()) == []
