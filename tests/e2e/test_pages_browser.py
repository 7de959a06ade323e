"""Every main page in a real Chromium at 1280 px: served with the Content-Security-Policy, no
CSP violation reported, a screenshot kept as a test artifact, and the grade table readable.

The preview is real: an oracle rollout run in a bubblewrap sandbox (Celery eager), graded with
an LLM-judge check answered by the local OpenAI-protocol test server.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import Group

from authoring import services as authoring_services
from sandbox import services as sandbox_services
from tests.e2e.conftest import CSP_LISTENER, PASSWORD, TIMEOUT_MS, sign_in
from tests.sandbox.factories import RUBRIC, make_task
from tests.support.openai_server import OpenAIServer

pytestmark = [pytest.mark.browser, pytest.mark.bubblewrap, pytest.mark.django_db(transaction=True)]

WIDTH = 1280
JUDGE_RUBRIC = {
    **RUBRIC,
    "checks": [
        *RUBRIC["checks"],
        {
            "id": "explains_the_product_clearly_with_a_long_identifier",
            "kind": "llm_judge",
            "points": 2,
            "title": "States the product and how it was found",
            "criterion": "The answer says 42 and explains that it is six times seven.",
        },
    ],
}
LONG_EXPLANATION = (
    "The answer states 42 and explains the multiplication; "
    "see https://example.org/a-very-long-reference-url-without-any-break-in-it-at-all-"
    "that-would-push-a-table-wide-if-it-did-not-wrap " * 2
)


def artifacts_dir() -> Path:
    folder = Path(os.environ.get("GYMWRIGHT_ARTIFACTS_DIR", Path.cwd() / "var" / "artifacts")) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def site(transactional_db, django_user_model, settings, eager_celery, sandbox_dir):
    """An author who also reviews, a task with two versions, and a finished, judged preview."""
    user = django_user_model.objects.create_user(username="ada", password=PASSWORD)
    for role in ("author", "reviewer"):
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    reply = '{"met": true, "explanation": "%s"}' % LONG_EXPLANATION
    with OpenAIServer(default=reply) as server:
        settings.OPENAI_BASE_URL = server.base_url
        settings.OPENAI_API_KEY = "test"
        settings.JUDGE_MODEL = "judge"
        task = make_task(author=user, rubric=JUDGE_RUBRIC)
        version = task.versions.get(number=1)
        content = {
            "title": "Six by seven, again",
            "prompt": version.spec["prompt"],
            "rubric": JUDGE_RUBRIC,
            "solution": version.spec["solution"],
            "tags": ["maths"],
            "files": [],
        }
        authoring_services.task_version_create(
            task=task, author=user, content=content, base_version=1, message="retitled"
        )
        preview_run = sandbox_services.preview_run_create(task_version=version, user=user, policy="oracle", n=1)
    rollout = preview_run.rollouts.get()
    rollout.refresh_from_db()
    assert rollout.status == "done", rollout.error
    return {"user": user, "task": task, "preview_run": preview_run, "rollout": rollout}


@pytest.fixture
def wide_page(browser, live_server, site):
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    context.add_init_script(CSP_LISTENER)
    page = context.new_page()
    errors: list[str] = []
    console: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: console.append(msg.text) if msg.type in ("error", "warning") else None)
    page.console_messages = console
    sign_in(page, live_server.url, "ada")
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def main_pages(site) -> dict[str, str]:
    slug = site["task"].slug
    preview_run, rollout = site["preview_run"], site["rollout"]
    env = site["task"].environment.slug
    return {
        "task-list": "/",
        "task-new": "/tasks/new/",
        "task-detail": f"/tasks/{slug}/",
        "task-edit": f"/tasks/{slug}/edit/",
        "task-versions": f"/tasks/{slug}/versions/",
        "task-version": f"/tasks/{slug}/versions/1/",
        "task-diff": f"/tasks/{slug}/diff/?a=1&b=2",
        "environment-list": "/environments/",
        "environment-detail": f"/environments/{env}/",
        "environment-new": "/environments/new/",
        "account": "/account/",
        "preview-start": f"/previews/start/{slug}/v1/",
        "preview-detail": f"/previews/{preview_run.pk}/?rollout={rollout.pk}",
        "rollout-detail": f"/previews/rollouts/{rollout.pk}/",
        "api-docs": "/api/docs/",
        "check-kinds": "/grading/kinds/",
    }


def test_every_main_page_has_the_csp_and_no_violation_and_a_screenshot(wide_page, live_server, site):
    page = wide_page
    folder = artifacts_dir()
    problems = []
    for name, path in main_pages(site).items():
        page.console_messages.clear()
        response = page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        if name == "task-new" or name == "task-edit":
            page.wait_for_selector("#rubric-editor[data-ready=true]")
        assert response.status == 200, f"{path} answered {response.status}"
        csp = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp, f"{path}: CSP header is {csp!r}"
        # No page may eval: the editor's schema validator is compiled ahead of time.
        assert "unsafe-eval" not in csp, f"{path}: CSP header is {csp!r}"
        violations = page.evaluate("window.__cspViolations")
        refused = [m for m in page.console_messages if "Content Security Policy" in m]
        if violations or refused:
            problems.append(f"{path}: {violations} {refused}")
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
    print(f"\nscreenshots of {len(main_pages(site))} pages at {WIDTH} px: {folder}")
    assert not problems, "CSP violations:\n" + "\n".join(problems)


def test_the_login_page_has_the_csp_too(browser, live_server, transactional_db):
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    context.add_init_script(CSP_LISTENER)
    page = context.new_page()
    response = page.goto(f"{live_server.url}/accounts/login/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.screenshot(path=str(artifacts_dir() / "login.png"))
    assert page.evaluate("window.__cspViolations") == []
    context.close()


def _columns_outside(page, table_selector: str) -> list[str]:
    """Header cells of the table not wholly inside the viewport, or clipped by a scroll box."""
    return page.evaluate(
        """([selector, width]) => {
      const table = document.querySelector(selector);
      if (!table) return ["no table " + selector];
      const bad = [];
      for (const th of table.querySelectorAll("thead th")) {
        const box = th.getBoundingClientRect();
        if (box.width < 20 || box.left < 0 || box.right > width) {
          bad.push(th.textContent.trim() + " at " + Math.round(box.left) + ".." + Math.round(box.right));
        }
      }
      for (let el = table.parentElement; el; el = el.parentElement) {
        if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible") {
          bad.push("scroll box " + (el.id || el.className) + " " + el.scrollWidth + " > " + el.clientWidth);
        }
      }
      if (document.documentElement.scrollWidth > width) bad.push("page scrolls sideways");
      return bad;
    }""",
        [table_selector, WIDTH],
    )


def test_the_grade_table_is_readable_at_1280_px(wide_page, live_server, site):
    page = wide_page
    preview_run, rollout = site["preview_run"], site["rollout"]
    for path in (f"/previews/{preview_run.pk}/?rollout={rollout.pk}", f"/previews/rollouts/{rollout.pk}/"):
        page.goto(live_server.url + path)
        table = "#rollout-detail table.checks"
        page.wait_for_selector(table)
        headers = [h.strip().lower() for h in page.locator(f"{table} thead th").all_inner_texts()]
        assert headers == ["check", "kind", "status", "score", "points", "awarded", "explanation", "reviewers"]
        assert _columns_outside(page, table) == [], path
        # The long judge explanation wraps inside its cell instead of widening the table.
        cell = page.locator(
            f'{table} tr[data-check-id="explains_the_product_clearly_with_a_long_identifier"] td.explanation-cell'
        )
        assert re.search("the multiplication", cell.inner_text())
        assert cell.bounding_box()["x"] + cell.bounding_box()["width"] <= WIDTH


def test_each_check_card_teaches_its_kind_in_place(wide_page, live_server, site):
    from grading.engine.kind_examples import EXAMPLES

    page = wide_page
    page.goto(f"{live_server.url}/tasks/{site['task'].slug}/edit/")
    page.wait_for_selector("#rubric-editor[data-ready=true]")
    card = page.locator('#rubric-structured .re-card[data-pointer="/checks/0"]')
    # The kind's one-line help is text with code marked up, never literal Markdown backticks.
    assert "`" not in card.locator(".re-kind-help").inner_text()
    example = card.locator(".re-kind-example")
    example.locator("summary").click()
    text = example.inner_text()
    assert EXAMPLES["string_match"].result in text and EXAMPLES["string_match"].answer in text
    # Changing the kind changes the example: number explains its first-number edge case.
    card.locator("select.re-kind").select_option("number")
    card.locator(".re-kind-example summary").click()
    assert "reads the first number, 456692" in card.locator(".re-kind-example").inner_text()
    assert card.locator(".re-kind-example a").get_attribute("href").endswith("/grading/kinds/#kind-number")


@pytest.mark.parametrize("width", [1280, 1400])
def test_the_new_task_button_fits_on_the_task_list(wide_page, live_server, width):
    page = wide_page
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/")
    button = page.get_by_role("link", name="New task")
    box = button.bounding_box()
    # Its own text fits inside it (no overflow out of a zero-width column), and it is inside the page.
    assert page.evaluate("(el) => el.scrollWidth <= el.clientWidth", button.element_handle())
    assert box["x"] >= 0 and box["x"] + box["width"] <= width
