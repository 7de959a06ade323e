"""`grade()`: run every check of a rubric and combine the scores (docs/formats.md, "Scoring").

* Each scored check has a score in [0, 1].
* earned = Σ points × score over the scored top-level checks (penalties subtract);
  max = Σ points over the scored top-level checks with positive points;
  reward = clip(earned / max, 0, 1), or 0 when max is 0.
* gated: some `required` check (at any depth) was scored below 1; the reward is then 0.
  An unscored required check does not gate (it cannot be decided) but makes the
  grade incomplete.
* passed = reward ≥ pass_threshold.
* Unscored checks are left out of earned and max; `complete` is false if any check,
  at any depth, is unscored.
* Groups: see `GroupCheck` — an aggregate of the children's "goodness" (score for
  positive children, 1 − score for penalties); children count only through their group.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .checks import GradingContext, Missing, Unscored, evaluate, failed_outcome
from .judge import JudgeClient, JudgeRequest, JudgeResult
from .limits import BudgetExceeded, GradeLimits, cpu_budget, pattern_budget
from .models import CheckGrade, construct_whole, Grade, GroupCheck, LlmJudgeCheck, Rubric
from .sandbox import CheckSandbox
from .text import storable_text
from .validation import parse_rubric


def _goodness(result: CheckGrade) -> float:
    return result.score if result.points > 0 else 1.0 - result.score


def aggregate(kind: str, children: list[CheckGrade]) -> float | None:
    """A group's score from its children's results; None when no child was scored."""
    scored = [child for child in children if child.status == "scored"]
    if not scored:
        return None
    goodness = [_goodness(child) for child in scored]
    if kind == "all":
        return 1.0 if all(value >= 1.0 for value in goodness) else 0.0
    if kind == "any":
        return 1.0 if any(value >= 1.0 for value in goodness) else 0.0
    if kind == "min":
        return min(goodness)
    weights = [abs(child.points) for child in scored]
    return sum(weight * value for weight, value in zip(weights, goodness)) / sum(weights)


class _Grader:
    def __init__(self, rubric: Rubric, ctx: GradingContext, judge: JudgeClient | None):
        self.rubric = rubric
        self.ctx = ctx
        self.judge = judge
        self.verdicts: dict[str, JudgeResult | str] = {}

    def run_judges(self) -> None:
        """Ask the judge about every llm_judge check at once (concurrently), before the walk."""
        checks = [check for check in self.rubric.iter_checks() if isinstance(check, LlmJudgeCheck)]
        if not checks or self.judge is None:
            return
        requests: list[JudgeRequest] = []
        asked: list[str] = []
        settings = self.rubric.judge
        for check in checks:
            try:
                text = self.ctx.target_text(check.target)
            except Unscored as exc:
                self.verdicts[check.id] = str(exc)
                continue
            except Missing as exc:
                self.verdicts[check.id] = JudgeResult(0.0, str(exc))
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
                )
            )
            asked.append(check.id)
        for check_id, result in zip(asked, self.judge.judge_many(requests)):
            self.verdicts[check_id] = result

    def check(self, check, *, top_level: bool) -> CheckGrade:
        started = time.perf_counter()
        children = None
        votes = None
        tests = None
        duration_ms = None
        try:
            if isinstance(check, GroupCheck):
                children = [self.check(child, top_level=False) for child in check.checks]
                score = aggregate(check.aggregate, children)
                unscored = sum(1 for child in children if child.status == "unscored")
                if score is None:
                    raise Unscored("every child check is unscored")
                explanation = f"{check.aggregate} over {len(children) - unscored} scored child check(s)"
                if unscored:
                    explanation += f"; {unscored} unscored left out"
            elif isinstance(check, LlmJudgeCheck):
                verdict = self.verdicts.get(check.id)
                if verdict is None:
                    raise Unscored("no judge model configured")
                if isinstance(verdict, str):
                    raise Unscored(verdict)
                votes = verdict.votes or None
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
                    with (pattern_budget if in_memory else cpu_budget)(budget):
                        outcome = evaluate(check, self.ctx)
                except BudgetExceeded as exc:
                    why = f" ({exc})" if str(exc) else ""
                    raise Unscored(f"the check used up its {budget:g} s CPU-time budget (GYMWRIGHT_CHECK_CPU_S){why}; "
                                   "it was stopped and left out of the score") from None
                score, explanation, tests = outcome.score, outcome.explanation, outcome.tests
            status = "scored"
        except Unscored as exc:
            status, score, explanation = "unscored", None, str(exc)
        except Exception as exc:  # noqa: BLE001 - one check's surprise must not sink the whole grade
            status, score, explanation = "unscored", None, f"error while checking: {type(exc).__name__}: {exc}"
        if duration_ms is None:
            duration_ms = int((time.perf_counter() - started) * 1000)
        awarded = None
        if status == "scored" and top_level:
            # + 0.0: an unmatched penalty is -8 × 0.0 = -0.0, which JSON would carry as "-0.0".
            awarded = check.points * score + 0.0
        return construct_whole(CheckGrade, {
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
        })


def totals(rubric: Rubric, results: list[CheckGrade]) -> dict[str, Any]:
    """reward, earned, max, passed, gated, complete from top-level results (see module docstring)."""
    earned = 0.0
    maximum = 0.0
    complete = True
    gated = False
    stack = list(results)
    while stack:
        result = stack.pop()
        if result.status == "unscored":
            complete = False
        elif result.required and result.score < 1.0:
            gated = True
        if result.checks:
            stack.extend(result.checks)
    for result in results:
        if result.status != "scored":
            continue
        earned += result.points * result.score
        if result.points > 0:
            maximum += result.points
    reward = 0.0 if maximum <= 0 else min(1.0, max(0.0, earned / maximum))
    if gated:
        reward = 0.0
    return {
        "reward": reward,
        "earned": earned,
        "max": maximum,
        "passed": reward >= rubric.pass_threshold,
        "gated": gated,
        "complete": complete,
    }


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
    by default. `left_out` maps workspace paths that a bounded snapshot did not copy
    to the reason: a check reading one is unscored with that reason, not failed as
    missing. Never raises for a check's failure: every problem becomes an unscored
    check with its reason. A dict rubric is parsed first
    (`SpecError` if invalid).
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
        # (0.3 ms of a 1.5 ms grade, profiled in bench/bench_reward_fn.py).
        protected_files=[],
        duration_ms=int((time.perf_counter() - started) * 1000),
        **summary,
    )
