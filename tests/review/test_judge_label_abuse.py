"""Dodging the judge_validated gate with labels that never judged the judge: an author gets an easy criterion
labelled until its judge is validated, then rewrites the criterion under the same check id. The labels stay with the
question they judged (review.calibration.current_label_rows, task_rates): the rewritten judge is not validated, and
where the environment blocks, its version cannot be submitted."""

import copy

import pytest

from authoring import services as authoring_services
from grading.engine.calibration import judge_identities
from gymwright.errors import DomainError
from review import gate_evidence as review_gates
from review.services import task_submit
from tests.review.conftest import task_content
from tests.review.test_agreement_and_evidence import JUDGED_RUBRIC
from tests.review.test_judge_calibration import grade, label


def test_a_criterion_rewritten_under_a_validated_id_does_not_inherit_its_validation(author, reviewer, environment):
    environment.judge_min_labels = 10
    environment.judge_min_rate = 0.8
    environment.judge_unvalidated_blocks = True
    environment.save()
    easy = copy.deepcopy(JUDGED_RUBRIC)
    easy["checks"][0]["criterion"] = "The answer contains the digits 4 and 2."
    task = authoring_services.task_create(
        slug="dodge", environment=environment, author=author, content=task_content(rubric=easy)
    )
    v1 = task.latest_version
    for met in [True] * 10 + [False] * 10:  # the judge is right every time on the easy question
        label(grade(v1, author, met=met), reviewer, met)
    gates = {result.gate: result for result in review_gates.gates_evaluate(task_version=v1)}
    assert gates["judge_validated"].status == "pass"

    hard = copy.deepcopy(easy)
    hard["checks"][0]["criterion"] = "Proves from first principles that six sevens make 42."
    v2, _ = authoring_services.task_version_create(
        task=task, author=author, content=task_content(rubric=hard), base_version=1
    )
    gate = {result.gate: result for result in review_gates.gates_evaluate(task_version=v2)}["judge_validated"]
    assert (gate.status, gate.blocking, gate.ok) == ("fail", True, False)
    assert gate.message.startswith("clear: judge not validated")
    task.refresh_from_db()
    with pytest.raises(DomainError) as refused:
        task_submit(task=task, user=author)
    assert any(detail["pointer"] == "/gates/judge_validated" for detail in refused.value.details)


def test_a_rubric_that_names_one_judged_check_id_twice_gives_it_no_question():
    """Ids are unique in a valid rubric; a stored document that is not is read as naming no one question, so its
    labels count for nothing rather than for whichever copy was read last."""
    rubric = copy.deepcopy(JUDGED_RUBRIC)
    rubric["checks"].append({**rubric["checks"][0], "criterion": "Anything at all."})
    rubric["checks"].append({**rubric["checks"][0], "criterion": "Anything else."})
    assert judge_identities(rubric) == {}
    assert judge_identities({"checks": "not a list"}) == {} and judge_identities(None) == {}


def test_labels_on_a_dry_run_answer_the_editors_question_not_the_versions(author, reviewer, environment):
    """A dry run's grade belongs to the version its editor sat on, but its judge was asked the rubric in the editor,
    unsaved. Labels on dry runs of an easy criterion count for that criterion, never for the version's own."""
    from grading.models import DryRun, Grade
    from grading.services import grade_from_document, grade_record
    from review.calibration import task_rates

    environment.judge_min_labels = 10
    environment.judge_min_rate = 0.8
    environment.save()
    task = authoring_services.task_create(
        slug="dodge", environment=environment, author=author, content=task_content(rubric=JUDGED_RUBRIC)
    )
    v1 = task.latest_version
    easy = copy.deepcopy(JUDGED_RUBRIC)
    easy["checks"][0]["criterion"] = "The answer contains the digits 4 and 2."

    def dry_run(rubric, met):
        graded = grade(v1, author, met=met)  # a rollout-shaped grade document, re-recorded as a dry run's
        document = graded.document
        graded.delete()
        dry = grade_record(grade=grade_from_document(document), task_version=v1, source="dry_run", user=author)
        DryRun.objects.create(task=task, task_version=v1, rubric=rubric, grade=dry, created_by=author)
        assert dry.source == Grade.Source.DRY_RUN
        label(dry, reviewer, met)

    for met in [True] * 10 + [False] * 10:
        dry_run(easy, met)
    assert task_rates(task=task, version=v1) == {}
    gate = {result.gate: result for result in review_gates.gates_evaluate(task_version=v1)}["judge_validated"]
    assert gate.status == "fail"
    dry_run(JUDGED_RUBRIC, True)  # a dry run of the version's own question counts for it
    assert task_rates(task=task, version=v1)["clear"].answers == 1
