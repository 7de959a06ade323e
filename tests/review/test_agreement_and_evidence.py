"""Judge agreement against hand-computed values, the labelling queue, non-discriminating checks
on the review page, and threads carried forward to new versions."""

import pytest

from authoring import services as authoring_services
from grading.models import CheckResult
from grading.services import grade_from_document, grade_record, judge_label_record
from review import agreement as review_agreement
from review import selectors, services
from sandbox.models import Rollout
from tests.review.conftest import RUBRIC, api_client, finished_preview, task_content

JUDGED_RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "clear", "kind": "llm_judge", "points": 1, "criterion": "Explains how six sevens make 42."},
        {"id": "says_42", "kind": "string_match", "points": 1, "mode": "contains", "expected": "42"},
    ],
}


def judged_grade(version, author, met: bool, says_42: float = 1.0):
    score = 1.0 if met else 0.0
    earned = score + says_42
    document = {
        "schema": "gymwright.grade/v1",
        "reward": earned / 2,
        "earned": earned,
        "max": 2,
        "passed": earned / 2 >= 0.5,
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
                "explanation": "judge says so",
                "votes": [met],
                "duration_ms": 1,
            },
            {
                "id": "says_42",
                "kind": "string_match",
                "status": "scored",
                "score": says_42,
                "points": 1,
                "awarded": says_42,
                "explanation": "",
                "duration_ms": 0,
            },
        ],
    }
    return grade_record(grade=grade_from_document(document), task_version=version, source="rollout", user=author)


@pytest.fixture
def judged_task(author, environment):
    return authoring_services.task_create(
        slug="judged", environment=environment, author=author, content=task_content(rubric=JUDGED_RUBRIC)
    )


def test_agreement_and_kappa_per_check_match_hand_computed_values_and_flag_rewording(judged_task, author, reviewer):
    version = judged_task.latest_version
    # (judge, human): met/met ×4, met/not ×2, not/not ×4, not/met ×1  → 8 of 11 agree
    pairs = [(True, True)] * 4 + [(True, False)] * 2 + [(False, False)] * 4 + [(False, True)]
    grades = [judged_grade(version, author, judge) for judge, _ in pairs]
    assert len(selectors.unlabelled_judgements(task=judged_task)) == 11
    item = selectors.unlabelled_judgements(task=judged_task)[0]
    assert item.criterion == "Explains how six sevens make 42." and item.judge_met is True

    for grade, (_, human) in zip(grades[:10], pairs[:10]):
        judge_label_record(
            check_result=grade.check_results.get(check_id="clear"),
            reviewer=reviewer,
            verdict="met" if human else "not_met",
        )
    ten = review_agreement.agreement_json(task=judged_task)["checks"][0]
    # 10 labels: TT4 TF2 FF4 → observed 0.8; p_judge 0.6, p_human 0.4 → expected 0.48; κ = 0.32 / 0.52
    assert (ten["labels"], ten["agreed"], ten["rate"]) == (10, 8, 0.8)
    assert ten["kappa"] == pytest.approx(0.32 / 0.52) and ten["reword"] is False  # 80 % and κ 0.615: fine

    judge_label_record(check_result=grades[10].check_results.get(check_id="clear"), reviewer=reviewer, verdict="met")
    eleven = review_agreement.agreement_json(task=judged_task)["checks"][0]
    # 11 labels: observed 8/11; p_judge 6/11, p_human 5/11 → expected 60/121; κ = (88-60)/(121-60) = 28/61
    assert eleven["kappa"] == pytest.approx(28 / 61) and eleven["rate"] == pytest.approx(8 / 11)
    assert eleven["reword"] is True
    assert selectors.unlabelled_judgements(task=judged_task) == []
    body = api_client(reviewer).get("/api/agreement/?environment=shell").json()
    assert body["tasks"]["judged"]["labels"] == 11 and body["checks"][0]["check_id"] == "clear"


def test_the_label_queue_lists_judged_checks_without_a_label(client, judged_task, author, reviewer):
    judged_grade(judged_task.latest_version, author, True)
    client.force_login(reviewer)
    page = client.get("/review/labels/?environment=shell").content.decode()
    assert page.count("data-label-item=") == 1 and "Explains how six sevens make 42." in page
    assert "js/labels.js" in page and "<script>" not in page


def test_the_label_queue_says_when_the_judged_answer_was_empty(client, judged_task, author, reviewer):
    # A nop or empty-answer probe's judged check showed "The answer" over nothing: a reviewer could not tell a blank
    # answer from a page that failed to load it.
    judged_grade(judged_task.latest_version, author, True)  # graded with no answer kept
    client.force_login(reviewer)
    page = client.get("/review/labels/?environment=shell").content.decode()
    assert page.count("data-label-item=") == 1 and '<pre class="graded-text"></pre>' not in page
    assert "The answer was empty." in page


def test_a_check_met_in_every_rollout_is_flagged_on_the_review_page(client, submitted, judged_task, author, reviewer):
    version = judged_task.latest_version
    run = finished_preview(version, author, "model", [1.0] * 4 + [0.5] * 4)
    for rollout, met in zip(run.rollouts.order_by("index"), [True] * 4 + [False] * 4):
        grade = judged_grade(version, author, met)
        Rollout.objects.filter(pk=rollout.pk).update(grade=grade)
    assert CheckResult.objects.filter(grade__task_version=version).count() == 16
    client.force_login(reviewer)
    page = " ".join(client.get(f"/review/tasks/{judged_task.slug}/").content.decode().split())
    assert "met in all 8 rollouts: it does not tell rollouts apart" in page
    assert page.count("does not tell rollouts apart") == 1  # "clear" is met in half: not flagged


def test_open_threads_follow_their_check_to_new_versions_and_gone_checks_are_set_apart(
    client, submitted, author, reviewer
):
    services.comment_create(task=submitted, user=reviewer, body="Keep this one.", check_id="says_42")
    services.comment_create(task=submitted, user=reviewer, body="Drop this check?", check_id="has_number")
    rubric = {**RUBRIC, "checks": [RUBRIC["checks"][0]]}
    authoring_services.task_version_create(
        task=submitted, author=author, base_version=1, content=task_content(rubric=rubric)
    )
    client.force_login(reviewer)
    page = client.get(f"/review/tasks/{submitted.slug}/").content.decode()
    card = page.split('data-review-check="says_42"', 1)[1].split("</article>", 1)[0]
    assert "Keep this one." in card
    gone = page.split("Comments on checks that are gone", 1)[1]
    assert "Drop this check?" in gone


def test_agreement_counts_each_distinct_answer_once_however_many_copies_were_labelled(judged_task, author, reviewer):
    version = judged_task.latest_version
    # Six distinct answers, each given by two rollouts: one verdict on a card labels both copies.
    answers = [f"Six sevens make 42, way {n}." for n in range(6)]
    run = finished_preview(version, author, "model", [0.5] * 12)
    for rollout, answer in zip(run.rollouts.order_by("index"), answers * 2):
        Rollout.objects.filter(pk=rollout.pk).update(answer=answer)
        grade = judged_grade(version, author, met=True)
        grade.rollout_id = rollout.pk
        grade.save(update_fields=["rollout_id"])
        judge_label_record(check_result=grade.check_results.get(check_id="clear"), reviewer=reviewer, verdict="not_met")

    check = review_agreement.agreement_json(task=judged_task)["checks"][0]
    # 12 label rows, 6 distinct (check, answer) pairs: every one a disagreement, but 6 < 10 is too few to say.
    assert (check["labels"], check["answers"], check["agreed"]) == (6, 6, 0)
    assert check["reword"] is False
    overall = review_agreement.agreement_json(task=judged_task)["overall"]
    assert (overall["labels"], overall["answers"]) == (6, 6)


def test_a_second_reviewer_disagreeing_on_one_answer_is_a_second_observation_of_one_answer(
    judged_task, author, reviewer, second_reviewer
):
    version = judged_task.latest_version
    run = finished_preview(version, author, "model", [0.5, 0.5])
    results = []
    for rollout in run.rollouts.order_by("index"):
        Rollout.objects.filter(pk=rollout.pk).update(answer="42.")
        grade = judged_grade(version, author, met=True)
        grade.rollout_id = rollout.pk
        grade.save(update_fields=["rollout_id"])
        results.append(grade.check_results.get(check_id="clear"))
    for result in results:
        judge_label_record(check_result=result, reviewer=reviewer, verdict="met")
    judge_label_record(check_result=results[0], reviewer=second_reviewer, verdict="not_met")

    check = review_agreement.agreement_json(task=judged_task)["checks"][0]
    assert (check["labels"], check["answers"], check["agreed"]) == (2, 1, 1)


def test_the_review_page_says_how_many_distinct_answers_back_kappa(client, judged_task, author, reviewer):
    # a judged task: labels count only on a check its version has (review.calibration.current_label_rows)
    version = judged_task.latest_version
    run = finished_preview(version, author, "model", [0.5] * 3)
    for rollout in run.rollouts.order_by("index"):
        Rollout.objects.filter(pk=rollout.pk).update(answer="same answer")
        grade = judged_grade(version, author, met=True)
        grade.rollout_id = rollout.pk
        grade.save(update_fields=["rollout_id"])
        judge_label_record(check_result=grade.check_results.get(check_id="clear"), reviewer=reviewer, verdict="met")
    client.force_login(reviewer)
    text = " ".join(client.get(f"/review/tasks/{judged_task.slug}/").content.decode().split())
    assert "1 distinct answer" in text and "3 labels" not in text
