"""Judge calibration shaped for the pages, the API, the gates and the pack: each binary judged check's TPR / TNR
from reviewers' labels under its environment's rule (validated or not), and a preview's pass rates corrected by
them. The maths is grading.engine.calibration's; the label rows and the answers they are about are agreement's
(review.agreement), so a check's κ, rates and counts come from one read of one set of labels."""

from __future__ import annotations

from django.db.models import F

from grading.engine import calibration
from grading.engine.calibration import JudgedCheck, JudgeRates, JudgeValidationRule, RolloutScores
from grading.models import CheckResult
from grading.selectors import judge_agreement_summary, judge_labels_stamp
from gymwright.process_cache import Kept
from review.agreement import answer_keys
from sandbox.models import PreviewRun, Rollout


def validation_rule(environment) -> JudgeValidationRule:
    """The environment's rule for a validated judge (authoring.models.Environment), the defaults without one."""
    if environment is None:
        return JudgeValidationRule()
    return JudgeValidationRule(min_labels=environment.judge_min_labels, min_rate=environment.judge_min_rate)


def rule_json(environment) -> dict:
    rule = validation_rule(environment)
    return {
        "min_labels": rule.min_labels,
        "min_per_class": rule.per_class,
        "min_rate": rule.min_rate,
        "blocking": bool(getattr(environment, "judge_unvalidated_blocks", False)),
    }


def rates_json(rates: JudgeRates, rule: JudgeValidationRule) -> dict:
    verdict = calibration.judge_validation(rates, rule)
    return {**rates.to_dict(), "validated": verdict.ok, "validation": verdict.message}


def task_rates_summary(*, task=None, environment=None) -> dict[tuple[str, str], JudgeRates]:
    """(task slug, check id) -> its judge's rates, for a task or every task of an environment."""
    summary = judge_agreement_summary(task=task, environment=environment, answer_keys=answer_keys)
    return {(item["task"], item["check_id"]): item["rates"] for item in summary["checks"]}


# A task's rates, kept per process under the stamp of its labels (grading.selectors.judge_labels_stamp): the gates
# ask for them on every view of a judged task's page, and reading them afresh loads every labelled answer (and, for
# a check on a file, the rollout's workspace files) to tell distinct answers apart.
_TASK_RATES = Kept(entries=2048)


def task_rates(*, task) -> dict[str, JudgeRates]:
    """check id -> its judge's rates from every label on any version of `task`; one aggregate query while its labels
    are the ones last read."""
    key = (task.pk, task.slug, judge_labels_stamp(task=task))
    rates = _TASK_RATES.get(key)
    if rates is None:
        summary = judge_agreement_summary(task=task, answer_keys=answer_keys)
        rates = {item["check_id"]: item["rates"] for item in summary["checks"] if item["task"] == task.slug}
        _TASK_RATES.put(key, rates)
    return dict(rates)


def task_validation(*, task_version, environment, rubric) -> dict[str, calibration.Verdict]:
    """check id -> whether labels validate the judge of each binary judged check of `rubric` (the gates' input),
    under `environment`'s rule. The task is read on its own, never loaded onto `task_version`: a caller that then
    changes the task (a submit) keeps its own copy the one shown."""
    from authoring.models import Task

    specs = calibration.binary_judged_checks(rubric)
    if not specs:
        return {}
    task = Task.objects.only("id", "slug").get(pk=task_version.task_id)
    rates = task_rates(task=task)
    rule = validation_rule(environment)
    return {spec.check_id: calibration.judge_validation(rates.get(spec.check_id, JudgeRates()), rule) for spec in specs}


def preview_corrected(*, preview_run: PreviewRun, rates: dict[str, JudgeRates] | None = None):
    """The preview's judged pass rates and mean reward corrected by the judges' TPR / TNR (CorrectedRewards), over
    its graded rollouts; None when its rubric has no binary judged check."""
    version = preview_run.task_version
    rubric = version.spec.get("rubric") or {}
    specs = calibration.binary_judged_checks(rubric)
    if not specs:
        return None
    if rates is None:
        rates = task_rates(task=version.task)
    graded = list(
        Rollout.objects.filter(
            preview_run=preview_run, status=Rollout.Status.DONE, reward__isnull=False, grade__isnull=False
        ).values_list("grade_id", "reward")
    )
    scores: dict[int, dict[str, float | None]] = {grade_id: {} for grade_id, _ in graded}
    for grade_id, check_id, status, score in CheckResult.objects.filter(
        grade_id__in=list(scores), check_id__in=[spec.check_id for spec in specs]
    ).values_list("grade_id", "check_id", "status", "score"):
        scores[grade_id][check_id] = score if status == CheckResult.Status.SCORED else None
    return calibration.corrected_rewards(
        [RolloutScores(reward, scores[grade_id]) for grade_id, reward in graded],
        [JudgedCheck(spec.check_id, spec.points, spec.linear, rates.get(spec.check_id)) for spec in specs],
        max_points=calibration.rubric_max_points(rubric),
    )


def preview_calibration_json(*, preview_run: PreviewRun) -> dict | None:
    """The preview's corrected figures with each check's rates and validation, for the page, the API and the pack."""
    version = preview_run.task_version
    if not calibration.binary_judged_checks(version.spec.get("rubric") or {}):
        return None
    rates = task_rates(task=version.task)
    corrected = preview_corrected(preview_run=preview_run, rates=rates)
    if corrected is None:
        return None
    rule = validation_rule(version.task.environment)
    document = corrected.to_dict()
    for check in document["checks"]:
        check["judge"] = rates_json(rates.get(check["check_id"], JudgeRates()), rule)
    document["rule"] = rule_json(version.task.environment)
    return document


def pack_judge_json(*, preview_run: PreviewRun) -> dict | None:
    """A task's "judge" entry in a pack's calibration.json: per binary judged check its TPR and TNR (Wilson
    intervals), label counts, whether labels validate it, and its pass rate in the preview raw and corrected; the
    corrected mean reward. None when the rubric has no binary judged check."""
    document = preview_calibration_json(preview_run=preview_run)
    if document is None:
        return None
    checks = {}
    for row in document["checks"]:
        judge = row["judge"]
        checks[row["check_id"]] = {
            "tpr": judge["tpr"],
            "tpr_ci95": judge["tpr_ci95"],
            "tnr": judge["tnr"],
            "tnr_ci95": judge["tnr_ci95"],
            "kappa": judge["kappa"],
            "labels": {
                "answers": judge["answers"],
                "met": judge["answers_met"],
                "not_met": judge["answers_not_met"],
                "contested": judge["contested"],
            },
            "validated": judge["validated"],
            "n": row["n"],
            "raw_pass_rate": row["raw_pass_rate"],
            "raw_pass_rate_ci95": row["raw_pass_rate_ci95"],
            "corrected_pass_rate": row["corrected_pass_rate"],
            "corrected_pass_rate_ci95": row["corrected_pass_rate_ci95"],
            "note": row["note"],
        }
    return {
        "checks": checks,
        "corrected_mean_reward": document["corrected_mean_reward"],
        "corrected_mean_reward_ci95": document["corrected_mean_reward_ci95"],
        "note": document["note"],
        "method": document["method"],
        "bootstrap": document["bootstrap"],
        "rule": document["rule"],
    }


#: The environment dashboard corrects the pass rates of at most this many tasks' latest model previews (each one a
#: bootstrap over its rollouts and labels); the agreement page lists every check's rates.
DASHBOARD_CORRECTED_TASKS = 20


def environment_calibration_json(*, environment, agreement: dict) -> dict:
    """The environment dashboard's judge calibration: from `agreement` (agreement_json of `environment`) each
    labelled check's TPR / TNR with their intervals and whether labels validate it, beside its pass rate in the
    latest finished model preview of its task's latest version, raw and corrected (for the first
    DASHBOARD_CORRECTED_TASKS tasks with labels)."""
    slugs = list(dict.fromkeys(row["task"] for row in agreement["checks"]))[:DASHBOARD_CORRECTED_TASKS]
    latest = {}
    for run in (
        PreviewRun.objects.filter(
            task_version__task__environment=environment,
            task_version__task__slug__in=slugs,
            task_version_id=F("task_version__task__latest_version_id"),
            policy_kind="model",
            status__in=PreviewRun.FINISHED,
        )
        .select_related("task_version__task__environment")
        .order_by("task_version__task__slug", "-created_at", "-id")
    ):
        latest.setdefault(run.task_version.task.slug, run)
    corrected = {}
    for slug, run in latest.items():
        document = preview_calibration_json(preview_run=run)
        for row in (document or {}).get("checks", []):
            corrected[(slug, row["check_id"])] = {**row, "preview": run.pk}
    checks = [{**row, "preview": corrected.get((row["task"], row["check_id"]))} for row in agreement["checks"]]
    return {
        "overall": agreement["overall"]["calibration"],
        "checks": checks,
        "validated": sum(1 for row in checks if row["calibration"]["validated"]),
        "rule": agreement["rule"],
    }
