"""Writes for grading, one module per thing: grades (storing a Grade and its checks), rubrics (parsing the
editor's), dry runs, judge labels (reviewers on the judge), example answers (the rubric's own tests), environment
judges (the judge endpoint an environment's owner chose).

Every function is keyword-only, validates its input and raises DomainError (never a bare exception) for
anything a user can get wrong. Callers import them from here (`from grading import services`) or from
their module.
"""

from grading.services.copilot import copilot_endpoint, rubric_draft
from grading.services.dry_runs import (
    MAX_WORKSPACE_FILES,
    DryRunOutcome,
    WorkspaceFile,
    answer_from_file,
    dry_run_fail,
    dry_run_fail_if_stale,
    dry_run_grade,
    dry_run_start,
    dry_runs_resend,
    size_text,
    workspace_path_check,
)
from grading.services.environment_judges import environment_judge_set
from grading.services.example_answers import (
    example_answers_claim,
    example_answers_fail,
    example_answers_finish,
    example_answers_grade,
    example_answers_progress,
    example_answers_run,
    example_answers_schedule,
    example_result,
    example_run_fail_if_stale,
    example_runs_resend,
    example_runs_wait_for_broker,
    example_sandbox_grader_register,
)
from grading.services.grades import grade_from_document, grade_record
from grading.services.judge_labels import SCORE_AGREEMENT_TOLERANCE, judge_label_record, judge_verdict_of
from grading.services.rubrics import rubric_from_text, rubric_parse

__all__ = [
    "environment_judge_set",
    "copilot_endpoint",
    "rubric_draft",
    "grade_from_document",
    "grade_record",
    "rubric_from_text",
    "rubric_parse",
    "DryRunOutcome",
    "MAX_WORKSPACE_FILES",
    "WorkspaceFile",
    "answer_from_file",
    "dry_run_fail",
    "dry_run_fail_if_stale",
    "dry_run_grade",
    "dry_run_start",
    "dry_runs_resend",
    "size_text",
    "workspace_path_check",
    "SCORE_AGREEMENT_TOLERANCE",
    "judge_label_record",
    "judge_verdict_of",
    "example_answers_claim",
    "example_answers_fail",
    "example_answers_finish",
    "example_answers_grade",
    "example_answers_progress",
    "example_answers_run",
    "example_answers_schedule",
    "example_result",
    "example_run_fail_if_stale",
    "example_runs_resend",
    "example_runs_wait_for_broker",
    "example_sandbox_grader_register",
]
