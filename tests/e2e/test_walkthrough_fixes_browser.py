"""What a new user's walkthrough in Chromium found, each checked in Chromium: the editor keeps text as typed, the
boxes carry the server's limits (and a request over the body cap says what to do), the pack build form's boxes
look alike, and the judge labelling queue shows one card per distinct answer."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from authoring import services
from authoring.models import Task
from grading.engine.models import PROMPT_MAX_CHARS
from tests.e2e.conftest import sign_in, wait_for_editor

pytestmark = pytest.mark.django_db(transaction=True)

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [{"id": "says_42", "kind": "string_match", "points": 1, "expected": "42"}],
}
SCRIPT = "cat > fizzbuzz.py <<'EOF'\ndef fizzbuzz(n):\n    return str(n)\nEOF\n"


def test_editing_only_the_prompt_in_the_browser_changes_only_the_prompt(logged_in, live_server, author, environment):
    task = services.task_create(
        slug="fizzbuzz-implementation",
        environment=environment,
        author=author,
        content={
            "title": "FizzBuzz",
            "prompt": "\nWrite `fizzbuzz(n)`.\n",
            "rubric": RUBRIC,
            "solution": {"script": SCRIPT, "answer": None},
        },
    )
    page = logged_in
    page.goto(f"{live_server.url}/tasks/{task.slug}/edit/")
    wait_for_editor(page)
    assert page.input_value("#id_prompt") == "\nWrite `fizzbuzz(n)`.\n"
    assert page.get_attribute("#id_prompt", "maxlength") == str(PROMPT_MAX_CHARS)
    page.fill("#id_prompt", "\nWrite `fizzbuzz(n)` in fizzbuzz.py.\n")
    page.click("#save-button")
    page.wait_for_url(f"{live_server.url}/tasks/{task.slug}/")
    task = Task.objects.get(pk=task.pk)
    assert task.latest_version.number == 2
    assert task.latest_version.spec["solution"] == {"script": SCRIPT, "answer": None}
    page.goto(f"{live_server.url}/tasks/{task.slug}/diff/?a=1&b=2")
    expect(page.locator("h2", has_text="Solution")).to_have_count(0)
    expect(page.locator("h2", has_text="Prompt")).to_have_count(1)
    expect(page.locator(".check-diff-summary")).to_have_text("No check changed.")
    expect(page.locator("table.check-diff")).to_have_count(0)


def test_a_form_over_the_body_cap_says_which_limit_and_back_brings_the_text_back(
    logged_in, live_server, author, environment, settings
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 50_000
    task = services.task_create(
        slug="big-post",
        environment=environment,
        author=author,
        content={"title": "Big", "prompt": "Short.", "rubric": RUBRIC},
    )
    page = logged_in
    page.goto(f"{live_server.url}/tasks/{task.slug}/edit/")
    wait_for_editor(page)
    page.fill("#id_prompt", "My carefully typed prompt.")
    page.fill("#examples-json", json.dumps([{"name": "long", "answer": "a" * 60_000, "expect": "pass"}]))
    page.click("#save-button")
    expect(page.locator("#server-error h1")).to_have_text("Request too large")
    message = page.locator("#server-error").inner_text()
    assert "larger than the limit of 0.0477 MB (DATA_UPLOAD_MAX_MEMORY_SIZE)" in message
    assert "Back button returns to the form with everything you typed" in message
    page.go_back()
    expect(page.locator("#id_prompt")).to_have_value("My carefully typed prompt.")
    assert len(page.input_value("#examples-json")) > 60_000
    assert Task.objects.get(pk=task.pk).versions.count() == 1


def signed_in_as(page, live_server, django_user_model, username: str, role: str):
    from django.contrib.auth.models import Group

    from tests.e2e.conftest import PASSWORD

    user = django_user_model.objects.create_user(username=username, password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    sign_in(page, live_server.url, username)
    return user


def test_one_verdict_on_a_card_of_identical_answers_labels_every_copy(
    page, live_server, author, environment, django_user_model
):
    from grading.models import JudgeLabel
    from tests.review.conftest import finished_preview
    from tests.review.test_agreement_and_evidence import JUDGED_RUBRIC, judged_grade

    task = services.task_create(
        slug="judged",
        environment=environment,
        author=author,
        content={"title": "Judged", "prompt": "Six sevens?", "rubric": JUDGED_RUBRIC},
    )
    run = finished_preview(task.latest_version, author, "oracle", [1.0, 1.0, 1.0])
    for rollout in run.rollouts.all():
        rollout.answer = "6 × 7 = 42, because six sevens are forty-two."
        rollout.save(update_fields=["answer"])
        grade = judged_grade(task.latest_version, author, met=True)
        grade.rollout_id = rollout.pk
        grade.save(update_fields=["rollout_id"])
    signed_in_as(page, live_server, django_user_model, "rhea", "reviewer")
    page.goto(f"{live_server.url}/review/labels/?task=judged")
    expect(page.locator(".label-item")).to_have_count(1)
    expect(page.locator(".label-item .copies")).to_have_text("×3 identical")
    page.keyboard.press("n")
    expect(page.locator(".label-item .label-state")).to_have_text("labelled: not met (all 3)")
    assert sorted(JudgeLabel.objects.values_list("verdict", flat=True)) == ["not_met"] * 3
    page.reload()
    expect(page.locator("#label-queue-empty")).to_be_visible()


def test_the_pack_build_forms_boxes_look_alike(page, live_server, django_user_model):
    from packs import services as pack_services

    lab = signed_in_as(page, live_server, django_user_model, "lena", "lab")
    pack_services.pack_create(slug="styled", user=lab, name="Styled")
    page.goto(f"{live_server.url}/packs/styled/")
    style = (
        "e => { const s = getComputedStyle(e); return [s.width, s.paddingLeft, s.borderTopWidth, s.borderTopStyle,"
        " s.borderTopColor, s.borderRadius, s.fontSize, s.fontFamily, s.backgroundColor]; }"
    )
    assert page.eval_on_selector("#id_test_ratio", style) == page.eval_on_selector("#id_tags", style)
