"""`grade()`: run every check of a rubric and combine the scores (docs/formats.md, "Scoring").

This module's `grade_totals` is THE scoring rule: the app, the CLI, the gates, a pack's reward
functions, the Harbor verifier and the Inspect scorer all total a grade through it.

* Each check ends scored (a score in [0, 1]) or unscored. Unscored is only the grader's own
  failure (no judge, the judge provider or the sandbox backend down, no workspace given);
  whatever the graded work causes fails its check (`checks.Failed`, goodness 0).
* earned = Σ points × score over the scored top-level checks (penalties subtract);
  max = Σ points over ALL top-level checks with positive points, scored or not: an unscored
  check earns nothing and still counts in max;
  reward = clip(earned / max, 0, 1), or 0 when max is 0.
* gated: some `required` check (at any depth) is unscored or scored below 1; the reward is then 0.
* reward_upper: the reward if every unscored check had been met (an unscored positive check earns
  its points, an unscored penalty is not charged, an unscored required check does not gate);
  equal to reward when the grade is complete. An incomplete grade's reward is its lower bound:
  no answer earns more by leaving a check unscored.
* complete: no check, at any depth, is unscored. passed = complete and reward ≥ pass_threshold.
* Groups: see `GroupCheck` — an aggregate of the children's "goodness" (score for positive
  children, 1 − score for penalties); children count only through their group. A group is scored
  only when its unscored children cannot change its aggregate (`aggregate_bounds`), otherwise it
  is unscored ("depends on N unscored child checks").
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .checks import Failed, GradingContext, Missing, Unscored, evaluate, failed_outcome
from .judge import JudgeClient, JudgeRequest, JudgeResult
from .limits import BudgetExceeded, GradeLimits, PatternBudget, cpu_budget
from .models import (
    CheckGrade,
    Grade,
    GroupCheck,
    LlmJudgeCheck,
    PanelVerdicts,
    Rubric,
    construct_whole,
    flat_checks,
)
from .sandbox import CheckSandbox
from .text import storable_text
from .validation import parse_rubric

#: The scoring rule a grade was totalled under: 1 left unscored checks out of `max` (and out of
#: `required`); 2 is this module's. Stored beside grades so that older ones can be told apart.
SCORING_RULE = 2


def _field(check: Any, name: str, default: Any = None) -> Any:
    """A field of a check result, given as a `CheckGrade` or as its JSON document."""
    # (the exact types tested first: isinstance against the Mapping ABC costs several times more, and a grade and the
    # gates walk every check through here, ~45 calls a check)
    kind = type(check)
    if kind is dict:
        return check.get(name, default)
    if kind is CheckGrade or not isinstance(check, Mapping):
        return getattr(check, name, default)
    return check.get(name, default)


def _number(value: Any, default: float = 0.0) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _children(check: Any) -> list:
    return [child for child in (_field(check, "checks") or []) if isinstance(child, (Mapping, CheckGrade))]


def _scored(check: Any) -> bool:
    return _field(check, "status") == "scored" and _field(check, "score") is not None


def _goodness_bounds(check: Any, aggregates: Mapping[str, str] | None = None) -> tuple[float, float]:
    """A child's goodness (its score, or 1 − score for a penalty) as the (lowest, highest) it can be."""
    low, high = _score_bounds(check, aggregates)
    if _number(_field(check, "points")) < 0:
        return 1.0 - high, 1.0 - low
    return low, high


def _score_bounds(check: Any, aggregates: Mapping[str, str] | None = None) -> tuple[float, float]:
    """A check's score as the (lowest, highest) it can be: its score when scored; for an unscored group
    whose aggregate is known, the bounds its children allow; otherwise anything in [0, 1]."""
    if _scored(check):
        score = _number(_field(check, "score"))
        return score, score
    kind = (aggregates or {}).get(_field(check, "id"))
    children = _children(check)
    if kind and children:
        return _bounds(
            kind,
            [_goodness_bounds(child, aggregates) for child in children],
            [abs(_number(_field(child, "points"), 1.0)) for child in children],
        )
    return 0.0, 1.0


def _bounds(kind: str, goodness: list[tuple[float, float]], weights: list[float]) -> tuple[float, float]:
    lows = [low for low, _ in goodness]
    highs = [high for _, high in goodness]
    if kind == "all":
        return (1.0 if all(v >= 1.0 for v in lows) else 0.0), (1.0 if all(v >= 1.0 for v in highs) else 0.0)
    if kind == "any":
        return (1.0 if any(v >= 1.0 for v in lows) else 0.0), (1.0 if any(v >= 1.0 for v in highs) else 0.0)
    if kind == "min":
        return min(lows), min(highs)
    total = sum(weights)
    if total <= 0:
        return 0.0, 0.0
    return (sum(w * v for w, v in zip(weights, lows)) / total, sum(w * v for w, v in zip(weights, highs)) / total)


def aggregate_bounds(kind: str, children: list) -> tuple[float, float]:
    """The (lowest, highest) score a group with aggregate `kind` can have, whatever its unscored
    children would score: each scored child's goodness is known, an unscored one's is anywhere in
    [0, 1]. Equal bounds: the group is decided (scored) despite its unscored children."""
    return _bounds(
        kind,
        [_goodness_bounds(child) for child in children],
        [abs(_number(_field(child, "points"), 1.0)) for child in children],
    )


def aggregate(kind: str, children: list[CheckGrade]) -> float | None:
    """A group's score from its children's results; None when its unscored children could change it."""
    low, high = aggregate_bounds(kind, children)
    return low if low == high else None


def _facts(check: Any) -> tuple[Any, Any, Any, Any, Any]:
    """(status, score, points, required, checks) of a check result, read in one go."""
    if type(check) is CheckGrade:
        return check.status, check.score, check.points, check.required, check.checks
    return tuple(_field(check, name) for name in ("status", "score", "points", "required", "checks"))


def _totals(checks: list, aggregates: Mapping[str, str] | None) -> dict[str, Any]:
    complete = True
    gated = gated_upper = False
    earned = maximum = gain = loss = 0.0
    # Every result, depth first, each one's fields read once (a grade is totalled on every response a trainer
    # scores); the top-level ones, in their order, also add up the points.
    stack = [(check, True) for check in reversed(checks) if isinstance(check, (Mapping, CheckGrade))]
    while stack:
        check, top_level = stack.pop()
        status, score, points, required, children = _facts(check)
        scored = status == "scored" and score is not None
        if not scored:
            complete = False
            if required:
                gated = True
        elif required and _number(score) < 1.0:
            gated = gated_upper = True
        if children:
            stack.extend((child, False) for child in children if isinstance(child, (Mapping, CheckGrade)))
        if not top_level:
            continue
        points = _number(points)
        if points > 0:
            maximum += points
        if scored:
            earned += points * _number(score)
        else:
            low, high = _score_bounds(check, aggregates)
            if points > 0:
                gain += points * high  # met: a positive check at its highest score
            else:
                gain += points * low  # met: a penalty at its lowest (not charged when it can be)
                loss += points * high  # at worst: a penalty charged as far as it can be

    def clipped(value: float, is_gated: bool) -> float:
        if is_gated or maximum <= 0:
            return 0.0
        return min(1.0, max(0.0, value / maximum))

    reward = clipped(earned, gated)
    return {
        "reward": reward,
        "reward_upper": max(reward, clipped(earned + gain, gated_upper)),
        "lowest": min(reward, clipped(earned + loss, gated)),
        "earned": earned,
        "max": maximum,
        "gated": gated,
        "gated_upper": gated_upper,
        "complete": complete,
    }


def grade_totals(checks: list, *, pass_threshold: float, aggregates: Mapping[str, str] | None = None) -> dict[str, Any]:
    """reward, reward_upper, earned, max, passed, gated, complete of top-level check results (see the
    module docstring), given as `CheckGrade`s or as a grade document's `checks`. `aggregates` maps a
    group's id to its aggregate, so an unscored group's bounds are exact (else taken as [0, 1])."""
    summary = _totals(checks, aggregates)
    return {
        "reward": summary["reward"],
        "reward_upper": summary["reward_upper"],
        "earned": summary["earned"],
        "max": summary["max"],
        "passed": summary["complete"] and summary["reward"] >= pass_threshold,
        "gated": summary["gated"],
        "complete": summary["complete"],
    }


def reward_range(checks: list, aggregates: Mapping[str, str] | None = None) -> tuple[float, float, bool]:
    """(lowest, highest, surely_gated): every reward the grade can end with once its unscored checks are
    scored, each anywhere in [0, 1]. The highest is `reward_upper`; the lowest is at most `reward`, as
    it also charges the unscored penalties in full (the gates decide on this range: "could any score of
    the unscored checks change the verdict?"). surely_gated: a required check already failed."""
    summary = _totals(checks, aggregates)
    return summary["lowest"], summary["reward_upper"], summary["gated_upper"]


def rubric_aggregates(rubric: Rubric | Mapping) -> dict[str, str]:
    """Each group's id → its aggregate, from a parsed rubric or a rubric document."""
    found: dict[str, str] = {}
    checks = (
        rubric.checks if isinstance(rubric, Rubric) else (rubric.get("checks") if isinstance(rubric, Mapping) else None)
    )
    for check, _, _, _ in flat_checks(checks):
        if _field(check, "kind") == "group":
            found[str(_field(check, "id"))] = str(_field(check, "aggregate") or "all")
    return found


def totals(rubric: Rubric, results: list[CheckGrade]) -> dict[str, Any]:
    """`grade_totals` of a rubric's top-level results."""
    # Only an unscored check's bounds read the groups' aggregates: a grade with every check scored (most of a
    # training loop's) does not walk the rubric for them, a tenth of a 10-check grade's CPU.
    aggregates = rubric_aggregates(rubric) if not all(_scored(result) for result in results) else None
    return grade_totals(results, pass_threshold=rubric.pass_threshold, aggregates=aggregates)


def retotal(document: Mapping, *, rubric: Rubric | Mapping | None = None, pass_threshold: float | None = None) -> dict:
    """A stored grade document totalled again under this rule: the same document with reward,
    reward_upper, earned, max, passed, gated and complete replaced and each top-level check's
    `awarded` set again. Its checks' statuses, scores and points are all it needs, except for a group
    that was scored over unscored children (the old rule left them out): whether they could change it
    needs the group's aggregate, from `rubric`; without it, ValueError. `passed` compares with
    `pass_threshold` (else the rubric's); with neither, a complete grade keeps its stored `passed` (both
    rules agree on a complete grade) and an incomplete one does not pass."""
    aggregates = rubric_aggregates(rubric) if rubric is not None else {}
    if pass_threshold is None and rubric is not None:
        pass_threshold = (
            rubric.pass_threshold
            if isinstance(rubric, Rubric)
            else _number(rubric.get("pass_threshold"), Rubric.model_fields["pass_threshold"].default)
        )

    def again(check: Mapping, top_level: bool) -> Mapping:
        check = dict(check)
        children = [again(child, False) for child in check.get("checks") or [] if isinstance(child, Mapping)]
        if children:
            check["checks"] = children
            if check.get("status") == "scored" and any(not _scored(child) for child in children):
                kind = aggregates.get(check.get("id"))
                if kind is None:
                    raise ValueError(
                        f"group {check.get('id')!r} was scored over unscored child checks, "
                        "and its aggregate is not known"
                    )
                low, high = aggregate_bounds(kind, children)
                if low != high:
                    unscored = sum(1 for child in children if not _scored(child))
                    check.update(
                        status="unscored", score=None, explanation=f"depends on {unscored} unscored child check(s)"
                    )
                else:
                    check["score"] = low
        if top_level:
            check["awarded"] = (
                _number(check.get("points")) * _number(check.get("score")) + 0.0 if _scored(check) else None
            )
        return check

    checks = [again(check, True) for check in document.get("checks") or [] if isinstance(check, Mapping)]
    result = dict(document)
    result["checks"] = checks
    summary = grade_totals(
        checks, pass_threshold=1.0 if pass_threshold is None else pass_threshold, aggregates=aggregates
    )
    if pass_threshold is None:
        summary["passed"] = summary["complete"] and bool(document.get("passed"))
    result.update(summary)
    return result


class _Grader:
    def __init__(self, rubric: Rubric, ctx: GradingContext, judge: JudgeClient | None):
        self.rubric = rubric
        self.ctx = ctx
        self.judge = judge
        self.verdicts: dict[str, JudgeResult | str] = {}

    def run_judges(self) -> None:
        """Ask the judge about every llm_judge check at once (concurrently), before the walk."""
        checks = self.rubric.judge_checks()
        if not checks:
            return
        requests: list[JudgeRequest] = []
        asked: list[str] = []
        settings = self.rubric.judge
        for check in checks:
            if self.judge is None and check.target == "answer":
                continue  # unscored: no judge
            try:
                text = self.ctx.target_text(check.target)
                # A file or command output that is not plain UTF-8 text is shown to no judge: read with replacement
                # characters or spaced by NULs, it could hide what a criterion looks for ("does not reveal the
                # password") from the judge and not from a reader. It fails the check (a penalty is charged),
                # judge or none.
                odd = self.ctx.odd_text(check.target)
                if odd is not None:
                    what = check.target[5:] if check.target.startswith("file:") else f"the output of {check.target[7:]}"
                    raise Failed(f"{what!r} {odd}: not shown to the judge, so it counts against the answer")
            except (Unscored, Missing) as exc:
                if self.judge is None:
                    continue  # unscored: no judge
                if isinstance(exc, Unscored):
                    self.verdicts[check.id] = str(exc)
                else:
                    self.verdicts[check.id] = JudgeResult(0.0, str(exc))
                continue
            except Failed as exc:
                self.verdicts[check.id] = JudgeResult(failed_outcome(check, str(exc)).score, str(exc))
                continue
            if self.judge is None:
                continue
            scale = None if check.scale == "binary" else (float(check.scale.min), float(check.scale.max))
            requests.append(
                JudgeRequest(
                    criterion=check.criterion,
                    text=text,
                    reference=check.reference,
                    scale=scale,
                    samples=check.samples or settings.samples,
                    temperature=float(settings.temperature),
                    model=check.model or settings.model,
                    # a check that names its own model is judged by it alone
                    panel=tuple(settings.panel or ()) if check.model is None else (),
                )
            )
            asked.append(check.id)
        if requests:
            for check_id, result in zip(asked, self.judge.judge_many(requests)):
                self.verdicts[check_id] = result

    def check(self, check, *, top_level: bool) -> CheckGrade:
        started = time.perf_counter()
        children = None
        votes = None
        panel = None
        tests = None
        duration_ms = None
        try:
            if isinstance(check, GroupCheck):
                children = [self.check(child, top_level=False) for child in check.checks]
                low, high = aggregate_bounds(check.aggregate, children)
                unscored = [child for child in children if child.status == "unscored"]
                if low != high:
                    reasons = list(dict.fromkeys(child.explanation for child in unscored if child.explanation))
                    raise Unscored(
                        f"depends on {len(unscored)} unscored child check(s)"
                        + (f": {'; '.join(reasons[:2])}" if reasons else "")
                    )
                score = low
                explanation = f"{check.aggregate} over {len(children) - len(unscored)} scored child check(s)"
                if unscored:
                    explanation += f"; {len(unscored)} unscored could not change it"
            elif isinstance(check, LlmJudgeCheck):
                verdict = self.verdicts.get(check.id)
                if verdict is None:
                    raise Unscored("no judge model configured")
                if isinstance(verdict, str):
                    raise Unscored(verdict)
                votes = verdict.votes or None
                panel = verdict.panel
                duration_ms = verdict.duration_ms
                if verdict.failed:  # the answer itself could not be judged (too long): it fails, closed
                    failed = failed_outcome(check, verdict.explanation)
                    score, explanation = failed.score, failed.explanation
                elif verdict.score is None:
                    raise Unscored(verdict.explanation)
                else:
                    score, explanation = verdict.score, verdict.explanation
            else:
                budget = self.ctx.limits.check_cpu_s
                # A check bounded by design, on text already in memory, needs no CPU timer (which only works
                # on the main thread, and costs two system calls a check): its patterns keep their timeout.
                in_memory = check.bounded_by_design and check.target in ("answer", "trajectory")
                try:
                    with (PatternBudget if in_memory else cpu_budget)(budget):
                        outcome = evaluate(check, self.ctx)
                except BudgetExceeded as exc:
                    # The input the check reads is the graded work's: spending the budget on it fails it.
                    why = f" ({exc})" if str(exc) else ""
                    outcome = failed_outcome(
                        check,
                        f"the check used up its {budget:g} s CPU-time budget "
                        f"(GYMWRIGHT_CHECK_CPU_S){why} and was stopped: failed",
                    )
                score, explanation, tests = outcome.score, outcome.explanation, outcome.tests
            status = "scored"
        except Unscored as exc:
            status, score, explanation = "unscored", None, str(exc)
        except Exception as exc:  # noqa: BLE001 - one check's surprise must not sink the whole grade
            # evaluate() already fails a deterministic check on any error reading agent input; what is
            # left (a group's or the judge's bookkeeping) is the grader's own error.
            status, score, explanation = "unscored", None, f"error while checking: {type(exc).__name__}: {exc}"
        if duration_ms is None:
            duration_ms = int((time.perf_counter() - started) * 1000)
        awarded = None
        if status == "scored" and top_level:
            # + 0.0: an unmatched penalty is -8 × 0.0 = -0.0, which JSON would carry as "-0.0".
            awarded = check.points * score + 0.0
        return construct_whole(
            CheckGrade,
            {
                "id": check.id,
                "kind": check.kind,
                "status": status,
                "score": score,
                "points": check.points,
                "awarded": awarded,
                "required": check.required,
                "explanation": explanation,
                "votes": votes,
                "duration_ms": duration_ms,
                "checks": children,
                "tests": tests,
                "panel": None if panel is None else PanelVerdicts.model_construct(**panel),
            },
        )


def grade(
    rubric: Rubric | dict,
    *,
    answer: str,
    workspace: Path | str | None = None,
    trajectory: str | None = None,
    sandbox: CheckSandbox | None = None,
    judge: JudgeClient | None = None,
    checks_module: str | None = None,
    limits: GradeLimits | None = None,
    left_out: Mapping[str, str] | None = None,
) -> Grade:
    """Grade one answer (and its workspace/trajectory) against a rubric.

    Deterministic checks read `answer`, `trajectory` and files under `workspace`
    (paths are confined to it). `command` and `python` checks and `stdout:`
    targets run in `sandbox` — unscored "needs a sandbox" without one. `llm_judge`
    checks use `judge` — unscored "no judge model configured" without one.
    `checks_module` is the environment's checks module source (for
    `function: "checks:fn"`). `limits` bound the work on untrusted input (each check's
    CPU time, pattern searches, CSV sniffing, XLSX archives); `GradeLimits.from_env()`
    by default; a check that spends its budget fails. `left_out` maps workspace paths that
    a bounded snapshot did not copy to the reason: a check reading one fails with that
    reason. Never raises for a check's failure: what the graded work breaks fails its
    check with the reason, the grader's own failures leave it unscored with the reason.
    A dict rubric is parsed first (`SpecError` if invalid).
    """
    started = time.perf_counter()
    if not isinstance(rubric, Rubric):
        rubric = parse_rubric(rubric)
    ctx = GradingContext(
        answer=storable_text(answer),
        trajectory=None if trajectory is None else storable_text(trajectory),
        workspace=Path(workspace) if workspace is not None else None,
        sandbox=sandbox,
        checks_module=checks_module,
        limits=limits or GradeLimits.from_env(),
        left_out=dict(left_out or {}),
    )
    grader = _Grader(rubric, ctx, judge)
    grader.run_judges()
    results = [grader.check(check, top_level=True) for check in rubric.checks]
    summary = totals(rubric, results)
    return Grade.model_construct(
        schema_="gymwright.grade/v1",
        checks=results,
        # Given, not defaulted: pydantic inspects a default_factory's signature on every model_construct
        # (0.3 ms of a 1.5 ms grade, profiled in bench/bench_reward_fn.py), each field with one.
        protected_files=[],
        links_removed=[],
        duration_ms=int((time.perf_counter() - started) * 1000),
        **summary,
    )
