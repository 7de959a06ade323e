"""Writes for previews: creating preview runs, the rollout status machine (claim, heartbeat,
fail, re-queue), reaping. Executing a claimed rollout is `sandbox.worker`'s job.

A rollout's life is a status machine held in its row:

    queued → running → grading → done | error | cancelled

Every transition is a conditional UPDATE on the expected status (and, once
claimed, on the claim's attempt number), so a duplicate Celery message, a
redelivery after a crash or a re-queue by the reaper can never make two
workers write the same rollout: the loser's UPDATE matches no row and it walks
away. The worker process never runs task code itself; everything the agent
or the solution does runs inside a `sandbox.runtime` backend.

One module per thing (as `packs.services`): `previews` (parse a preview's policy and size, create,
cancel and refresh preview runs, rate limits) and `rollouts` (claim, heartbeat, fail, re-queue, reap).
Callers import from here.
"""

from sandbox.selectors import preview_run_summary
from sandbox.services.previews import (
    BACKENDS,
    HARD_TIME_LIMIT_EXTRA_S,
    JUDGE_MARGIN_EXTRA_S,
    N_NOT_A_NUMBER,
    N_OUT_OF_RANGE,
    N_RANGE,
    PERIOD_SECONDS,
    POLICIES_WITH_ARGUMENT,
    POLICY_KINDS,
    PROBE_TEXT_MAX,
    TIME_LIMIT_MARGIN_S,
    PolicyChoice,
    n_validate,
    policy_model_configured,
    policy_parse,
    preview_rate_check,
    preview_rate_parse,
    preview_run_cancel,
    preview_run_create,
    preview_run_refresh,
    preview_run_waiting_for_broker,
    rollout_time_limits,
    rollouts_in_flight_check,
    sandbox_backends_enabled,
)
from sandbox.services.rollouts import (
    claimed_rollout,
    rollout_claim,
    rollout_fail,
    rollout_heartbeat,
    rollout_requeue,
    rollouts_reap_stale,
    rollouts_resend,
)

__all__ = [
    "BACKENDS",
    "HARD_TIME_LIMIT_EXTRA_S",
    "JUDGE_MARGIN_EXTRA_S",
    "N_NOT_A_NUMBER",
    "N_OUT_OF_RANGE",
    "N_RANGE",
    "PERIOD_SECONDS",
    "POLICIES_WITH_ARGUMENT",
    "POLICY_KINDS",
    "PROBE_TEXT_MAX",
    "PolicyChoice",
    "TIME_LIMIT_MARGIN_S",
    "claimed_rollout",
    "n_validate",
    "policy_model_configured",
    "policy_parse",
    "preview_rate_check",
    "preview_rate_parse",
    "preview_run_cancel",
    "preview_run_create",
    "preview_run_refresh",
    "preview_run_summary",
    "preview_run_waiting_for_broker",
    "rollout_claim",
    "rollout_fail",
    "rollout_heartbeat",
    "rollout_requeue",
    "rollout_time_limits",
    "rollouts_in_flight_check",
    "rollouts_reap_stale",
    "rollouts_resend",
    "sandbox_backends_enabled",
]
