"""The judge labelling queue in a real browser: y / n label through the API without a reload."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from authoring import services
from grading.models import JudgeLabel
from grading.services import grade_from_document, grade_record
from tests.e2e.conftest import PASSWORD, TIMEOUT_MS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=TIMEOUT_MS)

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "checks": [
        {"id": "clear", "kind": "llm_judge", "points": 1, "criterion": "Explains the product."},
        {"id": "says_42", "kind": "string_match", "points": 1, "mode": "contains", "expected": "42"},
    ],
}


def grade(version, author, met: bool):
    score = 1.0 if met else 0.0
    return grade_record(
        grade=grade_from_document(
            {
                "schema": "gymwright.grade/v1",
                "reward": (score + 1) / 2,
                "earned": score + 1,
                "max": 2,
                "passed": True,
                "gated": False,
                "complete": True,
                "checks": [
                    {
                        "id": "clear",
                        "kind": "llm_judge",
                        "status": "scored",
                        "score": score,
                        "points": 1,
                        "awarded": score,
                        "explanation": "judge",
                        "votes": [met],
                        "duration_ms": 1,
                    },
                    {
                        "id": "says_42",
                        "kind": "string_match",
                        "status": "scored",
                        "score": 1.0,
                        "points": 1,
                        "awarded": 1,
                        "explanation": "",
                        "duration_ms": 0,
                    },
                ],
            }
        ),
        task_version=version,
        source="rollout",
        user=author,
    )


def test_a_reviewer_labels_the_judge_with_the_keyboard_without_a_reload(
    page, live_server, author, environment, django_user_model
):
    reviewer = django_user_model.objects.create_user(username="rhea", password=PASSWORD)
    reviewer.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    task = services.task_create(
        slug="judged",
        environment=environment,
        author=author,
        content={"title": "Judged", "prompt": "Six sevens?", "rubric": RUBRIC, "solution": {"answer": "42"}},
    )
    first, second = grade(task.latest_version, author, True), grade(task.latest_version, author, True)

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "rhea")
    page.fill("input[name=password]", PASSWORD)
    page.click("form button[type=submit]")
    page.goto(f"{live_server.url}/review/labels/?task=judged")
    page.evaluate("window.__same_page = true")
    page.keyboard.press("y")
    expect(page.locator(".label-item").nth(0).locator(".label-state")).to_have_text("labelled: met")
    page.keyboard.press("n")
    expect(page.locator(".label-item").nth(1).locator(".label-state")).to_have_text("labelled: not met")
    assert page.evaluate("window.__same_page") is True  # no reload happened
    labels = {
        label.check_result.grade_id: (label.verdict, label.agrees)
        for label in JudgeLabel.objects.select_related("check_result")
    }
    assert labels == {first.pk: ("met", True), second.pk: ("not_met", False)}
