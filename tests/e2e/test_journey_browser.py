"""The whole journey in a real Chromium, as the product's three kinds of user go through it.

An author writes a task and its rubric in the editor, dry-runs an answer, creates the task, previews
it with the oracle and with nop (a real Celery worker on Redis, bubblewrap sandboxes) and submits it;
a reviewer finds it in the queue, comments on one check and approves; a lab engineer builds a pack
of it, downloads the archive, and `manage.py verify_pack` checks every sha256 in it.

Every page visited is kept as a screenshot (var/artifacts/screenshots/journey-*.png, or under
GYMWRIGHT_ARTIFACTS_DIR); any browser console error, page error or CSP violation fails the test.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import time

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from authoring.models import Task
from review.models import Comment
from tests.e2e.conftest import PASSWORD, TIMEOUT_MS, wait_for_editor
from tests.e2e.test_pages_browser import CSP_LISTENER, artifacts_dir
from tests.e2e.test_task_authoring_browser import card
from tests.support.users import make_user
from tests.support.workers import start_workers

pytestmark = [
    pytest.mark.browser,
    pytest.mark.bubblewrap,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]
expect.set_options(timeout=TIMEOUT_MS)

# A real worker on a loaded machine: generous bounds, never asserted as timings.
PREVIEW_MS = 240_000
BUILD_MS = 240_000
COMMENT = "Worth more points: 42 is the whole answer."


class Visitor:
    """One user's browser session: every page it shows is screenshotted, every console error,
    page error and CSP violation is kept."""

    def __init__(self, browser, live_server, username: str):
        self.live_server, self.username = live_server, username
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        self.context.set_default_timeout(TIMEOUT_MS)
        self.context.add_init_script(CSP_LISTENER)
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.visited: set[str] = set()
        self.shot_urls: set[str] = set()
        self.page.on(
            "console",
            lambda msg: (
                self.problems.append(f"{self.page.url}: console {msg.type}: {msg.text}")
                if msg.type == "error"
                else None
            ),
        )
        self.page.on("pageerror", lambda exc: self.problems.append(f"{self.page.url}: page error: {exc}"))
        self.page.on(
            "framenavigated",
            lambda frame: self.visited.add(_page_of(frame.url)) if frame == self.page.main_frame else None,
        )
        self.goto("/accounts/login/", "login")
        self.page.fill("input[name=username]", username)
        self.page.fill("input[name=password]", PASSWORD)
        self.page.click("form button[type=submit]")
        self.page.wait_for_url(f"{live_server.url}/")
        self.shot("home")

    def goto(self, path: str, name: str):
        response = self.page.goto(self.live_server.url + path)
        assert response.status == 200, f"{path} answered {response.status}"
        self.shot(name)
        return response

    def shot(self, name: str) -> None:
        """A screenshot of the page as it is now, and its CSP violations so far."""
        self.page.wait_for_load_state("load")
        violations = self.page.evaluate("window.__cspViolations || []")
        self.problems += [f"{self.page.url}: CSP {violation}" for violation in violations]
        self.page.evaluate("window.__cspViolations = []")
        index = len(list(artifacts_dir().glob(f"journey-{self.username}-*.png")))
        self.page.screenshot(
            path=str(artifacts_dir() / f"journey-{self.username}-{index:02d}-{name}.png"), full_page=True
        )
        self.shot_urls.add(_page_of(self.page.url))

    def close(self) -> list[str]:
        unshot = sorted(self.visited - self.shot_urls - {"about:blank"})
        self.context.close()
        return self.problems + [f"no screenshot of {url}" for url in unshot]


def _page_of(url: str) -> str:
    return url.split("#")[0]


def author_writes_and_dry_runs(author: Visitor, environment) -> None:
    page = author.page
    page.get_by_role("link", name="New task").click()
    page.wait_for_url("**/tasks/new/")
    wait_for_editor(page)
    page.fill("#id_slug", "six-sevens")
    page.select_option("#id_environment", environment.slug)
    page.fill("#id_title", "Six sevens")
    page.fill("#id_prompt", "What is **six times seven**? Write the number to `answer.txt` too.")
    first = card(page, "/checks/0")
    first.locator("[data-key=id] input").fill("says_42")
    first.locator("[data-key=expected] input").fill("42")
    first.locator("[data-key=points] input").fill("2")
    # The second check in the raw JSON view (file_content: answer.txt must hold the number, so
    # that echoing the prompt into it or leaving it empty earns nothing); back in the form view.
    page.click('#rubric-editor [data-view="raw"]')
    rubric = json.loads(page.input_value("#rubric-json"))
    rubric["checks"].append(
        {"id": "wrote_answer", "kind": "file_content", "points": 1, "path": "answer.txt", "contains": "42"}
    )
    page.fill("#rubric-json", json.dumps(rubric, indent=2))
    page.click('#rubric-editor [data-view="structured"]')
    expect(card(page, "/checks/1").locator("[data-key=path] input")).to_have_value("answer.txt")
    expect(page.locator("#rubric-status")).to_have_text("Valid · 2 checks · 3 points")
    page.fill("#id_solution_script", "echo 42 > answer.txt")
    page.fill("#id_solution_answer", "42")
    page.fill("#id_tags", "maths, journey")
    author.shot("editor-filled")

    # Dry run against the unsaved rubric, with a workspace file for the file check: a wrong answer,
    # then a right one.
    result = page.locator("[data-dry-run-result]")
    page.set_input_files(
        "[data-dry-run-files]", files=[{"name": "answer.txt", "mimeType": "text/plain", "buffer": b"42\n"}]
    )
    page.fill("#dry-run-answer", "Forty-something.")
    page.click("[data-dry-run-submit]")
    expect(result.locator("[data-grade-summary]")).to_have_text("1 / 3 points, reward 0.33, not passed")
    author.shot("dry-run-wrong")
    page.fill("#dry-run-answer", "It is 42.")
    page.click("[data-dry-run-submit]")
    expect(result.locator("[data-grade-summary]")).to_have_text("3 / 3 points, reward 1.00, passed")
    author.shot("dry-run-right")

    page.get_by_role("button", name="Create task").click()
    page.wait_for_url("**/tasks/six-sevens/")
    expect(page.locator(".messages")).to_contain_text("Created six-sevens v1")
    author.shot("task-created")


def author_previews(author: Visitor, policy: str, n: int) -> None:
    page = author.page
    author.goto("/tasks/six-sevens/", f"task-before-{policy}")
    page.select_option("select[name=policy]", policy)
    page.fill("input[name=n]", str(n))
    page.click("form[data-preview-form] button[type=submit]")
    page.wait_for_url(re.compile(r".*/previews/\d+/$"))
    author.shot(f"preview-{policy}-started")
    page.wait_for_selector('#preview-progress[data-status="done"]', timeout=PREVIEW_MS)
    expect(page.locator('[data-count="done"]')).to_have_text(str(n))
    author.shot(f"preview-{policy}-done")
    page.click("tr.rollout-row >> nth=0")
    page.wait_for_selector("#rollout-detail")
    expect(page.locator('#rollout-detail tr[data-check-id="says_42"]')).to_be_visible()
    author.shot(f"preview-{policy}-rollout")


def author_submits(author: Visitor) -> None:
    page = author.page
    author.goto("/tasks/six-sevens/", "task-gates")
    for gate in ("oracle", "nop"):  # the author's own previews count
        expect(page.locator(f'#gates [data-gate="{gate}"]')).to_have_attribute("data-status", "pass")
    # The hack probes are still missing: submitting is refused, and looks it.
    submit = page.locator("#submit-form button:has-text('Submit v1 for review')")
    expect(submit).to_be_disabled()
    expect(submit).to_have_css("cursor", "not-allowed")
    # Run gates starts them on the worker; the page shows them passing once they finish (reloaded
    # until then, within a generous bound).
    with page.expect_navigation():
        page.click("#run-gates")
    author.shot("gates-running")
    failed = page.locator('#gates [data-status="fail"]')
    deadline = time.monotonic() + PREVIEW_MS / 1000
    while submit.is_disabled() and failed.count() == 0 and time.monotonic() < deadline:
        page.wait_for_timeout(2000)
        page.reload()
    expect(failed).to_have_count(0)
    expect(page.locator('#gates [data-gate^="hack"][data-status="pass"]')).to_have_count(
        5
    )  # the probes that apply to this task (hack:exhaust and hack:zero-width joined)
    expect(submit).to_be_enabled()
    expect(submit).to_have_css("cursor", "pointer")
    author.shot("gates-passed")
    page.click("#submit-form button:has-text('Submit v1 for review')")
    expect(page.locator(".messages")).to_contain_text("Submitted six-sevens v1 for review")
    author.shot("submitted")


def reviewer_comments_and_approves(reviewer: Visitor) -> None:
    page = reviewer.page
    expect(page.locator("#nav-review .nav-count")).to_have_text("1")
    reviewer.goto("/review/", "queue")
    page.click('#review-queue [data-task="six-sevens"] a')
    page.wait_for_url("**/review/tasks/six-sevens/")
    reviewer.shot("review-page")
    check = page.locator('[data-review-check="says_42"]')
    check.locator("details.check-comment summary").click()
    check.locator("textarea[data-check-comment=says_42]").fill(COMMENT)
    page.check("input[name=decision][value=approve]")
    page.fill("#task-comment", "Clear and well graded.")
    reviewer.shot("review-filled")
    with page.expect_navigation():
        page.click("#review-form button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("approve on v1")
    expect(page.locator("main h1")).to_contain_text("Waiting for review (0)")  # back at the queue, empty
    reviewer.shot("approved")
    reviewer.goto("/review/tasks/six-sevens/", "review-page-after")
    expect(page.locator('[data-review-check="says_42"]')).to_contain_text(COMMENT)


def lab_builds_and_downloads(lab: Visitor, tmp_path) -> tuple:
    page = lab.page
    lab.goto("/packs/", "packs")
    page.fill("#pack-create input[name=slug]", "journey-pack")
    page.fill("#pack-create input[name=name]", "Journey pack")
    page.click("#pack-create button[type=submit]")
    page.wait_for_url("**/packs/journey-pack/")
    lab.shot("pack")
    page.fill("#pack-build input[name=tags]", "journey")
    page.click("#build-button")
    page.wait_for_url("**/packs/journey-pack/1.0.0/")
    lab.shot("pack-building")
    page.wait_for_selector('#build-progress[data-status="ready"]', timeout=BUILD_MS)
    page.wait_for_selector("#verified", timeout=BUILD_MS)
    expect(page.locator("#build-count")).to_have_text("1/1")
    # Only oracle, nop and hack previews ran: they check the task, they do not measure its difficulty.
    expect(page.locator("#difficulty-chart .row", has_text="not previewed")).to_contain_text("1")
    expect(page.locator("#difficulty-chart .row", has_text="unsolved")).to_contain_text("0")
    lab.shot("pack-ready")
    with page.expect_download() as info:
        page.click("#download")
    target = tmp_path / info.value.suggested_filename
    info.value.save_as(str(target))
    return target, page.inner_text("#archive-sha256")


@pytest.mark.timeout(1200)  # its waits: two previews, a gate run and a build, up to 240 s each
def test_author_reviewer_and_lab_go_through_the_whole_product(
    request, browser, live_server, environment, django_user_model, redis_db, celery_producer, tmp_path
):
    make_user(django_user_model, "rita", "reviewer", password=PASSWORD)
    make_user(django_user_model, "lena", "lab", password=PASSWORD)
    for old in artifacts_dir().glob("journey-*.png"):
        old.unlink()
    workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=120)
    workers.start()
    visitors = []

    author = Visitor(browser, live_server, "ada")
    visitors.append(author)
    author_writes_and_dry_runs(author, environment)
    author_previews(author, "oracle", 3)
    expect(author.page.locator("#preview-verdict")).to_contain_text("the reference solution passes")
    author_previews(author, "nop", 3)
    author_submits(author)

    reviewer = Visitor(browser, live_server, "rita")
    visitors.append(reviewer)
    reviewer_comments_and_approves(reviewer)

    # The author sees the approval and the comment at its check.
    author.goto("/inbox/", "inbox")
    expect(author.page.locator("main")).to_contain_text(COMMENT)
    author.goto("/tasks/six-sevens/", "task-approved")

    lab = Visitor(browser, live_server, "lena")
    visitors.append(lab)
    archive, shown_sha256 = lab_builds_and_downloads(lab, tmp_path)

    problems = [problem for visitor in visitors for problem in visitor.close()]
    assert not problems, "\n".join(problems)
    task = Task.objects.get(slug="six-sevens")
    assert task.status == Task.Status.APPROVED and task.approved_version.number == 1
    assert [c["id"] for c in task.approved_version.spec["rubric"]["checks"]] == ["says_42", "wrote_answer"]
    assert Comment.objects.get(check_id="says_42").body == COMMENT
    assert archive.name == "journey-pack-1.0.0.tar.gz"
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == shown_sha256
    out = io.StringIO()
    call_command("verify_pack", str(archive), stdout=out)  # raises CommandError (exit 1) on any mismatch
    assert out.getvalue().startswith("ok: journey-pack 1.0.0, "), out.getvalue()
    print(f"\njourney screenshots: {artifacts_dir()}/journey-*.png")
