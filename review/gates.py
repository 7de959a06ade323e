"""Sanity gates for one exact task version: gathers the evidence (its latest previews, the judge
configuration, the example answers) and lets grading.engine.gates decide. Also "Run gates",
which starts the previews the gates still miss."""

from __future__ import annotations

from django.conf import settings

from authoring.models import TaskVersion
from grading import selectors as grading_selectors
from grading.engine import gates as engine_gates
from grading.engine import validate_task
from grading.engine.calibration import rewarded_checks
from gymwright.sql import Prepared, PreparedIn
from sandbox import services as sandbox_services
from sandbox.models import PreviewRun, Rollout


# On every task page: compiled once per process (gymwright.sql).
_done_runs = Prepared(lambda version_id: PreviewRun.objects.filter(task_version_id=version_id, status=PreviewRun.Status.DONE)
                      .order_by("-created_at", "-id").values_list("id", "policy", "n"), version_id=int)
# (id, preview_run_id, status, reward, passed) of the rollouts of some preview runs
_rollout_rows = PreparedIn(lambda run_ids: Rollout.objects.filter(preview_run_id__in=run_ids)
                           .values_list("id", "preview_run_id", "status", "reward", "passed"), "run_ids", item=int)


def preview_evidence(*, task_version: TaskVersion) -> dict[str, engine_gates.PreviewEvidence]:
    """policy -> the latest finished (done) preview run of exactly this version."""
    latest: dict[str, tuple[int, int]] = {}  # policy -> (run id, n)
    for run_id, policy, n in _done_runs(version_id=task_version.pk):
        latest.setdefault(policy, (run_id, n))
    by_run: dict[int, list[tuple]] = {}  # run id -> [(rollout id, reward, passed)] of its graded rollouts
    rows = _rollout_rows(run_ids=[run_id for run_id, _ in latest.values()])
    for rollout_id, run_id, status, reward, passed in rows:
        if status == Rollout.Status.DONE and reward is not None:
            by_run.setdefault(run_id, []).append((rollout_id, reward, passed))
    # Hack probes name the checks that rewarded them: read those rollouts' grades.
    hack_runs = [run_id for policy, (run_id, _) in latest.items() if policy.startswith("hack:")]
    documents = dict(Rollout.objects.filter(preview_run__in=hack_runs, grade__isnull=False)
                     .values_list("id", "grade__document")) if hack_runs else {}
    evidence = {}
    for policy, (run_id, n) in latest.items():
        graded = by_run.get(run_id, [])
        evidence[policy] = engine_gates.PreviewEvidence(
            policy=policy, run_id=run_id, n=n, rewards=[reward for _, reward, _ in graded],
            passed=[bool(passed) for _, _, passed in graded], errors=n - len(graded),
            rewarded=[rewarded_checks(documents.get(rollout_id)) for rollout_id, _, _ in graded])
    return evidence


def _example_answer_results(task_version: TaskVersion) -> list[engine_gates.ExampleAnswerResult]:
    """The version's example answers as graded (grading.selectors): as expected or not, pending,
    incomplete (a check could not be scored) or failed to grade."""
    return [engine_gates.ExampleAnswerResult(name=verdict.name, ok=verdict.ok, message=verdict.message,
                                             status=verdict.status)
            for verdict in grading_selectors.example_verdicts(task_version=task_version)]


def gate_inputs(*, task_version: TaskVersion) -> engine_gates.GateInputs:
    from grading.services import judge_config_for

    spec = task_version.spec
    issues = [f"{issue.pointer or '/'}: {issue.message}" for issue in validate_task(spec)]
    return engine_gates.GateInputs(
        task=spec,
        previews=preview_evidence(task_version=task_version),
        judge_configured=judge_config_for(spec.get("rubric") or {}, max_age_s=settings.ENDPOINT_CACHE_S) is not None,
        rubric_issues=issues,
        example_answers=_example_answer_results(task_version),
    )


def gates_evaluate(*, task_version: TaskVersion) -> list[engine_gates.GateResult]:
    return engine_gates.evaluate_gates(gate_inputs(task_version=task_version))


def gates_missing_previews(*, task_version: TaskVersion) -> list[tuple[str, int]]:
    """The previews the gates need that this version has not run (a queued or running one counts as run)."""
    started = set(PreviewRun.objects.filter(task_version=task_version)
                  .exclude(status=PreviewRun.Status.CANCELLED).values_list("policy", flat=True))
    return engine_gates.missing_previews(task_version.spec, started)


def gates_run(*, task_version: TaskVersion, user) -> list[PreviewRun]:
    """Start every preview the gates still miss (oracle ×3, nop ×3, each probe ×1), in one go."""
    return [sandbox_services.preview_run_create(task_version=task_version, user=user, policy=policy, n=n)
            for policy, n in gates_missing_previews(task_version=task_version)]

