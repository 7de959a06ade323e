"""In a real browser: a lab member builds a pack and watches it, without reloading, go from queued (0 %) through a
progress the build is held at, to ready and verified; then downloads it. A real Celery worker builds it.

The build is held at known points with PostgreSQL locks, never by timing: the build reads a task's file (a Blob
row) for the 11th and the 21st task only, and writes its progress to the version's row. An exclusive lock on the
Blob table stops it at the 11th task; a row lock on the version, taken before that lock is let go, stops the
progress write that follows; the Blob table is locked again before that write goes through, so the build stops
at the 21st task with its progress on the page, until the test lets it finish."""

from __future__ import annotations

import hashlib
import time

import pytest

from tests.e2e.conftest import PASSWORD
from tests.packs.conftest import make_approved
from tests.sandbox.test_preview_browser import in_browser
from tests.support.services import require_playwright
from tests.support.users import make_user
from tests.support.workers import start_workers, test_database_url

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

TASKS = 30
HELD_AT = (10, 20)  # the tasks with a file, by index: the build reads their Blob rows


class Lock:
    """A PostgreSQL session of the test's own holding a lock in an open transaction."""

    def __init__(self, statement: str, params: tuple = ()):
        import psycopg

        self.connection = psycopg.connect(test_database_url())
        self.connection.execute(statement, params)

    @property
    def pid(self) -> int:
        return self.connection.info.backend_pid

    def release(self) -> None:
        self.connection.commit()
        self.connection.close()


def wait_until_blocked_by(lock: Lock, *, what: str, workers) -> None:
    """Until a session (the worker's build) waits on `lock`."""
    import psycopg

    with psycopg.connect(test_database_url(), autocommit=True) as monitor:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            waiting = monitor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (lock.pid,)
            ).fetchone()[0]
            if waiting:
                return
            time.sleep(0.1)
    pytest.fail(f"the build never waited on {what}:\n{workers.logs()}")


def test_a_lab_member_watches_a_build_progress_to_ready_and_verified_without_reloading_then_downloads_it(
    request, live_server, redis_db, celery_producer, tmp_path, transactional_db, django_user_model
):
    from authoring import services as authoring_services
    from packs import services as pack_services

    require_playwright()
    author = make_user(django_user_model, "alice", "author")
    reviewer = make_user(django_user_model, "rita", "reviewer")
    data = authoring_services.blob_store(data=b"a,b\n1,2\n")
    for index in range(TASKS):
        make_approved(
            author=author,
            reviewer=reviewer,
            slug=f"browser-{index:02d}",
            files=[{"path": "data/table.csv", "sha256": data.sha256, "role": "protected"}]
            if index in HELD_AT
            else None,
        )
    lab = make_user(django_user_model, "lena", "lab", password=PASSWORD)
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=60)
    downloads = tmp_path / "downloads"
    seen: dict = {}
    held: list[Lock] = []
    request.addfinalizer(lambda: [lock.release() for lock in held if not lock.connection.closed])

    def bar(page) -> tuple[int, str]:
        return int(page.get_attribute("#build-bar", "value")), page.inner_text("#build-count")

    def steps(page) -> None:
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", lab.username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit], input[type=submit]")
        page.goto(f"{live_server.url}/packs/")
        page.fill("#pack-create input[name=slug]", "browser-pack")
        page.fill("#pack-create input[name=name]", "Browser pack")
        page.click("#pack-create button[type=submit]")
        page.wait_for_url("**/packs/browser-pack/")
        page.fill("#pack-build input[name=tags]", "maths")
        page.click("#build-button")
        page.wait_for_url("**/packs/browser-pack/1.0.0/")
        # no worker yet: the build is queued, and the page says so
        seen["queued"] = (page.get_attribute("#build-progress", "data-status"), *bar(page))
        page.evaluate("window.notReloaded = true")

        held.append(Lock("LOCK TABLE authoring_blob IN ACCESS EXCLUSIVE MODE"))
        workers.start()
        wait_until_blocked_by(held[-1], what="the Blob table (the 11th task's file)", workers=workers)
        # the build writes its progress at most every PROGRESS_WRITE_INTERVAL_S: past it, its next call writes
        time.sleep(pack_services.builds.PROGRESS_WRITE_INTERVAL_S + 0.2)
        held.append(
            Lock(
                "SELECT version.id FROM packs_packversion version JOIN packs_taskpack pack ON pack.id = "
                "version.pack_id WHERE pack.slug = %s FOR UPDATE OF version",
                ("browser-pack",),
            )
        )
        held[0].release()
        wait_until_blocked_by(held[1], what="the version's row (its progress)", workers=workers)
        held.append(Lock("LOCK TABLE authoring_blob IN ACCESS EXCLUSIVE MODE"))
        held[1].release()
        wait_until_blocked_by(held[2], what="the Blob table (the 21st task's file)", workers=workers)
        # held at the 21st task, the progress written after the 11th: the page shows it without being reloaded
        page.wait_for_function(
            "() => { const value = +document.querySelector('#build-bar').value; return value > 0 && value < 100; }",
            timeout=30_000,
        )
        seen["held"] = (
            page.get_attribute("#build-progress", "data-status"),
            *bar(page),
            page.evaluate("window.notReloaded === true"),
        )
        held[2].release()
        page.wait_for_selector('#build-progress[data-status="ready"]', timeout=120_000)
        page.wait_for_selector("#verified", timeout=60_000)
        seen["count"] = page.inner_text("#build-count")
        seen["splits"] = page.inner_text("#split-counts")
        with page.expect_download() as info:
            page.click("#download")
        download = info.value
        target = downloads / download.suggested_filename
        download.save_as(str(target))
        seen["file"] = target
        seen["sha256"] = page.inner_text("#archive-sha256")

    in_browser(steps)
    assert seen["queued"] == ("building", 0, f"0/{TASKS}")
    status, percent, count, not_reloaded = seen["held"]
    done = int(count.split("/")[0])
    assert status == "building" and not_reloaded
    # written after the 11th task's file and before the 21st's (the bar's share for writing tasks is 80 %)
    assert int((HELD_AT[0] + 1) * 0.8) <= done <= int(HELD_AT[1] * 0.8) and percent == 100 * done // TASKS, seen["held"]
    assert seen["count"] == f"{TASKS}/{TASKS}"
    assert "train" in seen["splits"] and "test" in seen["splits"]
    assert seen["file"].name == "browser-pack-1.0.0.tar.gz"
    assert hashlib.sha256(seen["file"].read_bytes()).hexdigest() == seen["sha256"]
