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


# ---------------------------------------------------------------- judge calibration
#
# A judged check's verdicts against reviewers' labels, taking the human verdict as the truth. The unit is the
# distinct (check, answer) pair, as in agreement: copies of one answer labelled at once count once. Where
# reviewers disagree on one answer, the majority of their verdicts is the truth; an even split leaves the answer
# out ("contested", counted apart). Where the judge read copies of one answer differently, each distinct judge
# verdict on it is one observation (so both its right and its wrong verdict count).

#: A judge check is validated with at least this many distinct labelled answers, half of them of each class.
DEFAULT_MIN_JUDGE_LABELS = 50
#: ... and both its true-positive and its true-negative rate at least this.
DEFAULT_MIN_JUDGE_RATE = 0.85
#: Youden's J = TPR + TNR - 1 below which Rogan–Gladen is undefined: at J <= 0 the judge is no better than a coin,
#: and just above 0 the correction divides by ~0 (at J = 0.05 a 1-point error in the raw rate moves it 20 points).
MIN_YOUDEN = 0.05
#: Bootstrap resamples for the corrected rates' intervals: fixed, so the cost is bounded and the figures repeat.
RESAMPLES = 400
BOOTSTRAP_SEED = 20240531
#: A corrected interval is given only when at most this share of resamples left the correction undefined.
MAX_UNDEFINED_SHARE = 0.05


def human_truth(verdicts: Iterable[bool]) -> bool | None:
    """The majority of reviewers' met / not met verdicts on one answer; None for none or an even split."""
    verdicts = list(verdicts)
    met = sum(1 for verdict in verdicts if verdict)
    if not verdicts or met * 2 == len(verdicts):
        return None
    return met * 2 > len(verdicts)


@dataclass(frozen=True)
class JudgeRates:
    """A judge's confusion counts against human truth (met = positive), over distinct observations."""

    tp: int = 0  # judge met, human met
    fn: int = 0  # judge not met, human met
    fp: int = 0  # judge met, human not met
    tn: int = 0  # judge not met, human not met
    answers_met: int = 0  # distinct answers humans call met
    answers_not_met: int = 0  # ... and not met
    contested: int = 0  # answers whose reviewers split evenly: left out of everything above

    @property
    def answers(self) -> int:
        return self.answers_met + self.answers_not_met

    @property
    def observations(self) -> int:
        return self.tp + self.fn + self.fp + self.tn

    @property
    def tpr(self) -> float | None:
        """Judge passes among human-pass answers (sensitivity); None without any."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def tnr(self) -> float | None:
        """Judge fails among human-fail answers (specificity); None without any."""
        return self.tn / (self.tn + self.fp) if self.tn + self.fp else None

    @property
    def tpr_ci95(self) -> tuple[float, float] | None:
        return wilson_interval(self.tp, self.tp + self.fn)

    @property
    def tnr_ci95(self) -> tuple[float, float] | None:
        return wilson_interval(self.tn, self.tn + self.fp)

    @property
    def kappa(self) -> float | None:
        return cohen_kappa(
            [(True, True)] * self.tp
            + [(False, True)] * self.fn
            + [(True, False)] * self.fp
            + [(False, False)] * self.tn
        )

    @property
    def f1_met(self) -> float | None:
        """F1 of the judge's "met" verdicts (precision and recall of met); None when neither side has any."""
        return _f1(self.tp, self.fp, self.fn)

    @property
    def f1_not_met(self) -> float | None:
        return _f1(self.tn, self.fn, self.fp)

    @property
    def macro_f1(self) -> float | None:
        """HealthBench's meta-evaluation figure: the mean of the F1 of met and of not met (None without labels)."""
        scores = [score for score in (self.f1_met, self.f1_not_met) if score is not None]
        return sum(scores) / len(scores) if scores else None

    def __add__(self, other: JudgeRates) -> JudgeRates:
        return JudgeRates(*(a + b for a, b in zip(_counts(self), _counts(other), strict=True)))

    def to_dict(self) -> dict:
        return {
            "tp": self.tp,
            "fn": self.fn,
            "fp": self.fp,
            "tn": self.tn,
            "answers": self.answers,
            "answers_met": self.answers_met,
            "answers_not_met": self.answers_not_met,
            "contested": self.contested,
            "tpr": self.tpr,
            "tpr_ci95": list(self.tpr_ci95) if self.tpr_ci95 else None,
            "tnr": self.tnr,
            "tnr_ci95": list(self.tnr_ci95) if self.tnr_ci95 else None,
            "kappa": self.kappa,
            "f1_met": self.f1_met,
            "f1_not_met": self.f1_not_met,
            "macro_f1": self.macro_f1,
        }


def _counts(rates: JudgeRates) -> tuple[int, ...]:
    return (rates.tp, rates.fn, rates.fp, rates.tn, rates.answers_met, rates.answers_not_met, rates.contested)


def _f1(hits: int, false_alarms: int, misses: int) -> float | None:
    return 2 * hits / (2 * hits + false_alarms + misses) if hits + false_alarms + misses else None


def judge_rates(labels: Iterable[tuple[object, bool, object, bool]]) -> JudgeRates:
    """Confusion counts from label rows of ONE check: (answer key, judge met, reviewer, reviewer says met).

    One reviewer counts once per answer (a verdict on a card of copies labels each copy); the answer's truth is
    the majority of its reviewers (`human_truth`), an even split makes it contested. Each distinct (answer, judge
    verdict) is one observation."""
    reviewers: dict[object, dict[object, bool]] = {}
    judged: dict[object, set[bool]] = {}
    for answer, judge_met, reviewer, human_met in labels:
        reviewers.setdefault(answer, {})[reviewer] = bool(human_met)
        judged.setdefault(answer, set()).add(bool(judge_met))
    cells = {"tp": 0, "fn": 0, "fp": 0, "tn": 0}
    met = not_met = contested = 0
    for answer, verdicts in reviewers.items():
        truth = human_truth(verdicts.values())
        if truth is None:
            contested += 1
            continue
        met, not_met = (met + 1, not_met) if truth else (met, not_met + 1)
        for judge_met in judged[answer]:
            cell = ("tp" if judge_met else "fn") if truth else ("fp" if judge_met else "tn")
            cells[cell] += 1
    return JudgeRates(**cells, answers_met=met, answers_not_met=not_met, contested=contested)


@dataclass(frozen=True)
class JudgeValidationRule:
    """When a judge check is trusted: at least `min_labels` distinct labelled answers, at least half of them
    (rounded up) of EACH class, since TPR is measured on human-pass answers only and TNR on human-fail ones;
    and both rates (point estimates) at least `min_rate`."""

    min_labels: int = DEFAULT_MIN_JUDGE_LABELS
    min_rate: float = DEFAULT_MIN_JUDGE_RATE

    @property
    def per_class(self) -> int:
        return math.ceil(self.min_labels / 2)


def judge_validation(rates: JudgeRates, rule: JudgeValidationRule = JudgeValidationRule()) -> Verdict:
    """Whether a judge check is validated under `rule`, and why in words."""
    short = [
        f"{have} human-{name} answer{'s' if have != 1 else ''}"
        for name, have in (("pass", rates.answers_met), ("fail", rates.answers_not_met))
        if have < rule.per_class
    ]
    if short:
        return Verdict(
            False,
            f"judge not validated: {' and '.join(short)} labelled, needs {rule.per_class} of each "
            f"({rule.min_labels} balanced)",
        )
    low = [
        f"{name} {rate:.2f}"
        for name, rate in (("TPR", rates.tpr), ("TNR", rates.tnr))
        if rate is None or rate < rule.min_rate
    ]
    if low:
        return Verdict(False, f"judge not validated: {', '.join(low)} below {rule.min_rate:.2f}")
    return Verdict(
        True,
        f"validated: TPR {rates.tpr:.2f}, TNR {rates.tnr:.2f} on {rates.answers} answers "
        f"({rates.answers_met} pass, {rates.answers_not_met} fail)",
    )


def rogan_gladen(raw: float, tpr: float | None, tnr: float | None) -> float | None:
    """The true pass rate behind an observed one, given the judge's TPR and TNR: (p + TNR - 1) / (TPR + TNR - 1),
    clipped to [0, 1]. None when a rate is unknown or Youden's J = TPR + TNR - 1 is below MIN_YOUDEN (a judge
    no better than chance cannot be corrected for)."""
    if tpr is None or tnr is None:
        return None
    youden = tpr + tnr - 1
    if youden < MIN_YOUDEN:
        return None
    return min(1.0, max(0.0, (raw + tnr - 1) / youden))


def correction_undefined_reason(rates: JudgeRates | None) -> str:
    """Why Rogan–Gladen cannot correct a check with these rates (empty when it can)."""
    if rates is None or rates.tpr is None or rates.tnr is None:
        return "no labels of both classes yet: TPR or TNR unknown"
    if rates.tpr + rates.tnr - 1 < MIN_YOUDEN:
        return f"TPR + TNR = {rates.tpr + rates.tnr:.2f}: the judge is no better than chance, so it cannot be corrected"
    return ""


@dataclass(frozen=True)
class RolloutScores:
    """One graded rollout as the correction reads it: its reward, and each judged check's score (None: unscored)."""

    reward: float
    scores: Mapping[str, float | None]


@dataclass(frozen=True)
class JudgedCheck:
    """A judged check of the rubric: its points, whether the reward is linear in it (top level, not required;
    a required or grouped check changes the reward in other ways), and its rates (None: no labels)."""

    check_id: str
    points: float
    linear: bool
    rates: JudgeRates | None


@dataclass(frozen=True)
class CheckCorrection:
    check_id: str
    n: int  # rollouts that scored this check
    raw: float | None  # observed pass rate (score >= 0.5)
    raw_ci95: tuple[float, float] | None
    corrected: float | None
    corrected_ci95: tuple[float, float] | None
    note: str = ""  # why a figure is missing

    def to_dict(self) -> dict:
        return {
            "check_id": self.check_id,
            "n": self.n,
            "raw_pass_rate": self.raw,
            "raw_pass_rate_ci95": list(self.raw_ci95) if self.raw_ci95 else None,
            "corrected_pass_rate": self.corrected,
            "corrected_pass_rate_ci95": list(self.corrected_ci95) if self.corrected_ci95 else None,
            "note": self.note,
        }


@dataclass(frozen=True)
class CorrectedRewards:
    checks: list[CheckCorrection]
    mean_reward: float | None
    corrected_mean_reward: float | None
    corrected_mean_reward_ci95: tuple[float, float] | None
    note: str = ""
    resamples: int = RESAMPLES
    seed: int = BOOTSTRAP_SEED

    def to_dict(self) -> dict:
        return {
            "checks": [check.to_dict() for check in self.checks],
            "mean_reward": self.mean_reward,
            "corrected_mean_reward": self.corrected_mean_reward,
            "corrected_mean_reward_ci95": list(self.corrected_mean_reward_ci95)
            if self.corrected_mean_reward_ci95
            else None,
            "note": self.note,
            "method": "rogan_gladen",
            "bootstrap": {"resamples": self.resamples, "seed": self.seed},
        }


def _percentile_interval(values: list[float], resamples: int) -> tuple[float, float] | None:
    if not values or (resamples - len(values)) > MAX_UNDEFINED_SHARE * resamples:
        return None
    ordered = sorted(values)
    last = len(ordered) - 1
    return ordered[round(0.025 * last)], ordered[round(0.975 * last)]


def _draw_rate(rng, hits: int, misses: int) -> float:
    # The Bayesian bootstrap of binary labels (Rubin 1981) draws the rate from Beta(hits, misses); Jeffreys' half
    # count on each side keeps a perfect record on a few labels from reading as certainty. O(1) per check and
    # resample, standard library only (the engine ships in packs without numpy).
    return rng.betavariate(hits + 0.5, misses + 0.5)


def corrected_rewards(
    rollouts: Iterable[RolloutScores],
    judged: Iterable[JudgedCheck],
    *,
    max_points: float,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> CorrectedRewards:
    """Each judged check's observed pass rate corrected by its TPR / TNR (Rogan–Gladen), and the mean reward
    corrected by them: the mean reward plus, for each judged check, points × (corrected − raw) / max_points
    (the expected reward is linear in a top-level, non-required check's pass rate; clipped to [0, 1]).

    Intervals: a seeded bootstrap of `resamples` draws (deterministic, cost resamples × rollouts × checks).
    Each draw reweights the rollouts (Bayesian bootstrap: Dirichlet weights) and redraws each check's TPR and
    TNR from its labels, so an interval holds both the preview's and the labels' uncertainty. An interval is
    None when more than MAX_UNDEFINED_SHARE of the draws left the correction undefined (TPR + TNR near 1)."""
    import random

    rows = list(rollouts)
    checks = list(judged)
    n = len(rows)
    if n == 0:
        return CorrectedRewards(
            [CheckCorrection(c.check_id, 0, None, None, None, None, "no graded rollouts") for c in checks],
            None,
            None,
            None,
            "no graded rollouts",
        )
    mean_reward = sum(row.reward for row in rows) / n
    scored = {c.check_id: [(i, row.scores.get(c.check_id)) for i, row in enumerate(rows)] for c in checks}
    scored = {key: [(i, s) for i, s in values if s is not None] for key, values in scored.items()}
    points = {c.check_id: c.points for c in checks}
    rng = random.Random(seed)
    draws: dict[str, list[float]] = {c.check_id: [] for c in checks}
    mean_draws: list[float] = []
    correctable = [c for c in checks if not correction_undefined_reason(c.rates) and scored[c.check_id]]
    linear = all(c.linear for c in checks) and len(correctable) == len(checks) and max_points > 0
    if correctable:
        for _ in range(resamples):
            weights = [rng.expovariate(1.0) for _ in range(n)]
            total = sum(weights)
            mean_b = sum(w * row.reward for w, row in zip(weights, rows, strict=True)) / total
            shift, defined = 0.0, True
            for c in correctable:
                tpr_b = _draw_rate(rng, c.rates.tp, c.rates.fn)
                tnr_b = _draw_rate(rng, c.rates.tn, c.rates.fp)
                weight = sum(weights[i] for i, _ in scored[c.check_id])
                raw_b = sum(weights[i] for i, s in scored[c.check_id] if s >= 0.5) / weight
                corrected_b = rogan_gladen(raw_b, tpr_b, tnr_b)
                if corrected_b is None:
                    defined = False
                    continue
                draws[c.check_id].append(corrected_b)
                shift += points[c.check_id] * (corrected_b - raw_b)
            if linear and defined:
                mean_draws.append(min(1.0, max(0.0, mean_b + shift / max_points)))
    corrections = []
    shift, note = 0.0, ""
    for c in checks:
        values = scored[c.check_id]
        met = sum(1 for _, s in values if s >= 0.5)
        raw = met / len(values) if values else None
        corrected = rogan_gladen(raw, c.rates.tpr, c.rates.tnr) if raw is not None and c.rates else None
        why = "never scored in these rollouts" if raw is None else correction_undefined_reason(c.rates)
        interval = _percentile_interval(draws[c.check_id], resamples) if corrected is not None else None
        if corrected is not None and interval is None:
            why = "TPR + TNR came near 1 in too many resamples: label more answers for an interval"
        corrections.append(
            CheckCorrection(
                c.check_id,
                len(values),
                raw,
                wilson_interval(met, len(values)) if values else None,
                corrected,
                interval,
                why,
            )
        )
        if corrected is not None:
            shift += points[c.check_id] * (corrected - raw)
    nonlinear = [c.check_id for c in checks if not c.linear]
    missing = [c.check_id for c, fix in zip(checks, corrections, strict=True) if fix.corrected is None]
    if nonlinear:
        note = f"not corrected: the reward is not linear in {', '.join(nonlinear)} (required, or inside a group)"
    elif missing:
        note = f"not corrected: {', '.join(missing)} cannot be corrected yet"
    elif max_points <= 0:
        note = "not corrected: the rubric has no positive points"
    if note or not checks:
        return CorrectedRewards(corrections, mean_reward, None if checks else mean_reward, None, note, resamples, seed)
    corrected_mean = min(1.0, max(0.0, mean_reward + shift / max_points))
    return CorrectedRewards(
        corrections,
        mean_reward,
        corrected_mean,
        _percentile_interval(mean_draws, resamples),
        "",
        resamples,
        seed,
    )


@dataclass(frozen=True)
class JudgedCheckSpec:
    """A binary judged check of a rubric (a scaled judge is labelled with scores, not met / not met, and has
    no TPR / TNR): its points, and whether the reward is linear in its pass rate (top level, not required)."""

    check_id: str
    points: float
    linear: bool


def binary_judged_checks(rubric: Mapping | None) -> list[JudgedCheckSpec]:
    """The binary judged checks of a rubric document, depth first."""
    from .models import check_model, flat_checks

    found = []
    for row in flat_checks((rubric or {}).get("checks") if isinstance(rubric, Mapping) else None):
        check = row.check
        if not isinstance(check, Mapping) or not getattr(check_model(check), "judged", False):
            continue
        if check.get("scale", "binary") != "binary" or not isinstance(check.get("id"), str):
            continue
        points = check.get("points", 1)
        points = float(points) if isinstance(points, (int, float)) and not isinstance(points, bool) else 0.0
        found.append(JudgedCheckSpec(check["id"], points, row.depth == 0 and not check.get("required")))
    return found


#: What makes two versions' judged checks of one id the same judge question: a label on one counts for the other
#: only when these agree (what the judge is asked, on what scale, of which model when the check names one).
JUDGE_IDENTITY_FIELDS = ("kind", "criterion", "reference", "scale", "model")


def judge_identities(rubric: Mapping | None) -> dict[str, str]:
    """check id -> the sha256 of its judge question, for every judged check of a rubric document (any depth, any
    scale). Labels of a check count towards its judge's rates only on versions where this is the same: a criterion
    rewritten under the same id is a new question, which its old labels never judged."""
    import hashlib
    import json

    from .models import check_model, flat_checks

    found: dict[str, str] = {}
    seen: set[str] = set()
    for row in flat_checks((rubric or {}).get("checks") if isinstance(rubric, Mapping) else None):
        check = row.check
        if not isinstance(check, Mapping) or not isinstance(check.get("id"), str):
            continue
        if check["id"] in seen:  # an id used twice names no one question: its labels count nowhere
            found.pop(check["id"], None)
            continue
        seen.add(check["id"])
        if not getattr(check_model(check), "judged", False):
            continue
        question = {name: check.get(name) for name in JUDGE_IDENTITY_FIELDS}
        question["scale"] = question["scale"] if question["scale"] is not None else "binary"
        text = json.dumps(question, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        found[check["id"]] = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return found


def rubric_max_points(rubric: Mapping | None) -> float:
    """Σ positive points of a rubric's top-level checks: the reward's denominator (RUBRIC.md, "Scoring")."""
    total = 0.0
    for check in (rubric or {}).get("checks") or [] if isinstance(rubric, Mapping) else []:
        points = check.get("points") if isinstance(check, Mapping) else None
        if isinstance(points, (int, float)) and not isinstance(points, bool) and points > 0:
            total += points
    return total


# ---------------------------------------------------------------- blind human reward prediction
#
# Reviewers score a sample of rollouts without seeing their grade: pass / fail and 0-10. The rubric is trusted as
# far as its reward ranks rollouts as humans do (Spearman's rank correlation), and every rollout it passes that
# humans fail is a hack the probes missed.

#: A task's reward is flagged when its rank correlation with blind human scores is below this ...
DEFAULT_MIN_CORRELATION = 0.5
#: ... over at least this many blind-scored rollouts (fewer: too little evidence to say anything).
DEFAULT_MIN_BLIND_SCORED = 10
#: The stratified sample: equal-width bins of reward over [0, 1], this many rollouts drawn from each.
BLIND_BINS = 5
BLIND_PER_BIN = 4
BLIND_SEED = 20240607


def stratified_sample(
    items: Iterable[tuple[int, float]], *, bins: int = BLIND_BINS, per_bin: int = BLIND_PER_BIN, seed: int = BLIND_SEED
) -> list[int]:
    """Keys of a sample of (key, reward) items spread over the reward range: up to `per_bin` drawn (seeded) from
    each of `bins` equal buckets of [0, 1] (1.0 in the last), so that rare low and high rewards are scored as
    often as common ones. The sample is shuffled with the same seed: its order says nothing of the rewards."""
    import random

    if bins < 1 or per_bin < 1:
        raise ValueError(f"bins and per_bin must be at least 1 (bins={bins}, per_bin={per_bin})")
    buckets: list[list[int]] = [[] for _ in range(bins)]
    for key, reward in sorted(items):
        if reward is None:
            continue
        buckets[min(bins - 1, max(0, int(float(reward) * bins)))].append(key)
    rng = random.Random(seed)
    chosen = [key for bucket in buckets for key in (bucket if len(bucket) <= per_bin else rng.sample(bucket, per_bin))]
    rng.shuffle(chosen)
    return chosen


def average_ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(pairs: Iterable[tuple[float, float]]) -> float | None:
    """Spearman's rank correlation of (x, y) pairs: Pearson's r of their average ranks (ties handled). None when
    it is undefined: fewer than 2 pairs, or either side takes a single value."""
    pairs = list(pairs)
    if len(pairs) < 2:
        return None
    rx = average_ranks([x for x, _ in pairs])
    ry = average_ranks([y for _, y in pairs])
    mean = (len(pairs) + 1) / 2
    sxy = sum((a - mean) * (b - mean) for a, b in zip(rx, ry, strict=True))
    sxx = sum((a - mean) ** 2 for a in rx)
    syy = sum((b - mean) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def spearman_interval(
    pairs: Iterable[tuple[float, float]], *, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float] | None:
    """A 95 % percentile bootstrap interval of Spearman's rho: `resamples` (bounded, seeded) draws of the pairs
    with replacement. None when rho is undefined in more than MAX_UNDEFINED_SHARE of them (too few distinct
    values) or there are fewer than 3 pairs."""
    import random

    pairs = list(pairs)
    if len(pairs) < 3 or spearman(pairs) is None:
        return None
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        rho = spearman([pairs[rng.randrange(len(pairs))] for _ in pairs])
        if rho is not None:
            draws.append(rho)
    return _percentile_interval(draws, resamples)


@dataclass(frozen=True)
class HumanPredictionRule:
    """When a task's reward is flagged for disagreeing with blind human scores."""

    min_correlation: float = DEFAULT_MIN_CORRELATION
    min_scored: int = DEFAULT_MIN_BLIND_SCORED

    def to_dict(self) -> dict:
        return {"min_correlation": self.min_correlation, "min_scored": self.min_scored}


def human_prediction_verdict(
    rho: float | None, scored: int, rule: HumanPredictionRule = HumanPredictionRule()
) -> Verdict:
    """Whether the reward ranks rollouts as blind human scores do. Too few scored rollouts, or scores that do not
    vary, are not a flag: there is nothing measured to warn about yet (the message says so)."""
    if scored < rule.min_scored:
        return Verdict(True, f"not measured yet: {scored} of {rule.min_scored} rollouts scored blind")
    if rho is None:
        return Verdict(True, f"not measured: over {scored} rollouts the reward or the human score never varies")
    if rho < rule.min_correlation:
        return Verdict(
            False,
            f"the reward ranks rollouts unlike blind human scores: Spearman {rho:.2f} over {scored} rollouts, "
            f"below {rule.min_correlation:.2f}",
        )
    return Verdict(True, f"Spearman {rho:.2f} with blind human scores over {scored} rollouts")
