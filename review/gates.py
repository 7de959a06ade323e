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
from sandbox import services as sandbox_services
from sandbox.models import PreviewRun, Rollout


def preview_evidence(*, task_version: TaskVersion) -> dict[str, engine_gates.PreviewEvidence]:
    """policy -> the latest finished (done) preview run of exactly this version."""
    runs = (PreviewRun.objects.filter(task_version=task_version, status=PreviewRun.Status.DONE)
            .order_by("-created_at", "-id").only("id", "policy", "n"))
    latest: dict[str, PreviewRun] = {}
    for run in runs:
        latest.setdefault(run.policy, run)
    rows = (Rollout.objects.filter(preview_run__in=list(latest.values()))
            .values("id", "preview_run_id", "status", "reward", "passed"))
    by_run: dict[int, list[dict]] = {}
    for row in rows:
        by_run.setdefault(row["preview_run_id"], []).append(row)
    # Hack probes name the checks that rewarded them: read those rollouts' grades.
    hack_runs = [run.pk for policy, run in latest.items() if policy.startswith("hack:")]
    documents = dict(Rollout.objects.filter(preview_run__in=hack_runs, grade__isnull=False)
                     .values_list("id", "grade__document")) if hack_runs else {}
    evidence = {}
    for policy, run in latest.items():
        graded = [r for r in by_run.get(run.pk, []) if r["status"] == Rollout.Status.DONE and r["reward"] is not None]
        evidence[policy] = engine_gates.PreviewEvidence(
            policy=policy, run_id=run.pk, n=run.n, rewards=[r["reward"] for r in graded],
            passed=[bool(r["passed"]) for r in graded], errors=run.n - len(graded),
            rewarded=[rewarded_checks(documents.get(r["id"])) for r in graded])
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

