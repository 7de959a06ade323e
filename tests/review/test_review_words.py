"""What the review pages say, as the walkthrough read them: one labelling card per distinct judged text, check
descriptions with their `inline code`, and an inbox item's comments each on a line of its own."""

import pytest

from authoring import services as authoring_services
from grading.models import JudgeLabel
from grading.services import judge_label_record
from review.models import InboxItem
from tests.review.conftest import finished_preview, task_content
from tests.review.test_agreement_and_evidence import JUDGED_RUBRIC, judged_grade

pytestmark = pytest.mark.django_db


def rollouts_answering(version, author, answers: list[str]):
    run = finished_preview(version, author, "oracle", [1.0] * len(answers))
    grades = []
    for rollout, answer in zip(run.rollouts.order_by("index"), answers):
        rollout.answer = answer
        rollout.save(update_fields=["answer"])
        grade = judged_grade(version, author, met=answer != "I refuse.")
        grade.rollout_id = rollout.pk
        grade.save(update_fields=["rollout_id"])
        grades.append(grade)
    return grades


def test_identical_judged_answers_are_one_card_with_a_count(client, author, reviewer, environment):
    task = authoring_services.task_create(
        slug="judged", environment=environment, author=author, content=task_content(rubric=JUDGED_RUBRIC)
    )
    grades = rollouts_answering(task.latest_version, author, ["6 × 7 = 42."] * 5 + ["I refuse."])
    client.force_login(reviewer)
    page = client.get("/review/labels/?task=judged").content.decode()
    assert page.count("data-label-item=") == 2
    same = page.split("data-label-item=")[1]
    assert 'data-copies="5"' in same and "×5 identical" in same and "6 × 7 = 42." in same
    assert same.split('data-urls="')[1].split('"')[0] == " ".join(
        f"/api/check-results/{grade.check_results.get(check_id='clear').pk}/labels/" for grade in grades[:5]
    )
    assert "met ×5" in same
    other = page.split("data-label-item=")[2]
    assert 'data-copies="1"' in other and "I refuse." in other and "identical" not in other
    # Labelled (as the card's buttons do: each copy), the card is gone.
    for grade in grades[:5]:
        judge_label_record(check_result=grade.check_results.get(check_id="clear"), reviewer=reviewer, verdict="met")
    assert JudgeLabel.objects.count() == 5
    assert client.get("/review/labels/?task=judged").content.decode().count("data-label-item=") == 1


def test_grades_without_a_known_text_are_never_grouped(client, author, reviewer, environment):
    """A grade with no rollout and no answer shows an empty text that says nothing of what the judge read."""
    task = authoring_services.task_create(
        slug="judged", environment=environment, author=author, content=task_content(rubric=JUDGED_RUBRIC)
    )
    judged_grade(task.latest_version, author, True)
    judged_grade(task.latest_version, author, True)
    client.force_login(reviewer)
    page = client.get("/review/labels/?task=judged").content.decode()
    assert page.count("data-label-item=") == 2 and "identical" not in page


def test_check_descriptions_show_inline_code_as_code_and_stay_escaped(client, author, reviewer, environment):
    rubric = {
        **JUDGED_RUBRIC,
        "checks": [
            {
                "id": "clear",
                "kind": "llm_judge",
                "points": 1,
                "title": "Names `fizzbuzz`",
                "criterion": "Calls `fizzbuzz(n)` for <b>each</b> n; a lone ` stays.",
            },
            {"id": "tests_pass", "kind": "command", "points": 1, "run": "pytest -q `<img src=x onerror=alert(1)>`"},
        ],
    }
    task = authoring_services.task_create(
        slug="coded", environment=environment, author=author, content=task_content(rubric=rubric)
    )
    rollouts_answering(task.latest_version, author, ["Done."])
    client.force_login(reviewer)
    for url in ("/tasks/coded/", "/review/tasks/coded/", "/review/labels/?task=coded"):
        page = client.get(url).content.decode()
        assert "Calls <code>fizzbuzz(n)</code> for &lt;b&gt;each&lt;/b&gt; n; a lone ` stays." in page, url
        assert "<b>each</b>" not in page, url
        assert "`fizzbuzz(n)`" not in page.split("Raw JSON")[0], url  # the raw JSON keeps what was written
    for url in ("/tasks/coded/", "/review/tasks/coded/"):
        page = client.get(url).content.decode()
        assert "Names <code>fizzbuzz</code>" in page
        # A command's description quotes it in backticks: its markup stays text.
        assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img src=x" not in page


def test_the_inbox_shows_each_comment_of_a_review_on_a_line_of_its_own(client, author, reviewer, task):
    InboxItem.objects.create(
        recipient=author,
        actor=reviewer,
        task=task,
        kind="changes_requested",
        version_number=1,
        text="Tighten the pattern.\nsays_42: Accept 42.0 as well.",
    )
    client.force_login(author)
    page = client.get("/inbox/").content.decode()
    assert "Tighten the pattern.<br>says_42: Accept 42.0 as well." in page
