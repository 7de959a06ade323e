"""In a real browser: a lab member builds a pack, watches its progress, downloads it, and the page
shows it verified — a real Celery worker builds it."""

from __future__ import annotations

import hashlib

import pytest

from tests.e2e.conftest import PASSWORD
from tests.packs.conftest import make_approved
from tests.sandbox.test_preview_browser import in_browser
from tests.support.workers import start_workers
from tests.support.users import make_user

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.slow]


def test_a_lab_member_builds_watches_downloads_and_sees_the_pack_verified(
        request, live_server, redis_db, celery_producer, tmp_path, transactional_db, django_user_model):
    pytest.importorskip("playwright")
    author = make_user(django_user_model, "alice", "author")
    reviewer = make_user(django_user_model, "rita", "reviewer")
    for index in range(30):
        make_approved(author=author, reviewer=reviewer, slug=f"browser-{index:02d}")
    lab = make_user(django_user_model, "lena", "lab", password=PASSWORD)
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=60)
    workers.start()
    downloads = tmp_path / "downloads"
    seen: dict = {}

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
        seen["first_status"] = page.get_attribute("#build-progress", "data-status")
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
    assert seen["first_status"] in ("building", "ready")
    assert seen["count"] == "30/30"
    assert "train" in seen["splits"] and "test" in seen["splits"]
    assert seen["file"].name == "browser-pack-1.0.0.tar.gz"
    assert hashlib.sha256(seen["file"].read_bytes()).hexdigest() == seen["sha256"]
