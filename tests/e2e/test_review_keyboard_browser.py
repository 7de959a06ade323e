"""No single key decides a review: `a` and `r` open the decision with the cursor in the task comment, a
confirming key sends it, and an undo window comes before it leaves the page (real headless Chromium)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from authoring import services
from review.models import Review
from tests.e2e.conftest import PASSWORD, TIMEOUT_MS, sign_in
from tests.review.conftest import pass_gates, task_content
from tests.support.users import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture
def in_review(author, environment):
    from review import services as review_services

    task = services.task_create(slug="six-times-seven", environment=environment, author=author, content=task_content())
    pass_gates(task.latest_version, author)
    review_services.task_submit(task=task, user=author)
    return task


def test_a_deciding_key_opens_the_decision_and_sends_nothing_until_confirmed(
    page, live_server, in_review, django_user_model, settings
):
    settings.REVIEW_UNDO_S = 2
    make_user(django_user_model, "rhea", "reviewer", password=PASSWORD)
    sign_in(page, live_server.url, "rhea")
    page.goto(f"{live_server.url}/review/tasks/{in_review.slug}/")
    comment = page.locator("#task-comment")

    # `a` opens the approval: the radio is chosen, the cursor is in the comment, nothing is sent.
    page.keyboard.press("a")
    expect(comment).to_be_focused()
    expect(page.locator('input[name=decision][value="approve"]')).to_be_checked()
    expect(page.locator("#decision-pending")).to_contain_text("Approve")
    page.keyboard.type("a")  # the letter lands in the box, as text: it decides nothing
    expect(comment).to_have_value("a")
    # Esc cancels: no decision chosen, keys act on the page again.
    page.keyboard.press("Escape")
    expect(page.locator("#decision-pending")).to_be_hidden()
    expect(page.locator("input[name=decision]:checked")).to_have_count(0)

    # Confirmed, then undone within the window: the approval is never sent.
    page.keyboard.press("a")
    page.keyboard.press("Control+Enter")
    undo_bar = page.locator("#decision-undo")
    expect(undo_bar).to_be_visible()
    expect(undo_bar).to_contain_text("Approve")
    page.keyboard.press("Escape")
    expect(undo_bar).to_be_hidden()
    expect(comment).to_be_focused()
    page.keyboard.press("Escape")  # and out of the box

    # `r`, the comment written where the cursor already is, Ctrl+Enter: sent after the window.
    page.keyboard.press("r")
    expect(page.locator('input[name=decision][value="request_changes"]')).to_be_checked()
    comment.fill("")
    page.keyboard.type("Say which units.")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    expect(page.locator(".messages")).to_contain_text("request changes on v1")
    reviews = list(Review.objects.filter(task_version__task=in_review).values_list("decision", "comment"))
    assert reviews == [("request_changes", "Say which units.")]  # the undone approval never left


def test_the_button_waits_out_the_undo_window_too(page, live_server, in_review, django_user_model, settings):
    settings.REVIEW_UNDO_S = 30
    make_user(django_user_model, "rhea", "reviewer", password=PASSWORD)
    sign_in(page, live_server.url, "rhea")
    page.goto(f"{live_server.url}/review/tasks/{in_review.slug}/")
    page.check('input[name=decision][value="approve"]')
    page.click("#review-form button[type=submit]")
    expect(page.locator("#decision-undo")).to_contain_text("Approve")
    expect(page.locator("#decision-undo [data-seconds-left]")).to_have_text("30")
    page.click("#decision-undo [data-undo]")
    expect(page.locator("#decision-undo")).to_be_hidden()
    expect(page.locator("#review-form button[type=submit]")).to_be_enabled()
    assert not Review.objects.filter(task_version__task=in_review).exists()
