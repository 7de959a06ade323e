"""Judge calibration in the app: a judge with a known error rate (9 of 10 human-met answers judged met, 8 of 10
human-not-met ones judged not met) measured from reviewers' labels, validated under its environment's rule, the
gate's warning or block, a preview's pass rate corrected beside the raw one (page and API), the labelling queue's
order and `manage.py judge_meta_eval`."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from authoring import services as authoring_services
from grading.services import grade_from_document, grade_record, judge_label_record
from review import gate_evidence as review_gates
from review import selectors
from review.agreement import agreement_json
from sandbox.models import Rollout
from tests.review.conftest import api_client, finished_preview, task_content
from tests.review.test_agreement_and_evidence import JUDGED_RUBRIC

TPR, TNR = 0.9, 0.8
CORRECTED = (0.5 + TNR - 1) / (TPR + TNR - 1)  # a preview where the judge passes half: 3/7


def grade(version, author, met: bool, votes=None):
    score = 1.0 if met else 0.0
    document = {
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
                "explanation": "",
                "votes": votes if votes is not None else [met],
                "duration_ms": 1,
            },
            {
                "id": "says_42",
                "kind": "string_match",
                "status": "scored",
                "score": 1.0,
                "points": 1,
                "awarded": 1.0,
                "explanation": "",
                "duration_ms": 0,
            },
        ],
    }
    return grade_record(grade=grade_from_document(document), task_version=version, source="rollout", user=author)


def label(graded, reviewer, met: bool):
    judge_label_record(
        check_result=graded.check_results.get(check_id="clear"), reviewer=reviewer, verdict="met" if met else "not_met"
    )


@pytest.fixture
def measured(author, reviewer, environment):
    """A task whose judge is labelled on 20 answers: TPR 0.9, TNR 0.8; the environment asks for 10 labels."""
    environment.judge_min_labels = 10
    environment.save()
    task = authoring_services.task_create(
        slug="judged", environment=environment, author=author, content=task_content(rubric=JUDGED_RUBRIC)
    )
    version = task.latest_version
    for i in range(10):
        label(grade(version, author, met=i < 9), reviewer, True)
    for i in range(10):
        label(grade(version, author, met=i >= 8), reviewer, False)
    return task


def test_tpr_tnr_and_validation_of_a_judge_with_a_known_error_rate(measured, environment, reviewer, second_reviewer):
    row = agreement_json(environment=environment)["checks"][0]["calibration"]
    assert (row["tp"], row["fn"], row["fp"], row["tn"]) == (9, 1, 2, 8)
    assert (row["tpr"], row["tnr"], row["answers_met"], row["answers_not_met"]) == (TPR, TNR, 10, 10)
    assert row["validated"] is False and row["validation"] == "judge not validated: TNR 0.80 below 0.85"
    environment.judge_min_rate = 0.8
    environment.save()
    body = api_client(reviewer).get("/api/agreement/?environment=shell").json()
    check = body["checks"][0]["calibration"]
    assert check["validated"] is True and check["tpr_ci95"] == pytest.approx([0.5958, 0.9821], abs=1e-4)
    assert body["rule"] == {"min_labels": 10, "min_per_class": 5, "min_rate": 0.8, "blocking": False}
    assert body["overall"]["calibration"]["tnr"] == TNR and body["tasks"]["judged"]["calibration"]["tp"] == 9
    # a second reviewer overrules one human-met answer: 1 to 1, the answer is contested and left out
    first = measured.latest_version.grades.order_by("id").first()
    label(first, second_reviewer, False)
    check = agreement_json(environment=environment)["checks"][0]["calibration"]
    assert (check["answers_met"], check["contested"], check["tp"]) == (9, 1, 8)


def test_a_judge_not_validated_warns_and_blocks_only_where_the_environment_says(measured, environment):
    version = measured.latest_version
    gate = {result.gate: result for result in review_gates.gates_evaluate(task_version=version)}["judge_validated"]
    assert (gate.status, gate.blocking, gate.ok) == ("fail", False, True)
    assert gate.message == "clear: judge not validated: TNR 0.80 below 0.85"
    environment.judge_unvalidated_blocks = True
    environment.save()
    measured.environment.refresh_from_db()
    version = type(version).objects.get(pk=version.pk)
    gate = {result.gate: result for result in review_gates.gates_evaluate(task_version=version)}["judge_validated"]
    assert (gate.status, gate.blocking, gate.ok) == ("fail", True, False)
    environment.judge_min_rate = 0.8
    environment.save()
    version = type(version).objects.get(pk=version.pk)
    gate = {result.gate: result for result in review_gates.gates_evaluate(task_version=version)}["judge_validated"]
    assert gate.status == "pass"


def test_a_previews_pass_rate_is_corrected_beside_the_raw_one_on_its_page_and_in_the_api(
    client, measured, author, reviewer
):
    version = measured.latest_version
    run = finished_preview(version, author, "model", [1.0] * 5 + [0.5] * 5)
    for rollout, met in zip(run.rollouts.order_by("index"), [True] * 5 + [False] * 5, strict=True):
        Rollout.objects.filter(pk=rollout.pk).update(grade=grade(version, author, met))
    body = api_client(reviewer).get(f"/api/previews/{run.pk}/calibration/").json()
    check = body["checks"][0]
    assert (check["check_id"], check["n"], check["raw_pass_rate"]) == ("clear", 10, 0.5)
    assert check["corrected_pass_rate"] == pytest.approx(CORRECTED)
    low, high = check["corrected_pass_rate_ci95"]
    assert low < CORRECTED < high
    assert (check["judge"]["tpr"], check["judge"]["tnr"]) == (TPR, TNR)
    assert body["mean_reward"] == 0.75 and body["corrected_mean_reward"] == pytest.approx(0.75 + (CORRECTED - 0.5) / 2)
    assert body["bootstrap"]["resamples"] == 400 and body["corrected_mean_reward_ci95"] is not None
    client.force_login(author)
    page = " ".join(client.get(f"/previews/{run.pk}/").content.decode().split())
    assert 'id="judge-calibration"' in page
    assert '<td data-figure="raw">50.0 %' in page and "<strong>42.9 %</strong>" in page
    assert '<td data-figure="tpr">90.0 %' in page and '<td data-figure="tnr">80.0 %' in page
    assert "Mean reward 0.750 · corrected <strong>0.714</strong>" in page
    agreement = " ".join(client.get("/review/environments/shell/agreement/").content.decode().split())
    assert '<td data-figure="tpr">90.0 %' in agreement and '<td data-figure="classes">10 / 10' in agreement


def test_the_label_queue_serves_split_votes_first_then_the_class_a_check_lacks(measured, author, reviewer):
    version = measured.latest_version
    # 10 human-met and 10 human-not-met labels so far: even, so met and not met rank alike, oldest first
    oldest_met = grade(version, author, True)
    not_met = grade(version, author, False)
    split = grade(version, author, True, votes=[True, False, True])
    order = [item.grade_id for item in selectors.unlabelled_judgements(task=measured)]
    assert order == [split.pk, oldest_met.pk, not_met.pk]
    # one more human-met answer: the check now lacks not-met labels, and the judge's not-met verdict comes first
    label(grade(version, author, True), reviewer, True)
    order = [item.grade_id for item in selectors.unlabelled_judgements(task=measured)]
    assert order == [split.pk, not_met.pk, oldest_met.pk]


def test_judge_meta_eval_prints_f1_per_check_and_macro_f1(measured):
    out = StringIO()
    call_command("judge_meta_eval", "shell", stdout=out)
    text = out.getvalue()
    # F1(met) = 18 / (18 + 2 + 1) = 0.857; F1(not met) = 16 / (16 + 1 + 2) = 0.842; macro 0.850
    assert "judged  clear  20       10/10    0.90  0.80  0.86    0.84    0.85      0.70   not validated" in text
    assert "mean macro F1 over 1 check: 0.85" in text
    out = StringIO()
    call_command("judge_meta_eval", "shell", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["checks"][0]["macro_f1"] == pytest.approx((18 / 21 + 16 / 19) / 2)
    assert report["mean_macro_f1"] == report["checks"][0]["macro_f1"] and report["environment"] == "shell"


def test_judge_meta_eval_exits_2_for_an_unknown_environment(db):
    with pytest.raises(CommandError, match="unknown environment 'nowhere'") as caught:
        call_command("judge_meta_eval", "nowhere")
    assert caught.value.returncode == 2


def test_a_tasks_judge_rates_are_read_once_until_its_labels_change(measured, reviewer, second_reviewer):
    """The gates ask for a judged task's rates on every view of its page; reading them loads every labelled answer
    (and a file check's workspace files). Kept under the stamp of the task's labels: a second read is one aggregate
    query, and a label recorded since is counted at once."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from review.calibration import task_rates

    first = task_rates(task=measured)
    with CaptureQueriesContext(connection) as queries:
        again = task_rates(task=measured)
    assert again == first and len(queries) == 1, [q["sql"][:120] for q in queries]
    label(measured.latest_version.grades.order_by("id").first(), second_reviewer, False)  # overrules one: contested
    after = task_rates(task=measured)["clear"]
    assert (after.contested, first["clear"].contested) == (1, 0)


def wilson_by_hand(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return centre - half, centre + half


def test_the_environment_dashboard_shows_each_checks_rates_validation_and_corrected_pass_rate(client, measured, author):
    assert [round(bound, 4) for bound in wilson_by_hand(9, 10)] == [0.5958, 0.9821]  # TPR 9/10: 60 %–98 %
    assert [round(bound, 4) for bound in wilson_by_hand(8, 10)] == [0.4902, 0.9433]  # TNR 8/10: 49 %–94 %
    client.force_login(author)
    page = " ".join(client.get("/review/environments/shell/").content.decode().split())
    assert 'id="judge-calibration"' in page and "no model preview of its latest version" in page
    version = measured.latest_version
    run = finished_preview(version, author, "model", [1.0] * 5 + [0.5] * 5)
    for rollout, met in zip(run.rollouts.order_by("index"), [True] * 5 + [False] * 5, strict=True):
        Rollout.objects.filter(pk=rollout.pk).update(grade=grade(version, author, met))
    page = " ".join(client.get("/review/environments/shell/").content.decode().split())
    row = page.split('data-check="judged/clear">', 1)[1].split("</tr>", 1)[0]
    assert '<td data-figure="tpr">90.0 % <span class="muted">(60 %–98 %)</span>' in row
    assert '<td data-figure="tnr">80.0 % <span class="muted">(49 %–94 %)</span>' in row
    assert "not validated" in row and "TNR 0.80 below 0.85" in row
    assert f'href="/previews/{run.pk}/">50.0 %</a>' in row and "<strong>42.9 %</strong>" in row  # 3/7 beside 1/2
    assert "0 of 1 labelled check validated" in page


def test_a_previews_correction_is_bootstrapped_once_until_what_it_reads_changes(
    measured, author, second_reviewer, monkeypatch
):
    """The environment dashboard corrects up to 20 previews on every view (400 bootstrap draws each); kept per
    process on everything the correction reads, a second view draws none, and a new label draws again."""
    from grading.engine import calibration as engine_calibration
    from review import calibration as review_calibration

    version = measured.latest_version
    run = finished_preview(version, author, "model", [1.0] * 5 + [0.5] * 5)
    for rollout, met in zip(run.rollouts.order_by("index"), [True] * 5 + [False] * 5, strict=True):
        Rollout.objects.filter(pk=rollout.pk).update(grade=grade(version, author, met))
    review_calibration._CORRECTED._items.clear()
    bootstraps = []
    real = engine_calibration.corrected_rewards
    monkeypatch.setattr(
        engine_calibration, "corrected_rewards", lambda *a, **kw: bootstraps.append(1) or real(*a, **kw)
    )
    first = review_calibration.preview_calibration_json(preview_run=run)
    assert review_calibration.preview_calibration_json(preview_run=run) == first and len(bootstraps) == 1
    label(version.grades.order_by("id").first(), second_reviewer, False)  # the rates change: corrected again
    after = review_calibration.preview_calibration_json(preview_run=run)
    assert len(bootstraps) == 2 and after["checks"][0]["judge"]["contested"] == 1
