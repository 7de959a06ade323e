"""Blind scoring in a real browser: a reviewer reads a rollout without its grade, scores it, and only then sees the
rubric's reward beside their score."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from authoring import services
from review.models import BlindScore
from sandbox.models import Rollout
from tests.e2e.conftest import PASSWORD, TIMEOUT_MS, sign_in
from tests.review.conftest import finished_preview

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=TIMEOUT_MS)

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "checks": [{"id": "says_42", "kind": "string_match", "points": 1, "mode": "contains", "expected": "42"}],
}


def test_a_reviewer_scores_a_rollout_blind_and_sees_the_grade_only_after(
    page, live_server, author, environment, django_user_model
):
    task = services.task_create(
        slug="blind-e2e",
        environment=environment,
        author=author,
        content={"title": "Six sevens", "prompt": "What is six times seven?", "rubric": RUBRIC,
                 "solution": {"answer": "42"}},
    )  # fmt: skip
    run = finished_preview(task.latest_version, author, "model", [0.8125])
    Rollout.objects.filter(preview_run=run).update(answer="Forty-two, I believe.")
    reviewer = django_user_model.objects.create_user(username="rhea", password=PASSWORD)
    reviewer.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    sign_in(page, live_server.url, "rhea")

    page.goto(f"{live_server.url}/review/tasks/blind-e2e/blind/")
    page.click("#blind-next")
    expect(page.locator("#rollout-answer")).to_have_text("Forty-two, I believe.")
    expect(page.locator("#blind-prompt")).to_contain_text("What is six times seven?")
    assert "0.812" not in page.content()  # the reward is nowhere in the page
    page.check("input[name=passed][value=no]")
    page.fill("input[name=score]", "3")
    page.click("#blind-score-form button[type=submit]")
    expect(page.locator("[data-revealed=reward]")).to_contain_text("0.812")
    expect(page.locator("[data-mine=passed]")).to_have_text("fails, 3 / 10")
    assert list(BlindScore.objects.values_list("reviewer__username", "passed", "score")) == [("rhea", False, 3)]
