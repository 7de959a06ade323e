"""Judge calibration shaped for the pages, the API, the gates and the pack: each binary judged check's TPR / TNR
from reviewers' labels under its environment's rule (validated or not), and a preview's pass rates corrected by
them. The maths is grading.engine.calibration's; the label rows and the answers they are about are agreement's
(review.agreement), so a check's κ, rates and counts come from one read of one set of labels."""

from __future__ import annotations

from django.db.models import F

from authoring.models import Task, TaskVersion
from grading.engine import calibration
from grading.engine.calibration import JudgedCheck, JudgeRates, JudgeValidationRule, RolloutScores
from grading.models import CheckResult, DryRun, Grade
from grading.selectors import judge_agreement_summary, judge_check_rates, judge_label_rows, judge_labels_stamp
from gymwright.process_cache import Kept
from gymwright.sql import Prepared, PreparedIn
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
    """(task slug, check id) -> its judge's rates, for a task or every task of an environment, from the labels on
    the judge question of each check on its task's latest version (current_label_rows)."""
    counted, _ = current_label_rows(judge_label_rows(task=task, environment=environment))
    summary = judge_agreement_summary(rows=counted, answer_keys=answer_keys)
    return {(item["task"], item["check_id"]): item["rates"] for item in summary["checks"]}


# ---------------------------------------------------------------- which labels count: the judge question
#
# A label is a reviewer's verdict on what one judge question (a check's criterion, reference, scale and named model:
# grading.engine.calibration.judge_identities) made of one answer. A check keeps its id when its author rewrites its
# criterion; its old labels never judged the new question, and counting them would validate a judge nobody checked.
# So a check's labels count for a version only where the labelled version asked the same question.


def version_identities(version, *, rubric=None) -> dict[str, str]:
    """check id -> judge identity of each judged check of `version` (kept with _judged's facts by id and hash)."""
    return _judged(version, rubric=rubric)[2]


def _identities_of(versions: dict[int, str]) -> dict[int, dict[str, str]]:
    """version id -> its judge identities, for `versions` ({id: sha256}); those no process kept yet read in one
    query."""
    found, missing = {}, []
    for pk, sha256 in versions.items():
        kept = _JUDGED.get((pk, sha256))
        if kept is None:
            missing.append(pk)
        else:
            found[pk] = kept[2]
    if missing:
        for pk, sha256, rubric in TaskVersion.objects.filter(pk__in=missing).values_list(
            "pk", "sha256", "spec__rubric"
        ):
            found[pk] = _judged_put((pk, sha256), rubric)[2]
    return found


def _labelled_identities(rows: list[dict], versions: dict[int, str] | None = None):
    """(version id -> its judge identities, for the labelled versions and `versions` ({id: sha256}); the function
    that says which judge question a label row's verdict answered). A dry run's grade belongs to the version its
    editor sat on, but its judge was asked the rubric as it was in the editor, unsaved (grading.models.DryRun.rubric):
    its labels answer that rubric's question."""
    wanted = {
        row["check_result__grade__task_version_id"]: row["check_result__grade__task_version__sha256"] for row in rows
    }
    wanted.update(versions or {})
    identities = _identities_of(wanted)
    dry_run_grades = {
        row["check_result__grade_id"] for row in rows if row["check_result__grade__source"] == Grade.Source.DRY_RUN
    }
    dry_runs: dict[int, dict[str, str]] = {}
    if dry_run_grades:
        for grade_id, rubric in DryRun.objects.filter(grade_id__in=dry_run_grades).values_list("grade_id", "rubric"):
            dry_runs[grade_id] = calibration.judge_identities(rubric)

    def identity_of(row: dict) -> str | None:
        if row["check_result__grade__source"] == Grade.Source.DRY_RUN:
            return dry_runs.get(row["check_result__grade_id"], {}).get(row["check_result__check_id"])
        return identities.get(row["check_result__grade__task_version_id"], {}).get(row["check_result__check_id"])

    return identities, identity_of


def current_label_rows(rows: list[dict]) -> tuple[list[dict], dict[tuple[str, str], int]]:
    """(the label rows (grading.selectors.judge_label_rows) that count: those whose judge was asked the question its
    task's latest version asks of that check; (task slug, check id) -> how many were left out, labels of an earlier
    question or of a check the latest version no longer has). A few queries, whatever the number of tasks."""
    if not rows:
        return [], {}
    latest = {
        task_id: (version_id, sha256)
        for task_id, version_id, sha256 in Task.objects.filter(
            pk__in={row["check_result__grade__task_version__task_id"] for row in rows}
        ).values_list("pk", "latest_version_id", "latest_version__sha256")
    }
    identities, identity_of = _labelled_identities(
        rows, {version_id: sha256 for version_id, sha256 in latest.values() if version_id is not None}
    )
    counted, left_out = [], {}
    for row in rows:
        current_id = latest.get(row["check_result__grade__task_version__task_id"], (None, None))[0]
        current = identities.get(current_id, {}).get(row["check_result__check_id"])
        if current is not None and identity_of(row) == current:
            counted.append(row)
        else:
            key = (row["check_result__grade__task_version__task__slug"], row["check_result__check_id"])
            left_out[key] = left_out.get(key, 0) + 1
    return counted, left_out


# A task's rates per (check id, judge identity), kept per process under the stamp of its labels
# (grading.selectors.judge_labels_stamp): the gates ask for them on every view of a judged task's page, and reading
# them afresh loads every labelled answer (and, for a check on a file, the rollout's workspace files) to tell distinct
# answers apart. A label's identity is its version's (or its dry run's rubric's), which never changes: the stamp
# names them too.
_TASK_RATES = Kept(entries=2048)


def _task_identity_rates(task) -> dict[tuple[str, str], JudgeRates]:
    stamp = judge_labels_stamp(task=task)
    if not stamp[0]:  # no label (the stamp counts the rows read below): nothing to read, nor to keep per task
        return {}
    key = (task.pk, task.slug, stamp)
    rates = _TASK_RATES.get(key)
    if rates is None:
        rows = judge_label_rows(task=task)
        _, identity_of = _labelled_identities(rows)
        answer_key = answer_keys(rows)
        groups: dict[tuple[str, str], list[dict]] = {}
        for row in rows:
            identity = identity_of(row)
            if identity is not None:
                groups.setdefault((row["check_result__check_id"], identity), []).append(row)
        rates = {group: judge_check_rates(group_rows, answer_key) for group, group_rows in groups.items()}
        _TASK_RATES.put(key, rates)
    return rates


def task_rates(*, task, version=None, rubric=None) -> dict[str, JudgeRates]:
    """check id -> its judge's rates from the labels on any version of `task` that asks the judge the same question
    for that check as `version` (default: the task's latest; `rubric`: its rubric, when the caller has it); one
    aggregate query while its labels are the ones last read."""
    if version is None:
        version = task.latest_version
    by_identity = _task_identity_rates(task)
    return {
        check_id: by_identity[(check_id, identity)]
        for check_id, identity in version_identities(version, rubric=rubric).items()
        if (check_id, identity) in by_identity
    }


# compiled once per process (gymwright.sql): the gates ask on every view of a judged task's page
_task_id_slug = Prepared(lambda task_id: Task.objects.filter(pk=task_id).only("id", "slug"), task_id=int)


def task_validation(*, task_version, environment, rubric) -> dict[str, calibration.Verdict]:
    """check id -> whether labels validate the judge of each binary judged check of `rubric` (the gates' input),
    under `environment`'s rule. The task is read on its own, never loaded onto `task_version`: a caller that then
    changes the task (a submit) keeps its own copy the one shown."""
    specs = calibration.binary_judged_checks(rubric)
    if not specs:
        return {}
    found = _task_id_slug(task_id=task_version.task_id)
    if not found:
        raise Task.DoesNotExist
    task = found[0]
    rates = task_rates(task=task, version=task_version, rubric=rubric)
    rule = validation_rule(environment)
    return {spec.check_id: calibration.judge_validation(rates.get(spec.check_id, JudgeRates()), rule) for spec in specs}


def _judged(version, *, rubric=None) -> tuple[tuple, float, dict[str, str]]:
    """(the binary judged checks of `version`'s rubric, the rubric's max points, its judge identities). A version
    never changes, so a process keeps them by its id and hash: the preview page asks on every view, and reading them
    loads and decodes the version's whole document (the run's query defers it). `rubric`: the version's, when the
    caller has it."""
    key = (version.pk, version.sha256)
    kept = _JUDGED.get(key) if version.pk is not None else None
    if kept is None:
        if rubric is None:
            rubric = version.spec.get("rubric")
        kept = _judged_put(key, rubric) if version.pk is not None else _judged_facts(rubric)
    return kept


def _judged_facts(rubric) -> tuple[tuple, float, dict[str, str]]:
    rubric = rubric if isinstance(rubric, dict) else {}
    specs = tuple(calibration.binary_judged_checks(rubric))
    return (specs, calibration.rubric_max_points(rubric) if specs else 0, calibration.judge_identities(rubric))


def _judged_put(key, rubric) -> tuple[tuple, float, dict[str, str]]:
    kept = _judged_facts(rubric)
    _JUDGED.put(key, kept)
    return kept


_JUDGED = Kept(entries=2048)

# A run's graded rollouts, and their judged checks' results: compiled once per process (gymwright.sql).
_graded = Prepared(
    lambda preview_run_id: Rollout.objects.filter(
        preview_run_id=preview_run_id, status=Rollout.Status.DONE, reward__isnull=False, grade__isnull=False
    ).values_list("grade_id", "reward"),
    preview_run_id=int,
)
_graded_results = PreparedIn(
    lambda check_ids, preview_run_id: CheckResult.objects.filter(
        grade_id__in=_graded._build(preview_run_id).values("grade_id"), check_id__in=check_ids
    ).values_list("grade_id", "check_id", "status", "score"),
    "check_ids",
    item=str,
    preview_run_id=int,
)


def preview_corrected(*, preview_run: PreviewRun, rates: dict[str, JudgeRates] | None = None):
    """The preview's judged pass rates and mean reward corrected by the judges' TPR / TNR (CorrectedRewards), over
    its graded rollouts; None when its rubric has no binary judged check."""
    version = preview_run.task_version
    specs, max_points, _ = _judged(version)
    if not specs:
        return None
    if rates is None:
        rates = task_rates(task=version.task, version=version)
    graded = _graded(preview_run_id=preview_run.pk)
    scores: dict[int, dict[str, float | None]] = {grade_id: {} for grade_id, _ in graded}
    for grade_id, check_id, status, score in _graded_results(
        check_ids=[spec.check_id for spec in specs], preview_run_id=preview_run.pk
    ):
        scores[grade_id][check_id] = score if status == CheckResult.Status.SCORED else None
    rows = [RolloutScores(reward, scores[grade_id]) for grade_id, reward in graded]
    checks = [JudgedCheck(spec.check_id, spec.points, spec.linear, rates.get(spec.check_id)) for spec in specs]
    # Keyed on everything the correction reads (each rollout's reward and scores, each check's points and rates), so
    # a kept one is never stale: an overrule, a new grade or a new label makes another key.
    key = (
        tuple((row.reward, tuple(sorted(row.scores.items()))) for row in rows),
        tuple(checks),
        max_points,
    )
    corrected = _CORRECTED.get(key)
    if corrected is None:
        corrected = calibration.corrected_rewards(rows, checks, max_points=max_points)
        _CORRECTED.put(key, corrected)
    return corrected


# The bootstrap of a preview's correction (RESAMPLES draws: ~27 ms for 64 rollouts and 2 judged checks) kept per
# process: the environment dashboard corrects up to DASHBOARD_CORRECTED_TASKS previews on every view, and a preview's
# page, its API and a pack build each ask again.
_CORRECTED = Kept(entries=512)


def preview_calibration_json(*, preview_run: PreviewRun) -> dict | None:
    """The preview's corrected figures with each check's rates and validation, for the page, the API and the pack."""
    version = preview_run.task_version
    if not _judged(version)[0]:
        return None
    rates = task_rates(task=version.task, version=version)
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
        "left_out": agreement["left_out"],
        "rule": agreement["rule"],
    }
