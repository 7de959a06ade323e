"""Preview runs: a preview's policy and size parsed once, its creation (time limits, rate limits,
rollouts in flight), cancel and refresh from its rollouts' statuses."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from accounts import permissions
from authoring.models import AuditEvent, TaskVersion
from gymwright import jobs
from gymwright.egress_setting import NETWORK_ON, egress_refusal
from gymwright.errors import DomainError, NotAllowed
from sandbox.models import PreviewRun, Rollout
from sandbox.selectors import preview_run_summary

BACKENDS = ("bubblewrap", "docker")
POLICY_KINDS = ("oracle", "nop", "probe", "model", "hack")
POLICIES_WITH_ARGUMENT = ("probe", "hack")
PROBE_TEXT_MAX = 2000
# Worker-side margin on top of the task's own timeout: sandbox start-up and setup, grading
# (command checks, judge calls) and storing. The runtime enforces the task's limit itself;
# Celery's limits only catch a job that hangs past all of that. Judging ends within
# GYMWRIGHT_JUDGE_GRADE_DEADLINE_S + GYMWRIGHT_JUDGE_TIMEOUT_S; the margin keeps 240 s beyond it.
TIME_LIMIT_MARGIN_S = 600
JUDGE_MARGIN_EXTRA_S = 240
HARD_TIME_LIMIT_EXTRA_S = 60


# ---------------------------------------------------------------------------------------------
# Input


@dataclass(frozen=True)
class PolicyChoice:
    """A preview's policy, parsed once: its kind and its argument (the probe text, the hack name)."""

    kind: str
    argument: str = ""

    @property
    def spec(self) -> str:
        """The runtime's policy string: "oracle", "probe:TEXT", "hack:NAME", ..."""
        return f"{self.kind}:{self.argument}" if self.kind in POLICIES_WITH_ARGUMENT else self.kind


def policy_parse(policy: Any, *, probe_text: str | None = None) -> PolicyChoice:
    """The policy ("oracle", "nop", "model", "probe:TEXT", "hack:NAME"; `probe_text` for a bare
    "probe") as kind and argument, or DomainError saying what is wrong. The one parser of policies."""
    if not isinstance(policy, str) or not policy.strip():
        raise DomainError(
            "Choose a policy: oracle, nop, probe or model.",
            code="invalid",
            details=[{"pointer": "/policy", "message": "required"}],
        )
    kind, sep, text = policy.partition(":")
    kind = kind.strip().lower()
    if kind not in POLICY_KINDS:
        raise DomainError(
            f"Unknown policy {policy[:40]!r}: use oracle, nop, probe:TEXT, model or hack:NAME.",
            details=[{"pointer": "/policy", "message": "unknown policy"}],
        )
    if kind == "hack":
        from sandbox.runtime.hack_probes import HACKS

        if text not in HACKS:
            raise DomainError(
                f"Unknown hack {text[:40]!r}: use one of {', '.join(HACKS)}.",
                details=[{"pointer": "/policy", "message": "unknown hack"}],
            )
        return PolicyChoice(kind, text)
    if kind == "probe":
        if probe_text is not None and not sep:
            text = probe_text
        if len(text) > PROBE_TEXT_MAX:
            raise DomainError(
                f"The probe text is longer than {PROBE_TEXT_MAX} characters.",
                details=[{"pointer": "/probe_text", "message": f"at most {PROBE_TEXT_MAX} characters"}],
            )
        return PolicyChoice(kind, text)
    if sep:
        raise DomainError(
            f"The {kind} policy takes no text after ':'.",
            details=[{"pointer": "/policy", "message": "unexpected text"}],
        )
    return PolicyChoice(kind)


N_RANGE = f"a whole number from 1 to {PreviewRun.MAX_N}"
N_NOT_A_NUMBER = f"N must be {N_RANGE}."
N_OUT_OF_RANGE = f"N must be from 1 to {PreviewRun.MAX_N}."


def n_validate(n: Any) -> int:
    if isinstance(n, bool):
        n = None
    try:
        value = int(n)
        if isinstance(n, float) and not n.is_integer():
            raise ValueError
    except (TypeError, ValueError):
        raise DomainError(N_NOT_A_NUMBER, details=[{"pointer": "/n", "message": f"expected {N_RANGE}"}])
    if not 1 <= value <= PreviewRun.MAX_N:
        raise DomainError(
            f"N must be from 1 to {PreviewRun.MAX_N}, not {value}.",
            details=[{"pointer": "/n", "message": f"must be from 1 to {PreviewRun.MAX_N}"}],
        )
    return value


def _policy_check_runnable(*, policy: PolicyChoice, task_version: TaskVersion) -> None:
    if policy.kind == "oracle":
        solution = task_version.spec.get("solution") or {}
        if not (solution.get("script") or solution.get("answer")):
            raise DomainError(
                "This task version has no reference solution (script or answer), so the oracle "
                "policy has nothing to run. Add one, or preview with another policy.",
                details=[{"pointer": "/policy", "message": "no reference solution"}],
            )
    elif policy.kind == "model":
        if not policy_model_configured():
            raise DomainError(
                "No policy model is configured: add a ModelEndpoint with role 'policy' in the admin, "
                "or set OPENAI_BASE_URL and GYMWRIGHT_POLICY_MODEL.",
                code="no_policy_model",
                details=[{"pointer": "/policy", "message": "no model configured"}],
            )


def rollout_time_limits(task_version: TaskVersion) -> tuple[int, int]:
    """(soft, hard) Celery time limits in seconds for one rollout of this version."""
    limits = (task_version.spec.get("environment") or {}).get("limits") or {}
    try:
        timeout_s = float(limits.get("timeout_s") or 600)
    except (TypeError, ValueError):
        timeout_s = 600.0
    judging = settings.JUDGE_GRADE_DEADLINE_S + settings.JUDGE_TIMEOUT_S + JUDGE_MARGIN_EXTRA_S
    soft = int(math.ceil(timeout_s + max(TIME_LIMIT_MARGIN_S, judging)))
    return soft, soft + HARD_TIME_LIMIT_EXTRA_S


# ---------------------------------------------------------------------------------------------
# Preview runs


def sandbox_backends_enabled() -> list[str]:
    """The backends the preview form offers: the allowed ones (GYMWRIGHT_SANDBOX_BACKENDS), the default first."""
    allowed = settings.SANDBOX_BACKENDS_ALLOWED
    ordered = ([settings.SANDBOX_BACKEND] if settings.SANDBOX_BACKEND in allowed else []) + list(allowed)
    return [backend for backend in dict.fromkeys(ordered) if backend in BACKENDS]


def policy_model_configured(*, max_age_s: float = 0) -> bool:
    """Whether a policy model is configured; `max_age_s` > 0 answers from this process's cache."""
    from grading.endpoints import endpoint_config_for

    return endpoint_config_for("policy", max_age_s=max_age_s) is not None


@transaction.atomic
def preview_run_create(
    *, task_version: TaskVersion, user, policy: str, n: int, backend: str | None = None, probe_text: str | None = None
) -> PreviewRun:
    """A PreviewRun of `n` rollouts of `task_version` with `policy`; one Celery job per rollout
    is enqueued once the transaction commits (never for rows a rollback removed)."""
    if not permissions.can_run_previews(user):
        raise NotAllowed("Only authors, reviewers and admins can start previews.")
    choice = policy_parse(policy, probe_text=probe_text)
    n = n_validate(n)
    backend = backend or settings.SANDBOX_BACKEND
    if backend not in BACKENDS:
        raise DomainError(
            f"Unknown sandbox backend {backend!r}: use bubblewrap or docker.",
            details=[{"pointer": "/backend", "message": "unknown backend"}],
        )
    if backend not in settings.SANDBOX_BACKENDS_ALLOWED:
        allowed = ", ".join(settings.SANDBOX_BACKENDS_ALLOWED)
        raise DomainError(
            f"This server does not allow the {backend} backend (GYMWRIGHT_SANDBOX_BACKENDS: {allowed}).",
            code="backend_not_allowed",
            details=[{"pointer": "/backend", "message": f"not allowed here; allowed: {allowed}"}],
        )
    from authoring.services import environment_limits_check

    network = (task_version.spec.get("environment") or {}).get("network")
    if network in NETWORK_ON:
        reason = egress_refusal(backend)
        if reason:
            raise DomainError(
                f"This task's environment asks for network egress: {reason}.",
                code="egress_refused",
                details=[{"pointer": "/environment/network", "message": reason}],
            )

    # Versions saved before a ceiling was lowered must not run over it either.
    environment_limits_check(task_version.spec.get("environment") or {}, pointer_prefix="/environment")
    _policy_check_runnable(policy=choice, task_version=task_version)
    rollouts_in_flight_check(user=user, n=n)
    preview_rate_check(user=user)

    preview_run = PreviewRun(
        task_version=task_version,
        created_by=user,
        policy=choice.spec,
        policy_kind=choice.kind,
        policy_argument=choice.argument,
        n=n,
        backend=backend,
    )
    preview_run.full_clean()
    preview_run.save()
    now = timezone.now()
    rollouts = Rollout.objects.bulk_create(
        [Rollout(preview_run=preview_run, index=i, enqueued_at=now) for i in range(n)]
    )
    if not all(r.pk for r in rollouts):  # backends without RETURNING ids
        rollouts = list(preview_run.rollouts.order_by("index"))

    from authoring.services import audit_record

    audit_record(
        actor=user,
        verb=AuditEvent.Verb.PREVIEW,
        target=task_version.task,
        summary=f"{task_version.task.slug} v{task_version.number} with {preview_run.policy_label} × {n}",
        data={
            "preview_run": preview_run.pk,
            "version": task_version.number,
            "policy": choice.spec,
            "n": n,
            "backend": backend,
        },
    )
    soft, hard = rollout_time_limits(task_version)
    rollout_ids = [r.pk for r in rollouts]
    jobs.send_on_commit(_rollout_job(soft=soft, hard=hard), rollout_ids, on_unsent=_rollouts_wait_for_broker)
    return preview_run


def _rollout_job(*, soft: int, hard: int, countdown: float | None = None) -> jobs.Job:
    from sandbox.tasks import rollout_run

    return jobs.Job(rollout_run, {"soft_time_limit": soft, "time_limit": hard, "countdown": countdown})


def _rollouts_wait_for_broker(rollout_ids: list[int]) -> None:
    """The broker did not take these rollouts' jobs: they wait for it (the API and the page say so) and the
    broker check sends them when it answers again."""
    Rollout.objects.filter(pk__in=rollout_ids, status=Rollout.Status.QUEUED).update(enqueued_at=None)


def preview_run_waiting_for_broker(*, preview_run_id: int) -> bool:
    """Whether some of the run's queued rollouts wait for a broker that did not take their jobs."""
    return Rollout.objects.filter(
        preview_run_id=preview_run_id, status=Rollout.Status.QUEUED, enqueued_at__isnull=True
    ).exists()


PERIOD_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def preview_rate_parse(rate: str) -> tuple[int, int] | None:
    """GYMWRIGHT_PREVIEW_RATE ("60/hour", "5/m"): (starts, seconds), or None when it is empty (no limit).
    ValueError for anything else."""
    if not rate:
        return None
    count, _, period = rate.partition("/")
    if not count.strip().isdigit() or not period.strip() or period.strip()[0] not in PERIOD_SECONDS:
        raise ValueError(f"GYMWRIGHT_PREVIEW_RATE must read like 60/hour or 5/minute, not {rate!r}")
    return int(count), PERIOD_SECONDS[period.strip()[0]]


def preview_rate_check(*, user) -> None:
    """Refuse (429, code "throttled") a start of rollouts past the user's GYMWRIGHT_PREVIEW_RATE, on every path that
    starts them (the API, the form, Run gates, and a sandbox run of example answers: a version saved, an import,
    "Grade again"). The starts are counted in the database, as the audit log's "started a preview" events (a run of
    example answers graded again replaces its row, its event stays), in the transaction that holds the user's row
    (`rollouts_in_flight_check`), so web processes and hosts share one count and two starts at once count each
    other."""
    limit = preview_rate_parse(settings.PREVIEW_RATE)
    if limit is None:
        return
    starts, window_s = limit
    since = timezone.now() - timedelta(seconds=window_s)
    recent = list(
        AuditEvent.objects.filter(actor=user, verb=AuditEvent.Verb.PREVIEW, created_at__gte=since)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[:starts]
    )
    if len(recent) < starts:
        return
    # Free again once the oldest of the last `starts` leaves the window.
    retry_after = max(1, math.ceil((recent[-1] - since).total_seconds()))
    raise DomainError(
        f"You have started {starts} previews (or sandbox runs of example answers) in the last "
        f"{_period_words(window_s)}, the limit per user (GYMWRIGHT_PREVIEW_RATE: {settings.PREVIEW_RATE}); "
        f"try again in {retry_after} s.",
        code="throttled",
        http_status=429,
        extra={"retry_after_s": retry_after},
    )


def _period_words(seconds: int) -> str:
    return {1: "second", 60: "minute", 3600: "hour", 86400: "day"}[seconds]


@transaction.atomic
def rollouts_in_flight_check(*, user, n: int, example_run_id: int | None = None) -> None:
    """Refuse (429) a preview (or a sandbox run of example answers, `example_run_id`) that would take the user
    over their cap of queued and running rollouts; each example of a sandbox run in flight counts as one."""
    from django.db.models import Sum

    from grading.models import ExampleRun

    cap = settings.PREVIEW_MAX_ROLLOUTS_IN_FLIGHT
    # Lock the user's row so that two previews started at once count each other (in this transaction).
    from django.contrib.auth import get_user_model

    get_user_model().objects.select_for_update().filter(pk=user.pk).exists()
    in_flight = Rollout.objects.filter(
        preview_run__created_by=user, status__in=[Rollout.Status.QUEUED, Rollout.Status.RUNNING]
    ).count()
    in_flight += (
        ExampleRun.objects.filter(
            requested_by=user, needs_sandbox=True, status__in=[ExampleRun.Status.QUEUED, ExampleRun.Status.RUNNING]
        )
        .exclude(pk=example_run_id)
        .aggregate(total=Sum("total"))["total"]
        or 0
    )
    if in_flight + n > cap:
        raise DomainError(
            f"You have {in_flight} rollouts queued or running and this preview adds {n}; the limit is "
            f"{cap} per user (GYMWRIGHT_MAX_ROLLOUTS_IN_FLIGHT). Wait for some to finish or cancel "
            "a preview.",
            code="too_many_rollouts",
            http_status=429,
            details=[{"pointer": "/n", "message": f"at most {max(cap - in_flight, 0)} more now"}],
        )


def preview_run_cancel(*, preview_run: PreviewRun, user) -> PreviewRun:
    """Cancel: queued rollouts become cancelled now; running ones see the flag and stop."""
    if not permissions.can_run_previews(user):
        raise NotAllowed("Only authors, reviewers and admins can cancel previews.")
    now = timezone.now()
    PreviewRun.objects.filter(pk=preview_run.pk).update(cancel_requested=True)
    Rollout.objects.filter(preview_run=preview_run, status=Rollout.Status.QUEUED).update(
        status=Rollout.Status.CANCELLED, finished_at=now, error="cancelled before it started"
    )
    preview_run_refresh(preview_run_id=preview_run.pk)
    preview_run.refresh_from_db()
    return preview_run


def _status_counts(*, preview_run_id: int) -> list[tuple[str, int]]:
    """[(status, count)] of a run's rollouts: after every claim and every finish."""
    return list(
        Rollout.objects.filter(preview_run_id=preview_run_id)
        .order_by()
        .values_list("status")
        .annotate(count=Count("id"))
    )


def _claimed(*, rollout_id: int) -> list[tuple]:
    return list(Rollout.objects.filter(pk=rollout_id).values_list("attempts", "preview_run_id", "preview_run__status"))


def preview_run_refresh(*, preview_run_id: int, known_running: bool = False) -> None:
    """Derive the run's status (and, when every rollout is terminal, its summary) from its rollouts.

    Called after every claim and finish, so it costs one query while the run goes on: the
    rollouts counted by status in SQL. The run row and the graded rows are read once, when
    every rollout is terminal. `known_running`: the caller knows the run left QUEUED.
    """
    counts = dict(_status_counts(preview_run_id=preview_run_id))
    total = sum(counts.values())
    if not total:
        return
    if sum(counts.get(status, 0) for status in Rollout.TERMINAL) == total:
        preview_run = (
            PreviewRun.objects.filter(pk=preview_run_id).only("id", "status", "cancel_requested", "policy_kind").first()
        )
        if preview_run is None or preview_run.is_finished:
            return
        rows = list(
            Rollout.objects.filter(preview_run_id=preview_run_id).values(
                "status", "reward", "passed", "grade__complete", "grade__scoring_rule"
            )
        )
        status = PreviewRun.Status.CANCELLED if preview_run.cancel_requested else PreviewRun.Status.DONE
        summary = preview_run_summary(policy_kind=preview_run.policy_kind, rollouts=rows)
        PreviewRun.objects.filter(
            pk=preview_run_id, status__in=[PreviewRun.Status.QUEUED, PreviewRun.Status.RUNNING]
        ).update(status=status, summary=summary, finished_at=timezone.now())
    elif total - counts.get(Rollout.Status.QUEUED, 0) and not known_running:
        PreviewRun.objects.filter(pk=preview_run_id, status=PreviewRun.Status.QUEUED).update(
            status=PreviewRun.Status.RUNNING
        )
