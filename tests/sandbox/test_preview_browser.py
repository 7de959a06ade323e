"""In a real browser: start a preview from the task page and watch it finish without a reload,
a real Celery worker running the rollouts in bubblewrap sandboxes."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import CHROMIUM_ARGS, PASSWORD, _chromium_path
from tests.sandbox.factories import make_task
from tests.support.services import require_playwright
from tests.support.workers import start_workers

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.bubblewrap, pytest.mark.slow]


def in_browser(steps) -> None:
    """Run `steps(page)` in a headless Chromium on a thread of its own: Playwright's sync API
    refuses to start where another Playwright (the e2e tests' session browser) already runs."""
    from concurrent.futures import ThreadPoolExecutor

    sync_playwright = require_playwright()  # here, not in the thread: a skip (or CI's failure) is the test's

    def run():
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=_chromium_path(), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_timeout(15_000)
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                steps(page)
                assert not errors, f"JavaScript errors on the page: {errors}"
            finally:
                browser.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(run).result(timeout=240)


@pytest.mark.timeout(420)  # its waits: the preview (90 s) and the worker's run (240 s)
def test_a_preview_started_in_the_browser_updates_live_and_shows_a_rollout(
    request, live_server, redis_db, celery_producer, tmp_path, django_user_model
):
    from tests.support.users import make_user

    require_playwright()
    user = make_user(django_user_model, "eve", "author")
    user.set_password(PASSWORD)
    user.save()
    task = make_task(author=user)
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=60)
    workers.start()
    in_browser(lambda page: _start_and_watch(page, live_server.url, task))


def _start_and_watch(page, live_server_url: str, task) -> None:
    page.goto(f"{live_server_url}/accounts/login/")
    page.fill("input[name=username]", "eve")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit], input[type=submit]")
    page.goto(f"{live_server_url}/tasks/{task.slug}/")
    assert page.is_hidden("textarea[name=probe_text]")  # only for the probe policy
    page.select_option("select[name=policy]", "oracle")
    page.fill("input[name=n]", "2")
    page.click("form[data-preview-form] button[type=submit]")
    page.wait_for_url("**/previews/*/")
    page.evaluate("window.__sameDocument = true")
    page.wait_for_selector('#preview-progress[data-status="done"]', timeout=90_000)
    assert page.evaluate("window.__sameDocument") is True, "the page reloaded instead of updating in place"
    assert page.inner_text('[data-count="done"]') == "2"
    assert "the reference solution passes" in page.inner_text("#preview-verdict")
    page.click("tr.rollout-row >> nth=0")
    page.wait_for_selector("#rollout-detail")
    assert page.is_visible('tr[data-check-id="says_42"]') and "submit" in page.inner_text("#rollout-detail")
    assert "selected" in (page.get_attribute("tr.rollout-row >> nth=0", "class") or "")
