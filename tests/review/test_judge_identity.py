"""A judged check's labels count only where the labelled version asked the same judge question (criterion, reference,
scale, named model): a criterion rewritten under the same id starts with no labels, for its rates, the
judge_validated gate, a preview's corrected figures and the pages; an edit elsewhere in the rubric keeps them."""

import copy

import pytest

from authoring import services as authoring_services
from grading.engine import calibration as engine_calibration
from review import calibration
from review import gate_evidence as review_gates
from review.agreement import agreement_json
from sandbox.models import Rollout
from tests.review.conftest import finished_preview, task_content
from tests.review.test_agreement_and_evidence import JUDGED_RUBRIC
from tests.review.test_judge_calibration import TNR, TPR, grade, measured  # noqa: F401 - the labelled task


@pytest.fixture
def lenient(measured, environment):
    """`measured`'s 20 labels validate its judge (TPR 0.9, TNR 0.8) under a rule asking for 0.8."""
    environment.judge_min_rate = 0.8
    environment.save()
    measured.environment.refresh_from_db()
    return measured


def edited(task, author, change) -> object:
    rubric = copy.deepcopy(task.latest_version.spec["rubric"])
    change({check["id"]: check for check in rubric["checks"]})
    version, made = authoring_services.task_version_create(
        task=task, author=author, content=task_content(rubric=rubric), base_version=task.latest_version.number
    )
    assert made
    task.refresh_from_db()
    return version


def judge_gate(version):
    version = type(version).objects.get(pk=version.pk)
    return {result.gate: result for result in review_gates.gates_evaluate(task_version=version)}["judge_validated"]


def reworded(checks):
    checks["clear"]["criterion"] = "Says 42, in any words."


def test_a_rewritten_criterion_starts_with_no_labels_while_its_old_version_keeps_them(lenient, author):
    v1 = lenient.latest_version
    assert judge_gate(v1).status == "pass"
    v2 = edited(lenient, author, reworded)
    assert calibration.task_rates(task=lenient, version=v2) == {}
    assert calibration.task_rates(task=lenient) == {}  # the latest version's
    gate = judge_gate(v2)
    assert gate.status == "fail" and "clear: judge not validated" in gate.message
    rates = calibration.task_rates(task=lenient, version=v1)["clear"]
    assert (rates.tpr, rates.tnr) == (TPR, TNR)
    assert judge_gate(v1).status == "pass"
    # the pages measure the latest version's question, and say what they left out
    body = agreement_json(environment=lenient.environment)
    assert body["checks"] == [] and body["left_out"] == {
        "labels": 20,
        "checks": [{"task": "judged", "check_id": "clear", "labels": 20}],
    }


def test_an_edit_elsewhere_in_the_rubric_keeps_the_checks_labels(lenient, author, client):
    def other_check(checks):
        checks["says_42"]["expected"] = "forty-two"

    v2 = edited(lenient, author, other_check)
    rates = calibration.task_rates(task=lenient, version=v2)["clear"]
    assert (rates.tpr, rates.tnr) == (TPR, TNR)
    assert judge_gate(v2).status == "pass"
    body = agreement_json(environment=lenient.environment)
    assert body["left_out"]["labels"] == 0 and body["checks"][0]["calibration"]["validated"] is True


def test_labels_on_both_questions_count_each_for_its_own_and_the_pages_say_so(lenient, author, reviewer, client):
    v2 = edited(lenient, author, reworded)
    from tests.review.test_judge_calibration import label

    for met in (True, True, False):
        label(grade(v2, author, met=met), reviewer, met)
    rates = calibration.task_rates(task=lenient, version=v2)["clear"]
    assert (rates.answers_met, rates.answers_not_met, rates.tpr, rates.tnr) == (2, 1, 1.0, 1.0)
    assert calibration.task_rates(task=lenient, version=lenient.versions.get(number=1))["clear"].answers == 20
    client.force_login(author)
    for url in ("/review/environments/shell/", "/review/environments/shell/agreement/"):
        page = " ".join(client.get(url).content.decode().split())
        row = page.split('data-check="judged/clear">', 1)[1].split("</tr>", 1)[0]
        assert '<td data-figure="classes">2 / 1' in row, url
        assert "(20 labels on an earlier criterion not counted)" in row, url
        assert 'id="labels-left-out">20 labels on an earlier criterion not counted' in page, url
    # a preview of each version is corrected by its own question's rates
    runs = {}
    for version in (lenient.versions.get(number=1), v2):
        run = finished_preview(version, author, "model", [1.0] * 2 + [0.5] * 2)
        for rollout, met in zip(run.rollouts.order_by("index"), [True, True, False, False], strict=True):
            Rollout.objects.filter(pk=rollout.pk).update(grade=grade(version, author, met))
        runs[version.number] = calibration.pack_judge_json(preview_run=run)["checks"]["clear"]
    assert (runs[1]["tpr"], runs[1]["labels"]["answers"]) == (TPR, 20)
    assert (runs[2]["tpr"], runs[2]["labels"]["answers"]) == (1.0, 3) and runs[2]["validated"] is False


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda checks: checks["clear"].update(criterion="Explains how six sevens make 42. "), id="space"),
        pytest.param(lambda checks: checks["clear"].update(reference="42"), id="reference"),
        pytest.param(lambda checks: checks["clear"].update(scale={"min": 0, "max": 10}), id="scale"),
        pytest.param(lambda checks: checks["clear"].update(model="another-judge"), id="model"),
    ],
)
def test_each_part_of_the_judge_question_makes_it_another(change):
    before = engine_calibration.judge_identities(JUDGED_RUBRIC)
    rubric = copy.deepcopy(JUDGED_RUBRIC)
    change({check["id"]: check for check in rubric["checks"]})
    after = engine_calibration.judge_identities(rubric)
    assert set(before) == set(after) == {"clear"} and before["clear"] != after["clear"]
    rubric["checks"][1]["expected"] = "forty-two"  # not a judged check: no part of any judge question
    assert engine_calibration.judge_identities(rubric) == after


def test_a_tasks_rates_for_two_versions_are_read_once_until_its_labels_change(
    lenient, author, django_assert_num_queries
):
    """The rates of every question are kept under the labels' stamp: asking for another version's is no new read."""
    v1 = lenient.latest_version
    v2 = edited(lenient, author, reworded)
    calibration.task_rates(task=lenient, version=v1)
    calibration.task_rates(task=lenient, version=v2)  # its identities read and kept
    with django_assert_num_queries(1):
        assert calibration.task_rates(task=lenient, version=v2) == {}
    with django_assert_num_queries(1):
        assert calibration.task_rates(task=lenient, version=v1)["clear"].answers == 20


def test_a_judged_task_with_no_labels_reads_no_label_rows(author, environment, django_assert_num_queries):
    """The gates ask for a judged task's rates on every view of its page; with no label the labels' stamp (one
    aggregate) says so, and no label rows, answers or identities are read, kept or not: a first view of each of a
    team's task pages paid for three more queries and their decoding."""
    task = authoring_services.task_create(
        slug="judged-unlabelled", environment=environment, author=author, content=task_content(rubric=JUDGED_RUBRIC)
    )
    calibration._TASK_RATES._items.clear()
    calibration._JUDGED._items.clear()
    with django_assert_num_queries(1):  # the stamp
        assert calibration.task_rates(task=task, version=task.latest_version) == {}
    verdicts = calibration.task_validation(
        task_version=task.latest_version, environment=environment, rubric=task.latest_version.spec["rubric"]
    )
    assert verdicts and all(not verdict.ok and "label" in verdict.message for verdict in verdicts.values())


def test_the_label_queue_offers_only_verdicts_whose_label_would_count_for_the_gate(lenient, author, reviewer, client):
    """A verdict judged under an earlier criterion is not offered: its label would count for that old question only.
    A version that asks the same question (an edit elsewhere in the rubric) still offers its verdicts."""
    from review import selectors

    v1 = lenient.latest_version
    old = grade(v1, author, True)
    v2 = edited(lenient, author, lambda checks: checks["says_42"].update(expected="forty-two"))
    same_question = grade(v2, author, False)
    assert {item.grade_id for item in selectors.unlabelled_judgements(task=lenient)} == {old.pk, same_question.pk}
    v3 = edited(lenient, author, reworded)
    current = grade(v3, author, True)
    assert [item.grade_id for item in selectors.unlabelled_judgements(task=lenient)] == [current.pk]
    assert [item.grade_id for item in selectors.unlabelled_judgements(environment=lenient.environment)] == [current.pk]
    client.force_login(reviewer)
    page = client.get(f"/review/labels/?task={lenient.slug}").content.decode()
    assert (
        page.count("data-label-item=") == 1
        and f'data-label-item="{current.check_results.get(check_id="clear").pk}"' in page
    )


def test_the_label_queue_reads_as_many_queries_for_many_verdicts_as_for_one(lenient, author):
    """The queue is read on every view of the label page: which verdicts count for the gate (their judge's question),
    the classes labelled so far and the graded texts are each read for the whole page at once, never per verdict."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from review import selectors

    def queue() -> tuple[int, int]:
        calibration._TASK_RATES._items.clear()  # each reading as a first view of the page: nothing kept
        calibration._JUDGED._items.clear()
        with CaptureQueriesContext(connection) as queries:
            items = selectors.unlabelled_judgements(task=lenient)
        return len(items), len(queries)

    grade(lenient.latest_version, author, True)
    one, few = queue()
    for index in range(6):
        grade(lenient.latest_version, author, index % 2 == 0, votes=[True, False] if index == 0 else None)
    many, more = queue()
    assert one == 1 and many == 7
    assert more == few, (few, more)
