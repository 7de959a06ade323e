"""Sanity gates for one exact task version: gathers the evidence (its latest previews, the judge
configuration, the example answers) and lets grading.engine.gate_rules decide. Also "Run gates",
which starts the previews the gates still miss."""

from __future__ import annotations

from django.conf import settings

from authoring.models import TaskVersion
from grading import selectors as grading_selectors
from grading.engine import gate_rules as engine_gates
from grading.engine import validate_task
from grading.engine.calibration import check_scores, rewarded_checks
from grading.engine.models import has_judge_checks
from gymwright.errors import DomainError
from gymwright.process_cache import Kept
from gymwright.sql import Prepared, PreparedIn
from review import blind
from review.calibration import task_validation
from sandbox import services as sandbox_services
from sandbox.models import PreviewRun, Rollout

# On every task page: compiled once per process (gymwright.sql).
_done_runs = Prepared(
    lambda version_id: (
        PreviewRun.objects.filter(task_version_id=version_id, status=PreviewRun.Status.DONE)
        .order_by("-created_at", "-id")
        .values_list("id", "policy", "n")
    ),
    version_id=int,
)
# (id, preview_run_id, status, reward, passed, whether its grade is complete, its scoring rule) of the rollouts
# of some preview runs
_rollout_rows = PreparedIn(
    lambda run_ids: Rollout.objects.filter(preview_run_id__in=run_ids).values_list(
        "id", "preview_run_id", "status", "reward", "passed", "grade__complete", "grade__scoring_rule"
    ),
    "run_ids",
    item=int,
)


def preview_evidence(*, task_version: TaskVersion) -> dict[str, engine_gates.PreviewEvidence]:
    """policy -> the latest finished (done) preview run of exactly this version, with how far each of
    its incomplete grades (some check unscored) leaves the reward open."""
    latest: dict[str, tuple[int, int]] = {}  # policy -> (run id, n)
    for run_id, policy, n in _done_runs(version_id=task_version.pk):
        latest.setdefault(policy, (run_id, n))
    by_run: dict[int, list[tuple]] = {}  # run id -> [(rollout id, reward, passed, complete)] of its graded rollouts
    rules: dict[int, int] = {}  # run id -> the oldest scoring rule of its grades
    rows = _rollout_rows(run_ids=[run_id for run_id, _ in latest.values()])
    for rollout_id, run_id, status, reward, passed, complete, rule in rows:
        if status == Rollout.Status.DONE and reward is not None:
            by_run.setdefault(run_id, []).append((rollout_id, reward, passed, complete is not False))
            rules[run_id] = min(rules.get(run_id, engine_gates.SCORING_RULE), rule or engine_gates.SCORING_RULE)
    # Grade documents, read only where needed: hack probes name the checks that rewarded them, and an
    # incomplete grade's unscored checks say how far its reward could move.
    hack_runs = {run_id for policy, (run_id, _) in latest.items() if policy.startswith("hack:")}
    if "hack:verbose" in latest and "oracle" in latest:  # bias:verbosity compares the oracle's judged checks
        hack_runs.add(latest["oracle"][0])
    wanted = [
        rollout_id
        for run_id, graded in by_run.items()
        for rollout_id, _, _, complete in graded
        if run_id in hack_runs or not complete
    ]
    facts = _grade_facts(wanted)
    evidence = {}
    for policy, (run_id, n) in latest.items():
        graded = by_run.get(run_id, [])
        evidence[policy] = engine_gates.PreviewEvidence(
            policy=policy,
            run_id=run_id,
            n=n,
            rewards=[reward for _, reward, _, _ in graded],
            passed=[bool(passed) for _, _, passed, _ in graded],
            errors=n - len(graded),
            rewarded=[facts.get(rollout_id, _NO_FACTS)[1] for rollout_id, _, _, _ in graded],
            scores=[facts.get(rollout_id, _NO_FACTS)[2] for rollout_id, _, _, _ in graded],
            gaps=[None if complete else facts.get(rollout_id, _NO_FACTS)[0] for rollout_id, _, _, complete in graded],
            scoring_rule=rules.get(run_id, engine_gates.SCORING_RULE),
        )
    return evidence


# What the gates read from a finished rollout's grade document: (how far its reward could still move, the checks
# that awarded points, each top-level check's score). A finished rollout's grade never changes, so each is worked out once per process and kept
# by rollout id (the most recent GRADE_FACTS_KEPT; ids never repeat: a committed row's id is not given again, on
# PostgreSQL or SQLite): the task page reads the gates on every view, and reading and walking 64 incomplete
# grades' documents cost half of its CPU.
GRADE_FACTS_KEPT = 20_000
_grade_facts_kept = Kept(entries=GRADE_FACTS_KEPT)
_NO_FACTS = (engine_gates.grade_gap(None), (), {})
# compiled once per process and list length (gymwright.sql): a first view of a task page reads its runs' grades
_grade_documents = PreparedIn(
    lambda ids: Rollout.objects.filter(id__in=ids, grade__isnull=False).values_list("id", "grade__document"),
    "ids",
    item=int,
)  # a rollout whose grade is gone: its reward is open, nothing named


def _grade_facts(rollout_ids: list[int]) -> dict[int, tuple]:
    found = {
        rollout_id: facts for rollout_id in rollout_ids if (facts := _grade_facts_kept.get(rollout_id)) is not None
    }
    missing = [rollout_id for rollout_id in rollout_ids if rollout_id not in found]
    if missing:
        for rollout_id, document in _grade_documents(ids=missing):
            found[rollout_id] = (engine_gates.grade_gap(document), rewarded_checks(document), check_scores(document))
            _grade_facts_kept.put(rollout_id, found[rollout_id])
    return found


def _example_answer_results(task_version: TaskVersion) -> list[engine_gates.ExampleAnswerResult]:
    """The version's example answers as graded (grading.selectors): as expected or not, pending,
    incomplete (a check could not be scored) or failed to grade."""
    return [
        engine_gates.ExampleAnswerResult(
            name=verdict.name, ok=verdict.ok, message=verdict.message, status=verdict.status, expect=verdict.expect
        )
        for verdict in grading_selectors.example_verdicts(task_version=task_version)
    ]


def _rubric_issues(task_version: TaskVersion) -> tuple[str, ...]:
    """What is wrong with the version's document (the rubric gate's input). A version never changes, so a process
    keeps them by its id and hash: the gates ask on every view of the task page, and validating a document costs
    ~0.4 ms."""
    key = (task_version.pk, task_version.sha256)
    issues = _version_issues.get(key)
    if issues is None:
        issues = tuple(f"{issue.pointer or '/'}: {issue.message}" for issue in validate_task(task_version.spec))
        if task_version.pk is not None:
            _version_issues.put(key, issues)
    return issues


_version_issues = Kept(entries=2048)


def gate_inputs(*, task_version: TaskVersion) -> engine_gates.GateInputs:
    from grading.endpoints import endpoint_config_for, judge_config_for, judge_environment_of, judge_help

    spec = task_version.spec
    issues = list(_rubric_issues(task_version))
    rubric = spec.get("rubric") or {}
    environment = judge_environment_of(task_version)
    judge_config = judge_config_for(rubric, environment=environment, max_age_s=settings.ENDPOINT_CACHE_S)
    judge_configured = judge_config is not None
    policy = endpoint_config_for("policy", max_age_s=settings.ENDPOINT_CACHE_S) if has_judge_checks(rubric) else None
    # who can give the judge checks a judge, and where: worked out only when the gates need it
    helped = (
        judge_help(environment, max_age_s=settings.ENDPOINT_CACHE_S)
        if not judge_configured and has_judge_checks(rubric)
        else None
    )
    return engine_gates.GateInputs(
        task=spec,
        previews=preview_evidence(task_version=task_version),
        judge_configured=judge_configured,
        judge_help=helped.text if helped else "",
        judge_help_link=helped.link if helped else "",
        judge_help_link_text=helped.link_text if helped else "",
        rubric_issues=issues,
        example_answers=_example_answer_results(task_version),
        judge_validation=task_validation(task_version=task_version, environment=environment, rubric=rubric),
        judge_validation_blocks=bool(getattr(environment, "judge_unvalidated_blocks", False)),
        judge_models=judge_config.models_for(rubric) if judge_config is not None else (),
        policy_model=policy.model if policy is not None else "",
        human_prediction=blind.gate_verdict(task_version=task_version),
    )


def gates_evaluate(*, task_version: TaskVersion) -> list[engine_gates.GateResult]:
    return engine_gates.evaluate_gates(gate_inputs(task_version=task_version))


def gates_missing_previews(*, task_version: TaskVersion) -> list[tuple[str, int]]:
    """The previews "Run gates" would start on this version: those the gates need and it has not run,
    and those whose latest run left a gate undecided (incomplete grades); none already queued or running."""
    return _to_start(task_version)[0]


def _to_start(task_version: TaskVersion) -> tuple[list[tuple[str, int]], list[engine_gates.GateResult]]:
    inputs = gate_inputs(task_version=task_version)
    results = engine_gates.evaluate_gates(inputs)
    pending = set(
        PreviewRun.objects.filter(task_version=task_version)
        .exclude(status__in=PreviewRun.FINISHED)
        .values_list("policy", flat=True)
    )
    return engine_gates.previews_to_start(inputs, results, pending=pending), results


def gates_run(*, task_version: TaskVersion, user) -> list[PreviewRun]:
    """Start every preview the gates still miss (oracle ×3, nop ×3, each probe ×1), and again each one
    whose incomplete grades left its gate undecided, in one go. Refused when nothing can start because
    the undecided gates wait for a judge (a new run would leave the same checks unscored)."""
    to_start, results = _to_start(task_version)
    waiting = [result for result in results if not result.ok and result.waiting_for]
    if not to_start and waiting:
        raise DomainError(
            f"Nothing to start: {', '.join(result.title for result in waiting)} "
            f"{'waits' if len(waiting) == 1 else 'wait'} for {waiting[0].waiting_for}. Their previews ran with "
            "judge checks unscored and would again: "
            + (waiting[0].what_to_do or "configure a judge endpoint, then run the gates."),
            code="gates_waiting",
            http_status=409,
            details=[{"pointer": f"/gates/{result.gate}", "message": result.message} for result in waiting],
        )
    return [
        sandbox_services.preview_run_create(task_version=task_version, user=user, policy=policy, n=n)
        for policy, n in to_start
    ]
