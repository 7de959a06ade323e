"""Grades stored under the old scoring rule (issue 26: unscored checks left out of `max`, an unscored
required check not gating): the migration totals each one again where its document allows it and marks
it rule 2; the rest stay rule 1, and the gates treat their previews as not run ("graded under the old
scoring rule — run it again"), pack calibration leaves them out, stored example verdicts ask to be
graded again."""

from __future__ import annotations

import pytest

OLD_INCOMPLETE = {  # "42" met (2 points), the judge check unscored: the old rule said 2 of 2, reward 1, passed
    "schema": "gymwright.grade/v1",
    "reward": 1.0,
    "earned": 2.0,
    "max": 2.0,
    "passed": True,
    "gated": False,
    "complete": False,
    "duration_ms": 3,
    "protected_files": [],
    "checks": [
        {
            "id": "says_42",
            "kind": "string_match",
            "status": "scored",
            "score": 1.0,
            "points": 2,
            "awarded": 2.0,
            "required": False,
            "explanation": "answer contains '42'",
            "votes": None,
            "duration_ms": 0,
            "checks": None,
        },
        {
            "id": "explains",
            "kind": "llm_judge",
            "status": "unscored",
            "score": None,
            "points": 1,
            "awarded": None,
            "required": True,
            "explanation": "no judge model configured",
            "votes": None,
            "duration_ms": 0,
            "checks": None,
        },
    ],
}

OLD_GROUP = {  # a mean group scored over an unscored child: whether it stands needs its aggregate
    "schema": "gymwright.grade/v1",
    "reward": 1.0,
    "earned": 2.0,
    "max": 2.0,
    "passed": True,
    "gated": False,
    "complete": False,
    "duration_ms": 3,
    "protected_files": [],
    "checks": [
        {
            "id": "g",
            "kind": "group",
            "status": "scored",
            "score": 1.0,
            "points": 2,
            "awarded": 2.0,
            "required": False,
            "explanation": "mean over 1 scored child check(s); 1 unscored left out",
            "votes": None,
            "duration_ms": 0,
            "checks": [
                {
                    "id": "a",
                    "kind": "string_match",
                    "status": "scored",
                    "score": 1.0,
                    "points": 1,
                    "awarded": None,
                    "required": False,
                    "explanation": "",
                    "votes": None,
                    "duration_ms": 0,
                    "checks": None,
                },
                {
                    "id": "j",
                    "kind": "llm_judge",
                    "status": "unscored",
                    "score": None,
                    "points": 1,
                    "awarded": None,
                    "required": False,
                    "explanation": "no judge model configured",
                    "votes": None,
                    "duration_ms": 0,
                    "checks": None,
                },
            ],
        }
    ],
}

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 2, "expected": "42"},
        {"id": "explains", "kind": "llm_judge", "points": 1, "required": True, "criterion": "Explains."},
    ],
}


def _old_world(old_apps):
    user = old_apps.get_model("auth", "User").objects.create(username="old")
    environment = old_apps.get_model("authoring", "Environment").objects.create(slug="e", name="e", owner_id=user.pk)
    environment_version = old_apps.get_model("authoring", "EnvironmentVersion").objects.create(
        environment=environment, number=1, sha256="0" * 64, spec={}, author_id=user.pk
    )
    task = old_apps.get_model("authoring", "Task").objects.create(
        slug="t", title="t", environment=environment, owner_id=user.pk
    )
    spec = {
        "schema": "gymwright.task/v1",
        "id": "t",
        "prompt": "Say 42.",
        "rubric": RUBRIC,
        "solution": {"answer": "42"},
    }
    return old_apps.get_model("authoring", "TaskVersion").objects.create(
        task=task,
        number=1,
        spec=spec,
        sha256="1" * 64,
        content_sha256="2" * 64,
        environment_version=environment_version,
        author_id=user.pk,
    )


def _old_grade(old_apps, document, task_version):
    Grade = old_apps.get_model("grading", "Grade")
    grade = Grade.objects.create(
        task_version=task_version,
        source="rollout",
        reward=document["reward"],
        earned=document["earned"],
        max=document["max"],
        passed=document["passed"],
        gated=document["gated"],
        complete=document["complete"],
        document=document,
    )
    CheckResult = old_apps.get_model("grading", "CheckResult")
    position = 0
    for check in document["checks"]:
        for row, depth, parent in [(check, 0, "")] + [(child, 1, check["id"]) for child in check["checks"] or []]:
            CheckResult.objects.create(
                grade=grade,
                position=position,
                depth=depth,
                parent_check_id=parent,
                check_id=row["id"],
                kind=row["kind"],
                status=row["status"],
                score=row["score"],
                points=row["points"],
                awarded=row["awarded"],
                required=row["required"],
                explanation=row["explanation"],
            )
            position += 1
    return grade


def _old_run(old_apps, task_version, policy, grade):
    run = old_apps.get_model("sandbox", "PreviewRun").objects.create(
        task_version=task_version,
        policy=policy,
        policy_kind=policy.split(":")[0],
        n=1,
        backend="bubblewrap",
        status="done",
        summary={"graded": 1, "passed": 1, "mean_reward": 1.0, "pass_rate": 1.0},
    )
    old_apps.get_model("sandbox", "Rollout").objects.create(
        preview_run=run, index=0, status="done", grade=grade, reward=grade.reward, passed=grade.passed
    )
    return run


@pytest.mark.django_db(transaction=True)
def test_old_rule_grades_are_totalled_again_or_marked_and_the_gates_say_run_it_again():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("grading", "0005_job_enqueued_at"), ("sandbox", "0007_remove_rollout_grade_document")]
    after = [("grading", "0006_grade_scoring_rule"), ("sandbox", "0008_rollouts_follow_retotalled_grades")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    task_version = _old_world(old_apps)
    retotalled = _old_grade(old_apps, OLD_INCOMPLETE, task_version)
    stuck = _old_grade(old_apps, OLD_GROUP, None)  # no task version: the group's aggregate is unknown
    oracle = _old_run(old_apps, task_version, "oracle", retotalled)
    nop = _old_run(old_apps, task_version, "nop", stuck)
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    from authoring.models import TaskVersion
    from grading.engine import gate_rules as engine_gates
    from grading.models import CheckResult, Grade
    from packs.services import _calibration
    from review.gate_evidence import gate_inputs
    from sandbox.models import PreviewRun, Rollout

    again = Grade.objects.get(pk=retotalled.pk)
    # the judge check stays in max (3) and, being required and unscored, gates: the lower bound is 0
    assert (again.scoring_rule, again.reward, again.reward_upper, again.max) == (2, 0.0, 1.0, 3.0)
    assert (again.passed, again.gated, again.complete) == (False, True, False)
    assert again.document["reward_upper"] == 1.0 and again.document["max"] == 3.0
    assert CheckResult.objects.get(grade=again, check_id="says_42").awarded == 2.0
    rollout = Rollout.objects.get(preview_run_id=oracle.pk)
    assert (rollout.reward, rollout.passed) == (0.0, False)  # the rollout repeats its grade again
    summary = PreviewRun.objects.get(pk=oracle.pk).summary
    assert summary["scoring_rule"] == 2 and summary["mean_reward"] == 0.0 and summary["passed"] == 0

    kept = Grade.objects.get(pk=stuck.pk)
    assert (kept.scoring_rule, kept.reward_upper, kept.reward) == (1, None, 1.0) and kept.old_rule
    assert kept.unscored_note == "graded under the old scoring rule — run it again"
    assert PreviewRun.objects.get(pk=nop.pk).summary["scoring_rule"] == 1
    assert _calibration(PreviewRun.objects.get(pk=nop.pk).summary, "model") is None
    assert _calibration(summary, "model") is not None

    inputs = gate_inputs(task_version=TaskVersion.objects.get(pk=task_version.pk))
    assert inputs.previews["nop"].scoring_rule == 1 and inputs.previews["oracle"].scoring_rule == 2
    results = {result.gate: result for result in engine_gates.evaluate_gates(inputs)}
    assert results["nop"].status == "not_run"
    assert results["nop"].message == "graded under the old scoring rule — run it again"
    assert results["oracle"].status != "pass"  # its grade is incomplete now, and gated: no verdict by default
    assert ("nop", engine_gates.NOP_ROLLOUTS) in engine_gates.previews_to_start(inputs, results.values())


@pytest.mark.django_db
def test_a_stored_example_verdict_from_before_reward_upper_asks_to_be_graded_again():
    from grading.engine.example_answers import PENDING, current_result

    old = {
        "name": "right",
        "expect": "pass",
        "status": "as_expected",
        "message": "pass, reward 1.00, as expected",
        "got": "pass",
        "reward": 1.0,
        "reward_min": None,
        "reward_max": None,
        "grade": None,
    }
    stale = current_result(old)
    assert stale["status"] == PENDING and stale["got"] is None
    assert stale["message"] == "graded under the old scoring rule — grade it again"
    fresh = current_result({**old, "reward_upper": 1.0})
    assert fresh["status"] == "as_expected"
    assert current_result({**old, "status": "error"})["status"] == "error"
