"""Reviewers' judge labels: a reviewer confirms or overrules the judge on one judged check."""

from __future__ import annotations

from django.db import transaction

from accounts.permissions import can_review
from grading.models import CheckResult, JudgeLabel
from gymwright.errors import DomainError, NotAllowed
from gymwright.text import comment_text

# A scaled judge and a reviewer agree when their scores (in [0, 1]) are this close.
SCORE_AGREEMENT_TOLERANCE = 0.1


def judge_verdict_of(check_result: CheckResult) -> tuple[str, float | None]:
    """The judge's verdict on a scored llm_judge check: ("met" | "not_met", None) or ("score", score)."""
    if check_result.is_binary_judgement:
        return (JudgeLabel.Verdict.MET if check_result.score >= 0.5 else JudgeLabel.Verdict.NOT_MET), None
    return JudgeLabel.Verdict.SCORE, check_result.score


@transaction.atomic
def judge_label_record(
    *, check_result: CheckResult, reviewer, verdict: str, score: float | None = None, comment: str = ""
) -> JudgeLabel:
    """Record (or replace) `reviewer`'s verdict on one judged check.

    `verdict` is "agree" (the judge's own verdict), "met", "not_met", or "score" with
    `score` in [0, 1] for scaled judges. One label per reviewer and check.
    """
    if not can_review(reviewer):
        raise NotAllowed("Only reviewers and admins can confirm or overrule the judge.")
    if not check_result.is_judged:
        raise DomainError(
            f"{check_result.check_id} is a {check_result.kind} check, not a judged one.", code="not_judged"
        )
    if check_result.status != CheckResult.Status.SCORED:
        raise DomainError(
            f"The judge gave no verdict on {check_result.check_id} to confirm or overrule.", code="not_judged"
        )
    judge_verdict, judge_score = judge_verdict_of(check_result)
    if verdict == "agree":
        verdict, score = judge_verdict, judge_score
    if verdict not in JudgeLabel.Verdict.values:
        raise DomainError(
            f"Unknown verdict {verdict!r}: use agree, met, not_met or score.",
            code="invalid",
            details=[{"pointer": "/verdict", "message": "use agree, met, not_met or score"}],
        )
    if verdict == JudgeLabel.Verdict.SCORE:
        if score is None or not 0 <= score <= 1:
            raise DomainError(
                "A score verdict needs a score between 0 and 1.",
                code="invalid",
                details=[{"pointer": "/score", "message": "a number between 0 and 1"}],
            )
        agrees = judge_score is not None and abs(score - judge_score) <= SCORE_AGREEMENT_TOLERANCE
    else:
        score = None
        agrees = verdict == judge_verdict
    comment = comment_text(comment, pointer="/comment", what="The comment")  # a review comment's rules
    label, _ = JudgeLabel.objects.update_or_create(
        check_result=check_result,
        reviewer=reviewer,
        defaults={"verdict": verdict, "score": score, "agrees": agrees, "comment": comment},
    )
    return label
