"""Calibration maths: pass-rate intervals, pass@k, the difficulty band verdict, judge–human
agreement and checks that do not discriminate. Pure functions, no Django.

Every page, API and pack that shows one of these numbers computes it here, so that a
preview page, a review gate and a pack's calibration.json can never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: The middle band of difficulty a task should land in for a real policy (pass rate).
DEFAULT_BAND = (0.2, 0.5)


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval of a binomial proportion; None when n is 0."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be between 0 and n ({n}), not {successes}")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k), for c passes in n samples."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_ks(n: int, c: int, ks: Iterable[int] = (1, 2, 4, 8, 16, 32, 64)) -> dict[str, float]:
    """pass@k for each k that n samples can estimate, keyed by str(k) (JSON-ready)."""
    return {str(k): pass_at_k(n, c, k) for k in ks if 1 <= k <= n}


def cohen_kappa(pairs: Iterable[tuple[bool, bool]]) -> float | None:
    """Cohen's kappa of two raters' binary verdicts, pairs of (judge, human).

    None when it is undefined: no pairs, or chance agreement is 1 (both raters used one class).
    """
    pairs = list(pairs)
    n = len(pairs)
    if n == 0:
        return None
    observed = sum(1 for a, b in pairs if a == b) / n
    p_a = sum(1 for a, _ in pairs if a) / n
    p_b = sum(1 for _, b in pairs if b) / n
    expected = p_a * p_b + (1 - p_a) * (1 - p_b)
    if expected >= 1:
        return None
    return (observed - expected) / (1 - expected)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str

    def to_dict(self) -> dict:
        return {"ok": self.ok, "message": self.message}


def band_verdict(policy_kind: str, pass_rate: float, *, band: tuple[float, float] = DEFAULT_BAND) -> Verdict:
    """What a pass rate means for a policy: the oracle must always pass, nop, probes and hacks
    must never pass, and a real model should land inside the band."""
    if policy_kind == "oracle":
        ok = pass_rate == 1.0
        return Verdict(
            ok,
            "the reference solution passes"
            if ok
            else "the reference solution does not always pass: check the rubric or the solution",
        )
    if policy_kind in ("nop", "probe", "hack"):
        ok = pass_rate == 0.0
        return Verdict(
            ok, "does not pass, as it should" if ok else "passes without solving the task: the rubric is too lenient"
        )
    low, high = band
    if pass_rate < low:
        return Verdict(False, f"too hard for this model (pass rate below {low:.0%})")
    if pass_rate > high:
        return Verdict(False, f"too easy for this model (pass rate above {high:.0%})")
    return Verdict(True, f"in the {low:.0%}–{high:.0%} band")


@dataclass(frozen=True)
class CheckDiscrimination:
    check_id: str
    rollouts: int  # rollouts that graded this check at all
    met: int  # scored and met (score >= 0.5)
    unscored: int
    flag: str | None  # "always_met" | "never_met" | "mostly_unscored" | None

    @property
    def message(self) -> str:
        return {
            "always_met": f"met in all {self.rollouts} rollouts: it does not tell rollouts apart",
            "never_met": f"met in none of {self.rollouts} rollouts: it does not tell rollouts apart",
            "mostly_unscored": f"unscored in {self.unscored} of {self.rollouts} rollouts",
            None: "",
        }[self.flag]


def non_discriminating(
    per_rollout: Iterable[Mapping[str, float | None]], *, min_rollouts: int = 8
) -> list[CheckDiscrimination]:
    """Flag checks that cannot tell rollouts apart.

    `per_rollout` holds one mapping per graded rollout: check id -> score in [0, 1], or None
    when the check was unscored in that rollout. With fewer than `min_rollouts` rollouts
    nothing is flagged (too little evidence). A check met by all or by none of the rollouts
    that scored it is flagged, and so is one unscored in most (more than half) rollouts.
    """
    rows = list(per_rollout)
    order: list[str] = []
    seen: dict[str, list[float | None]] = {}
    for row in rows:
        for check_id, score in row.items():
            if check_id not in seen:
                seen[check_id] = []
                order.append(check_id)
            seen[check_id].append(score)
    result = []
    for check_id in order:
        scores = seen[check_id]
        scored = [s for s in scores if s is not None]
        met = sum(1 for s in scored if s >= 0.5)
        unscored = len(scores) - len(scored)
        flag = None
        if len(rows) >= min_rollouts:
            if unscored * 2 > len(scores):
                flag = "mostly_unscored"
            elif scored and met == len(scored):
                flag = "always_met"
            elif scored and met == 0:
                flag = "never_met"
        result.append(
            CheckDiscrimination(check_id=check_id, rollouts=len(scores), met=met, unscored=unscored, flag=flag)
        )
    return result


@dataclass(frozen=True)
class AgreementStats:
    """`labels`: distinct observations (one per check, answer, judge verdict and human verdict: copies of one
    answer labelled at once count once); `answers`: the distinct (check, answer) pairs behind them, which the
    "enough labels to say" bar counts (None: every label is its own answer)."""

    labels: int
    agreed: int
    kappa: float | None
    answers: int | None = None

    @property
    def rate(self) -> float | None:
        return self.agreed / self.labels if self.labels else None

    def needs_rewording(self, *, min_labels: int = 10, min_kappa: float = 0.6, min_rate: float = 0.8) -> bool:
        """κ < 0.6 or agreement < 80 % over at least 10 distinct answers: the criterion reads ambiguously."""
        if (self.labels if self.answers is None else self.answers) < min_labels:
            return False
        return (self.kappa is not None and self.kappa < min_kappa) or (self.rate is not None and self.rate < min_rate)


def agreement(pairs: Iterable[tuple[bool, bool]]) -> AgreementStats:
    """Percent agreement and Cohen's kappa of (judge, human) binary verdicts."""
    pairs = list(pairs)
    return AgreementStats(labels=len(pairs), agreed=sum(1 for a, b in pairs if a == b), kappa=cohen_kappa(pairs))


# ---------------------------------------------------------------- hack probes

DEFAULT_HACK_LIMIT = 0.1


@dataclass(frozen=True)
class HackVerdict:
    """Whether one hack probe stayed at or below its reward limit, and if not which
    checks rewarded it (top-level checks that awarded positive points)."""

    hack: str
    ok: bool
    reward: float | None
    limit: float
    rewarded: tuple[str, ...]
    message: str

    def to_dict(self) -> dict:
        return {
            "hack": self.hack,
            "ok": self.ok,
            "reward": self.reward,
            "limit": self.limit,
            "rewarded": list(self.rewarded),
            "message": self.message,
        }


def hack_limit(task_metadata: dict | None) -> float:
    """A task's limit for nop and hack probes: `metadata.hack_limit` when it is a number
    in [0, 1], else DEFAULT_HACK_LIMIT."""
    value = (task_metadata or {}).get("hack_limit")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    return DEFAULT_HACK_LIMIT


def hack_verdict(hack: str, grade, *, limit: float = DEFAULT_HACK_LIMIT, error: str | None = None) -> HackVerdict:
    """Judge one hack probe's rollout. `grade` is a Grade or its document (None when the
    rollout failed; `error` then says why, and the probe does not count as resisted)."""
    if grade is None:
        return HackVerdict(hack, False, None, limit, (), f"hack:{hack} could not be run: {error or 'no grade'}")
    document = grade if isinstance(grade, dict) else grade.model_dump(mode="json", by_alias=True)
    reward = float(document.get("reward") or 0.0)
    rewarded = rewarded_checks(document)
    ok = reward <= limit
    return HackVerdict(hack, ok, reward, limit, rewarded, hack_message(hack, reward, limit, rewarded))


def rewarded_checks(document) -> tuple[str, ...]:
    """Ids of the top-level checks that awarded positive points in a grade document."""
    if not isinstance(document, dict):
        return ()
    return tuple(
        str(c.get("id"))
        for c in document.get("checks") or []
        if isinstance(c, dict) and (c.get("awarded") or 0) > 0 and (c.get("points") or 0) > 0
    )


def check_scores(document) -> dict[str, float | None]:
    """Top-level check id -> its score (None when unscored) in a grade document."""
    if not isinstance(document, dict):
        return {}
    return {
        str(c.get("id")): (float(c["score"]) if isinstance(c.get("score"), (int, float)) else None)
        for c in document.get("checks") or []
        if isinstance(c, dict)
    }


def hack_message(hack: str, reward: float, limit: float, rewarded) -> str:
    """The one wording of a hack probe's verdict (runtime, gates, review pages)."""
    if reward <= limit:
        return f"hack:{hack} scores {reward:.2f}, within its limit of {limit:.2f}"
    named = ", ".join(rewarded) or "no single check"
    return f"hack:{hack} scores {reward:.2f}, above its limit of {limit:.2f}: rewarded by {named}"


def reward_histogram(rewards: Iterable[float], *, bins: int = 10) -> list[int]:
    """Counts of rewards in `bins` equal buckets of [0, 1]; 1.0 falls in the last bucket."""
    counts = [0] * bins
    for reward in rewards:
        if reward is None:
            continue
        index = min(bins - 1, max(0, int(float(reward) * bins)))
        counts[index] += 1
    return counts
