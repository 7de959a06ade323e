"""Judge–human agreement, shaped for the review page, the agreement page and the API.
The numbers come from grading.selectors (one query) and grading.engine.calibration.

Agreement counts distinct (check, answer) pairs, not label rows: a verdict on a card of identical answers
labels every copy (review.label_cards), and eight such verdicts were once counted as 16 labels, which
inflated kappa's sample and reached the "at least 10 labels" bar sooner. The answer is the text the judge
read, as the labelling queue shows it (review.selectors.graded_text)."""

from __future__ import annotations

import hashlib

from authoring.models import TaskVersion
from grading.engine.calibration import AgreementStats
from grading.selectors import judge_agreement_summary, judge_label_rows
from review.selectors import check_target, graded_text
from sandbox.models import Rollout


def stats_json(stats: AgreementStats) -> dict:
    return {
        "labels": stats.labels,
        "answers": stats.answers if stats.answers is not None else stats.labels,
        "agreed": stats.agreed,
        "rate": stats.rate,
        "kappa": stats.kappa,
        "reword": stats.needs_rewording(),
    }


def answer_keys(rows: list[dict]):
    """The key of the text each label row's judge read: a digest of it when it is known (a rollout's answer
    or file, or the answer a grade kept), else the label's own check result (never grouped)."""
    version_ids = {row["check_result__grade__task_version_id"] for row in rows}
    rubrics = dict(TaskVersion.objects.filter(pk__in=version_ids).values_list("pk", "spec__rubric"))
    targets = {
        row["check_result_id"]: check_target(
            rubrics.get(row["check_result__grade__task_version_id"]) or {}, row["check_result__check_id"]
        )
        for row in rows
    }
    rollout_ids = {row["check_result__grade__rollout_id"] for row in rows if row["check_result__grade__rollout_id"]}
    with_files = {
        row["check_result__grade__rollout_id"]
        for row in rows
        if row["check_result__grade__rollout_id"] and targets[row["check_result_id"]].startswith("file:")
    }
    rollouts = {
        pk: {"answer": answer} for pk, answer in Rollout.objects.filter(pk__in=rollout_ids).values_list("pk", "answer")
    }
    for pk, files in Rollout.objects.filter(pk__in=with_files).values_list("pk", "workspace_files"):
        rollouts[pk]["workspace_files"] = files

    def answer_key(row: dict):
        rollout_id = row["check_result__grade__rollout_id"]
        if rollout_id is None and not isinstance(row.get("document_answer"), str):
            return ("alone", row["check_result_id"])
        target = targets[row["check_result_id"]]
        document = {"answer": row.get("document_answer")}
        text = graded_text(target, rollouts.get(rollout_id) or {}, document)
        return (target, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())

    return answer_key


def agreement_json(*, task=None, environment=None) -> dict:
    """Agreement and, under "calibration", the judge's TPR / TNR (review.calibration) overall, per task and per
    check; "rule" is the environment's rule for a validated judge. Each check counts the labels on the judge question
    its task's latest version asks (review.calibration.current_label_rows); "left_out" says how many labels of an
    earlier question (or of a check that version no longer has) were not counted, per check and in all."""
    from review.calibration import current_label_rows, rates_json, rule_json, validation_rule

    counted, left_out = current_label_rows(judge_label_rows(task=task, environment=environment))
    summary = judge_agreement_summary(rows=counted, answer_keys=answer_keys)
    scope = environment if environment is not None else getattr(task, "environment", None)
    rule = validation_rule(scope)
    return {
        "overall": {**stats_json(summary["overall"]), "calibration": rates_json(summary["overall_rates"], rule)},
        "tasks": {
            slug: {**stats_json(stats), "calibration": rates_json(summary["task_rates"][slug], rule)}
            for slug, stats in summary["tasks"].items()
        },
        "checks": [
            {
                "task": item["task"],
                "check_id": item["check_id"],
                **stats_json(item["stats"]),
                "calibration": rates_json(item["rates"], rule),
                "left_out": left_out.get((item["task"], item["check_id"]), 0),
            }
            for item in summary["checks"]
        ],
        "left_out": {
            "labels": sum(left_out.values()),
            "checks": [
                {"task": slug, "check_id": check_id, "labels": count}
                for (slug, check_id), count in sorted(left_out.items())
            ],
        },
        "rule": rule_json(scope),
    }
