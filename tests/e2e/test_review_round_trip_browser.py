"""The review round trip in a real browser, with real previews (bubblewrap sandboxes, Celery jobs
run eagerly in the live server): an author runs the gates and submits; a reviewer opens the queue,
comments on one check and requests changes; the author sees the comment at the check in the
editor, fixes it, resolves it and resubmits; the reviewer sees the diff and approves with the keyboard."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from authoring import services
from authoring.models import Task
from review.models import Comment
from tests.e2e.conftest import PASSWORD, TIMEOUT_MS, wait_for_editor

pytestmark = [pytest.mark.browser, pytest.mark.bubblewrap, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=TIMEOUT_MS)

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 2, "mode": "contains", "expected": "42"},
        {"id": "has_number", "kind": "regex", "points": 1, "pattern": r"\d+"},
    ],
}
GATES_MS = 180_000  # six real rollouts run inside the request


def login(browser, live_server, username):
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.js_errors = []
    page.on("pageerror", lambda exc: page.js_errors.append(str(exc)))
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return page


def run_gates_and_submit(page, live_server, slug, number):
    page.goto(f"{live_server.url}/tasks/{slug}/")
    with page.expect_navigation(timeout=GATES_MS):
        page.click("#run-gates")
    from sandbox.models import Rollout

    errors = list(Rollout.objects.exclude(error="").values_list("error", flat=True)[:3])
    assert not errors, errors
    for gate in ("oracle", "nop"):
        expect(page.locator(f'#gates [data-gate="{gate}"]')).to_have_attribute("data-status", "pass")
    page.click(f"#submit-form button:has-text('Submit v{number} for review')")
    expect(page.locator(".messages")).to_contain_text(f"Submitted {slug} v{number} for review")


def test_the_review_round_trip(browser, live_server, author, environment, django_user_model, eager_celery, sandbox_dir):
    reviewer = django_user_model.objects.create_user(username="rhea", password=PASSWORD)
    reviewer.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    task = services.task_create(
        slug="six-sevens",
        environment=environment,
        author=author,
        content={
            "title": "Six sevens",
            "prompt": "What is six times seven?",
            "rubric": RUBRIC,
            "solution": {"script": None, "answer": "42"},
        },
    )

    # The author runs the gates (real oracle ×3 and nop ×3 previews) and submits v1.
    writer = login(browser, live_server, author.username)
    run_gates_and_submit(writer, live_server, task.slug, 1)

    # The reviewer finds it in the queue, comments on one check and requests changes (keyboard).
    reader = login(browser, live_server, reviewer.username)
    expect(reader.locator("#nav-review .nav-count")).to_have_text("1")
    reader.goto(f"{live_server.url}/review/")
    reader.click(f'#review-queue [data-task="{task.slug}"] a')
    reader.wait_for_url(f"**/review/tasks/{task.slug}/")
    reader.keyboard.press("?")
    expect(reader.locator("#keyboard-help")).to_be_visible()
    reader.keyboard.press("Escape")
    reader.keyboard.press("j")
    expect(reader.locator('[data-review-check="says_42"]')).to_have_class(lambda_class("current"))
    reader.keyboard.press("c")
    reader.keyboard.type("Worth 3 points: it is the whole answer.")
    reader.locator("#review-prompt").click()  # leave the box: keys act on the page again
    reader.keyboard.press("r")  # opens the decision, the cursor in the task comment
    expect(reader.locator("#task-comment")).to_be_focused()
    with reader.expect_navigation():
        reader.keyboard.press("Control+Enter")  # sent after the undo window
    expect(reader.locator(".messages")).to_contain_text("request changes on v1")

    # The author sees the comment at its check in the editor, fixes the check, saves, resolves.
    writer.goto(f"{live_server.url}/inbox/")
    expect(writer.locator('[data-kind="changes_requested"]')).to_contain_text("Worth 3 points")
    writer.goto(f"{live_server.url}/tasks/{task.slug}/edit/")
    wait_for_editor(writer)
    card = writer.locator('#rubric-structured .re-card[data-pointer="/checks/0"]')
    expect(card.locator('[data-check-thread="says_42"]')).to_contain_text("Worth 3 points")
    card.locator("[data-key=points] input").fill("3")
    writer.click("#save-button")
    expect(writer.locator(".messages")).to_contain_text(f"Saved {task.slug} v2")
    writer.goto(f"{live_server.url}/tasks/{task.slug}/edit/")
    wait_for_editor(writer)
    thread = writer.locator('#rubric-structured .re-card[data-pointer="/checks/0"] [data-check-thread="says_42"]')
    thread.locator(".resolve-form button").click()  # in place (htmx): the editor stays as it was
    expect(writer.locator('[data-check-thread="says_42"] .thread')).to_have_class(lambda_class("resolved"))
    run_gates_and_submit(writer, live_server, task.slug, 2)

    # The reviewer sees the diff, check by check, and approves with the keyboard.
    reader.goto(f"{live_server.url}/review/tasks/{task.slug}/")
    expect(reader.locator("#review-diff")).to_contain_text("Changes since v1")
    expect(reader.locator("#review-diff .check-diff-changed")).to_contain_text("says_42")
    reader.keyboard.press("a")
    with reader.expect_navigation():
        reader.keyboard.press("Control+Enter")
    expect(reader.locator(".messages")).to_contain_text("approve on v2")

    task.refresh_from_db()
    assert task.status == Task.Status.APPROVED and task.approved_version.number == 2
    assert Comment.objects.get(check_id="says_42").is_resolved
    assert not writer.js_errors and not reader.js_errors, writer.js_errors + reader.js_errors
    writer.context.close()
    reader.context.close()


def lambda_class(name):
    import re

    return re.compile(rf"(^|\s){name}(\s|$)")
