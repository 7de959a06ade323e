"""Judge–human agreement, shaped for the review page, the agreement page and the API.
The numbers come from grading.selectors (one query) and grading.engine.calibration."""

from __future__ import annotations

from grading.engine.calibration import AgreementStats
from grading.selectors import judge_agreement_summary


def stats_json(stats: AgreementStats) -> dict:
    return {
        "labels": stats.labels,
        "agreed": stats.agreed,
        "rate": stats.rate,
        "kappa": stats.kappa,
        "reword": stats.needs_rewording(),
    }


def agreement_json(*, task=None, environment=None) -> dict:
    summary = judge_agreement_summary(task=task, environment=environment)
    return {
        "overall": stats_json(summary["overall"]),
        "tasks": {slug: stats_json(stats) for slug, stats in summary["tasks"].items()},
        "checks": [
            {"task": item["task"], "check_id": item["check_id"], **stats_json(item["stats"])}
            for item in summary["checks"]
        ],
    }
