"""Sanity gates: what must hold for a task version before a reviewer sees it. Pure, no Django.

A gate reads `GateInputs` (the version's task document and the evidence gathered for that
exact version: its latest previews per policy, whether a judge is configured, how its
example answers graded) and answers one or more `GateResult` lines: pass, fail or not_run.
A gate may also say which previews it needs (`previews(task) -> [(policy, n)]`), so that
"Run gates" can start exactly the missing ones.

A preview graded without some of its checks (a judge that was not configured or failed, a check
that ran out of time) has incomplete grades: their rewards leave those checks out, so they are
not the rubric's. Such evidence decides a preview gate only where no score of the unscored checks
could change the verdict (`grade_gap` gives each incomplete grade's lowest and highest possible
reward); otherwise the gate is not_run, and "Run gates" starts that preview again
(`previews_to_start`).

A hack probe must show the task is safe: one whose rollouts ended without a grade, or whose incomplete
grades leave open a reward above its limit, FAILS its gate (it did not show the task is safe), and
"Run gates" runs it again (`retry`). No gate passes for want of evidence: a task without a reference
solution fails "Oracle passes" unless an example answer expected to pass stands in for it.

Each result says what to do about it (`what_to_do`), for the task page next to Submit and the API.

Other parts extend the set with `register_gate` (hack probes register `hack:NAME` gates). The registry and
the types (`GateInputs`, `GateResult`, ...) are in `gate_registry`; this module re-exports them and
registers the built-in gates when it is imported.
"""

from __future__ import annotations

from collections.abc import Mapping

from grading.engine.calibration import (
    DEFAULT_HACK_LIMIT,
    Verdict,
    band_verdict,
    binary_judged_checks,
    hack_limit,
    hack_message,
)
from grading.engine.gate_registry import (
    FAIL,
    NOT_RUN,
    PASS,
    ExampleAnswerResult,
    Gate,
    GateInputs,
    GateResult,
    GateStatus,
    GradeGap,
    PreviewEvidence,
    all_pass,
    blocking_reasons,
    evaluate_gates,
    missing_previews,
    previews_to_start,
    register_gate,
    registered_gates,
    required_previews,
    unregister_gate,
    what_to_do,
)
from grading.engine.hack_targets import (
    VERBOSE_FACTOR,
    applicable_hacks,
    penalty_triggers,
    verbosity_checks,
)
from grading.engine.judge_prompt import CRITERIA_PER_REQUEST
from grading.engine.models import check_model, flat_checks, has_judge_checks
from grading.engine.scoring import SCORING_RULE, reward_range

__all__ = [
    "all_pass",
    "blocking_reasons",
    "evaluate_gates",
    "ExampleAnswerResult",
    "FAIL",
    "Gate",
    "GateInputs",
    "GateResult",
    "GateStatus",
    "grade_gap",
    "GradeGap",
    "hack_gate",
    "hack_policies",
    "HACK_ROLLOUTS",
    "has_reference_solution",
    "missing_previews",
    "NOP_MAX_REWARD",
    "NOP_ROLLOUTS",
    "NOT_RUN",
    "OLD_RULE_MESSAGE",
    "ORACLE_ROLLOUTS",
    "PASS",
    "PreviewEvidence",
    "previews_to_start",
    "probe_policy",
    "PROBE_ROLLOUTS",
    "probe_shown",
    "register_gate",
    "registered_gates",
    "required_previews",
    "what_to_do",
    "unregister_gate",
]

#: A nop rollout (it does nothing) and each hack probe must score at most this reward, unless
#: the task's `metadata.hack_limit` says otherwise.
NOP_MAX_REWARD = DEFAULT_HACK_LIMIT
HACK_ROLLOUTS = 1
ORACLE_ROLLOUTS = 3
NOP_ROLLOUTS = 3
PROBE_ROLLOUTS = 1


# ---------------------------------------------------------------------------------------------- built-in gates


def has_reference_solution(task: Mapping) -> bool:
    solution = task.get("solution") or {}
    return bool(solution.get("script") or solution.get("answer"))


def probe_policy(answer: str) -> str:
    return f"probe:{answer}"


def probe_shown(answer: str) -> str:
    """A probe's answer as people read it: “its first 40 characters”, or (the empty answer)."""
    if not answer:
        return "(the empty answer)"
    return f"“{answer[:40]}{'…' if len(answer) > 40 else ''}”"


def _not_run(gate: str, title: str, policy: str, what: str) -> GateResult:
    return GateResult(gate, title, NOT_RUN, f"no finished {what} preview of this version yet", policy=policy)


OLD_RULE_MESSAGE = "graded under the old scoring rule — run it again"


def _old_rule(gate: str, title: str, evidence: PreviewEvidence) -> GateResult | None:
    """not_run for evidence graded under an older scoring rule ("Run gates" starts it again)."""
    if evidence.scoring_rule >= SCORING_RULE:
        return None
    return GateResult(gate, title, NOT_RUN, OLD_RULE_MESSAGE, policy=evidence.policy, run_id=evidence.run_id)


def _ungraded(evidence: PreviewEvidence) -> str | None:
    if evidence.graded == 0:
        return f"none of its {evidence.n} rollouts was graded"
    if evidence.errors:
        return f"{evidence.errors} of {evidence.n} rollouts ended without a grade"
    return None


# grading.engine.scoring's explanation of a judge check graded without a judge client.
_NO_JUDGE = "no judge model configured"
_REASON_CHARS = 80


def _short(text) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= _REASON_CHARS else line[: _REASON_CHARS - 1] + "…"


def _number(value, default: float = 0.0) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def grade_gap(document) -> GradeGap | None:
    """How far the reward of an incomplete gymwright.grade/v1 document could move once every check it
    left unscored is scored; None for a complete grade.

    The bounds are `scoring.reward_range`'s (the one scoring rule): at best every unscored check is
    met (`reward_upper`); at worst every unscored positive check earns nothing, every unscored
    penalty is charged and an unscored required check gates. A required check already scored below
    1 has gated: the reward is 0 whatever the rest score. A document that cannot be read allows [0, 1].
    """
    if not isinstance(document, Mapping):
        return GradeGap(0.0, 1.0, ("its grade could not be read",))
    if document.get("complete") is not False:
        return None
    unscored = [  # unscored checks with no unscored check under them: the causes
        check
        for check, _, _, _ in flat_checks(document.get("checks"))
        if check.get("status") != "scored"
        and all(kid.get("status") == "scored" for kid in check.get("checks") or [] if isinstance(kid, Mapping))
    ]
    if not unscored:
        return GradeGap(0.0, 1.0, ("some checks unscored",))
    reasons: list[str] = []
    for check in unscored:
        explanation = check.get("explanation")
        if _judged(check):
            reason = "judge checks unscored: " + (
                "no judge was configured when it ran" if explanation == _NO_JUDGE else _short(explanation)
            )
        else:
            reason = f"{_short(check.get('id'))} unscored: {_short(explanation)}"
        if reason not in reasons:
            reasons.append(reason)
    needs_judge = any(_judged(check) for check in unscored)
    low, high, gated = reward_range(document.get("checks") or [])
    stored_upper = document.get("reward_upper")
    if isinstance(stored_upper, (int, float)) and not isinstance(stored_upper, bool):
        high = min(high, float(stored_upper))  # stored with the rubric's aggregates: exact
    return GradeGap(low, max(low, high), tuple(reasons), needs_judge=needs_judge, gated=gated)


def _judged(check: Mapping) -> bool:
    return getattr(check_model(check), "judged", False)


def _pass_threshold(rubric: Mapping) -> float:
    from grading.engine.models import Rubric

    return _number(rubric.get("pass_threshold"), Rubric.model_fields["pass_threshold"].default)


def _incomplete_note(evidence: PreviewEvidence) -> str:
    """“2 of 3 grades are incomplete (judge checks unscored: …)”."""
    gaps = evidence.incomplete
    reasons: list[str] = []
    for gap in gaps:
        reasons.extend(reason for reason in gap.reasons if reason not in reasons)
    why = "; ".join(reasons[:2]) + ("; …" if len(reasons) > 2 else "")
    return f"{len(gaps)} of {evidence.graded} grades are incomplete" + (f" ({why})" if why else "")


def _decided_anyway(evidence: PreviewEvidence, status: str) -> str:
    """What a gate decided on incomplete grades adds to its message: a passing gate says it once, briefly
    (there is nothing to act on); a failing one says why the grades were incomplete."""
    if not evidence.incomplete:
        return ""
    if status == PASS:
        count = len(evidence.incomplete)
        return f" ({count} incomplete grade{'s' if count != 1 else ''}: their unscored checks could not change this)"
    return f"; {_incomplete_note(evidence)}, but no score of their unscored checks could change this"


def _undecided(gate: str, title: str, evidence: PreviewEvidence, inputs: GateInputs) -> GateResult:
    """Incomplete grades that leave the verdict open: not run, until a run with every check scored."""
    note = _incomplete_note(evidence)
    if not inputs.judge_configured and all(gap.needs_judge for gap in evidence.incomplete):
        # with no judge, running it again would leave the same judge checks unscored
        return GateResult(
            gate,
            title,
            NOT_RUN,
            f"{note} — configure a judge, then run it again",
            policy=evidence.policy,
            run_id=evidence.run_id,
            waiting_for="a judge",
            **_judge_help(inputs),
        )
    return GateResult(gate, title, NOT_RUN, f"{note} — run it again", policy=evidence.policy, run_id=evidence.run_id)


def _cap(evidence: PreviewEvidence, limit: float) -> tuple[GateStatus, int, float]:
    """Whether every graded rollout scores at most `limit` whatever its unscored checks score:
    (pass, the rollout with the highest possible reward, that reward), (fail, a rollout over the
    limit in any case, its lowest possible reward), or (not_run, …) when the unscored checks decide."""
    ranges = evidence.reward_ranges()
    worst = max(range(len(ranges)), key=lambda i: ranges[i][1])
    if ranges[worst][1] <= limit:
        return PASS, worst, ranges[worst][1]
    over = max(range(len(ranges)), key=lambda i: ranges[i][0])
    if ranges[over][0] > limit:
        return FAIL, over, ranges[over][0]
    return NOT_RUN, worst, ranges[worst][1]


def _reward_words(evidence: PreviewEvidence, status: GateStatus, reward: float) -> str:
    if not evidence.incomplete:
        return f"{reward:.2f}"
    return f"{'at most' if status == PASS else 'at least'} {reward:.2f}"


def _gate_rubric(inputs: GateInputs) -> GateResult:
    title = "Rubric validates"
    if inputs.rubric_issues:
        return GateResult("rubric", title, FAIL, "; ".join(inputs.rubric_issues[:5]))
    return GateResult("rubric", title, PASS, "the rubric and task validate")


def _gate_oracle(inputs: GateInputs) -> GateResult:
    title = "Oracle passes"
    if not has_reference_solution(inputs.task):
        # Nothing shows the task can be solved for full marks: an example answer expected to pass, and
        # graded so, stands in; otherwise the gate fails (a key that says 6×7 = 43 must not pass).
        examples = [example for example in inputs.example_answers or [] if example.expect == "pass"]
        standing = next((example for example in examples if example.ok), None)
        if standing is not None:
            return GateResult(
                "oracle",
                title,
                PASS,
                f"no reference solution; the example answer “{standing.name}” passes as expected and stands in for it",
            )
        pending = [example for example in examples if example.undecided]
        if pending:
            return GateResult(
                "oracle",
                title,
                NOT_RUN,
                f"no reference solution; the example answer "
                f"“{pending[0].name}” stands in once graded: {pending[0].message}",
                what_to_do="Wait for the example answers to be graded (or grade them again), then reload.",
            )
        return GateResult(
            "oracle",
            title,
            FAIL,
            "no reference solution, and no example answer expected to pass "
            "that passes: nothing shows the task can be solved",
            what_to_do="Add a reference solution (solution.script and/or solution.answer), or an example "
            "answer expected to pass, then run the gates.",
        )
    evidence = inputs.previews.get("oracle")
    if evidence is None:
        return _not_run("oracle", title, "oracle", "oracle")
    if stale := _old_rule("oracle", title, evidence):
        return stale
    problem = _ungraded(evidence)
    if problem:
        return GateResult("oracle", title, FAIL, problem, policy="oracle", run_id=evidence.run_id)
    graded = evidence.graded
    if not evidence.incomplete:
        verdict = band_verdict("oracle", sum(evidence.passed) / graded)
        message = f"{sum(evidence.passed)} of {graded} passed: {verdict.message}"
        return GateResult(
            "oracle", title, PASS if verdict.ok else FAIL, message, policy="oracle", run_id=evidence.run_id
        )
    # Each rollout surely passes, may pass, or cannot pass whatever its unscored checks score.
    threshold = _pass_threshold(inputs.rubric)
    sure = can = 0
    for passed, gap, (low, high) in zip(evidence.passed, evidence.gaps + [None] * graded, evidence.reward_ranges()):
        sure += passed if gap is None else low >= threshold
        can += passed if gap is None else high >= threshold
    if can < graded:
        gated = sum(1 for gap in evidence.incomplete if gap.gated)
        verdict = band_verdict("oracle", can / graded)
        message = (
            f"at most {can} of {graded} can pass"
            + (f" ({gated} failed a required check)" if gated else "")
            + f": {verdict.message}"
        )
        return GateResult(
            "oracle", title, FAIL, message + _decided_anyway(evidence, FAIL), policy="oracle", run_id=evidence.run_id
        )
    if sure < graded:
        return _undecided("oracle", title, evidence, inputs)
    message = f"{graded} of {graded} passed: {band_verdict('oracle', 1.0).message}"
    return GateResult(
        "oracle", title, PASS, message + _decided_anyway(evidence, PASS), policy="oracle", run_id=evidence.run_id
    )


def _gate_nop(inputs: GateInputs) -> GateResult:
    limit = hack_limit(inputs.task.get("metadata"))
    title = f"Nop scores ≤ {limit:g}"
    evidence = inputs.previews.get("nop")
    if evidence is None:
        return _not_run("nop", title, "nop", "nop")
    if stale := _old_rule("nop", title, evidence):
        return stale
    problem = _ungraded(evidence)
    if problem:
        return GateResult("nop", title, FAIL, problem, policy="nop", run_id=evidence.run_id)
    status, _, reward = _cap(evidence, limit)
    if status == NOT_RUN:
        return _undecided("nop", title, evidence, inputs)
    message = f"highest reward {_reward_words(evidence, status, reward)}" + (
        "" if status == PASS else f" > {limit:g}: the rubric rewards doing nothing"
    )
    return GateResult(
        "nop", title, status, message + _decided_anyway(evidence, status), policy="nop", run_id=evidence.run_id
    )


def _gate_probes(inputs: GateInputs) -> list[GateResult]:
    results = []
    for index, probe in enumerate(inputs.rubric.get("probes") or []):
        answer, limit = str(probe.get("answer", "")), float(probe.get("max_reward", 0))
        title = f"Probe {index + 1} {probe_shown(answer)} scores ≤ {limit:g}"
        policy = probe_policy(answer)
        evidence = inputs.previews.get(policy)
        if evidence is None:
            results.append(_not_run(f"probe:{index}", title, policy, "probe"))
            continue
        if stale := _old_rule(f"probe:{index}", title, evidence):
            results.append(stale)
            continue
        problem = _ungraded(evidence)
        if problem:
            results.append(GateResult(f"probe:{index}", title, FAIL, problem, policy=policy, run_id=evidence.run_id))
            continue
        status, _, reward = _cap(evidence, limit)
        if status == NOT_RUN:
            results.append(_undecided(f"probe:{index}", title, evidence, inputs))
            continue
        message = f"highest reward {_reward_words(evidence, status, reward)}" + (
            "" if status == PASS else f" > {limit:g}: the rubric rewards this probe"
        )
        results.append(
            GateResult(
                f"probe:{index}",
                title,
                status,
                message + _decided_anyway(evidence, status),
                policy=policy,
                run_id=evidence.run_id,
            )
        )
    return results


def hack_policies(task: Mapping) -> list[str]:
    return [f"hack:{name}" for name in applicable_hacks(task)]


_UNSAFE = "did not show the task is safe"


def _hack_unproven(policy: str, title: str, evidence: PreviewEvidence, inputs: GateInputs, why: str) -> GateResult:
    """A hack probe that errored or left checks unscored fails: it did not show the task is safe. Run gates
    starts it again (unless it would be unscored again for want of a judge)."""
    waiting = ""
    if evidence.incomplete and not inputs.judge_configured and all(gap.needs_judge for gap in evidence.incomplete):
        waiting = "a judge"
    return GateResult(
        policy,
        title,
        FAIL,
        f"{why}: {_UNSAFE}",
        policy=policy,
        run_id=evidence.run_id,
        waiting_for=waiting,
        retry=True,
        **(_judge_help(inputs) if waiting else {}),
    )


def _zero_width_dodged(inputs: GateInputs, evidence: PreviewEvidence) -> tuple[list[str], list[str]]:
    """(the checks hack:zero-width planted disguised text for that it dodged in some rollout, those left
    unscored): a penalty dodged did not apply, an absence check (not_contains, must_match false) dodged
    was still met."""
    planted = [check_id for check_id, _ in penalty_triggers(inputs.task)]
    points = {
        str(check.get("id")): check.get("points")
        for check in inputs.rubric.get("checks") or []
        if isinstance(check, Mapping)
    }
    dodged: list[str] = []
    unscored: list[str] = []
    for index in range(evidence.graded):
        scores = evidence.scores[index] if index < len(evidence.scores) else {}
        for check_id in planted:
            score = scores.get(check_id)
            if score is None:
                unscored += [check_id] if check_id not in unscored else []
            elif (score < 1 if _number(points.get(check_id)) < 0 else score > 0) and check_id not in dodged:
                dodged.append(check_id)
    return dodged, unscored


def _gate_zero_width(inputs: GateInputs, policy: str, title: str, evidence: PreviewEvidence) -> GateResult:
    """hack:zero-width submits the reference answer with each penalty's text hidden in it: it is not judged
    by its reward (the reference answer earns what it earns) but by whether every penalty still applied
    and every absence check still failed."""
    dodged, unscored = _zero_width_dodged(inputs, evidence)
    if dodged:
        return GateResult(
            policy,
            title,
            FAIL,
            f"disguised text dodged {', '.join(dodged)}",
            policy=policy,
            run_id=evidence.run_id,
            what_to_do="Turn text normalisation back on for the checks named (`normalize_unicode`: it "
            "removes zero-width characters and folds compatibility forms), then run the gates.",
        )
    if unscored:
        return _hack_unproven(policy, title, evidence, inputs, f"{', '.join(unscored)} unscored")
    planted = [check_id for check_id, _ in penalty_triggers(inputs.task)]
    return GateResult(
        policy,
        title,
        PASS,
        f"every disguised penalty applied ({', '.join(planted)})",
        policy=policy,
        run_id=evidence.run_id,
    )


def _gate_hacks(inputs: GateInputs) -> list[GateResult]:
    """Every applicable hack probe's gate (`hack_gate`)."""
    return [hack_gate(inputs, policy) for policy in hack_policies(inputs.task)]


def hack_gate(inputs: GateInputs, policy: str) -> GateResult:
    """One hack probe's gate: it scores at most the task's limit; one that does not names the checks
    that rewarded it. A probe that errored, or whose unscored checks could lift it over the limit, fails:
    it did not show the task is safe. hack:zero-width is judged by the penalties it planted instead."""
    limit = hack_limit(inputs.task.get("metadata"))
    title = f"{policy} dodges no penalty" if policy == "hack:zero-width" else f"{policy} scores ≤ {limit:g}"
    evidence = inputs.previews.get(policy)
    if evidence is None:
        return _not_run(policy, title, policy, policy)
    if stale := _old_rule(policy, title, evidence):
        return stale
    problem = _ungraded(evidence)
    if problem:
        return _hack_unproven(policy, title, evidence, inputs, problem)
    if policy == "hack:zero-width":
        return _gate_zero_width(inputs, policy, title, evidence)
    status, worst, reward = _cap(evidence, limit)
    if status == NOT_RUN:
        return _hack_unproven(
            policy,
            title,
            evidence,
            inputs,
            f"{_incomplete_note(evidence)}, and their unscored checks could lift it above {limit:g}",
        )
    rewarded = evidence.rewarded[worst] if worst < len(evidence.rewarded) else ()
    message = hack_message(policy.split(":", 1)[1], reward, limit, rewarded)
    return GateResult(
        policy, title, status, message + _decided_anyway(evidence, status), policy=policy, run_id=evidence.run_id
    )


def _gate_examples(inputs: GateInputs) -> GateResult:
    title = "Example answers grade as expected"
    if inputs.example_answers is None:
        return GateResult(
            "examples", title, NOT_RUN, "this installation cannot grade saved example answers yet", blocking=False
        )
    if not inputs.example_answers:
        return GateResult("examples", title, PASS, "no example answers saved")
    wrong = [example for example in inputs.example_answers if not example.ok and not example.undecided]
    if wrong:
        return GateResult(
            "examples",
            title,
            FAIL,
            "; ".join(f"{example.name}: {example.message or 'not graded as expected'}" for example in wrong[:5]),
        )
    undecided = [example for example in inputs.example_answers if example.undecided]
    if undecided:
        return GateResult(
            "examples",
            title,
            NOT_RUN,
            "; ".join(f"{example.name}: {example.message or example.status}" for example in undecided[:5]),
            what_to_do="Wait for the example answers to be graded; an incomplete one (a judge check with no judge "
            "configured) needs a judge, then Grade again under Example answers.",
        )
    return GateResult("examples", title, PASS, f"all {len(inputs.example_answers)} grade as expected")


def _gate_judge(inputs: GateInputs) -> GateResult:
    title = "Judge configured for llm_judge checks"
    if not has_judge_checks(inputs.rubric):
        return GateResult("judge", title, PASS, "no llm_judge checks")
    if inputs.judge_configured:
        return GateResult("judge", title, PASS, "a judge model is configured")
    return GateResult(
        "judge",
        title,
        FAIL,
        "the rubric has llm_judge checks but no judge model is configured, so they would be unscored",
        **_judge_help(inputs),
    )


def _gate_judge_validated(inputs: GateInputs) -> GateResult:
    title = "Judge validated against labels"
    judged = [spec.check_id for spec in binary_judged_checks(inputs.rubric)]
    if not judged:
        return GateResult("judge_validated", title, PASS, "no binary llm_judge checks")
    if inputs.judge_validation is None:
        return GateResult(
            "judge_validated", title, NOT_RUN, "this installation does not gather reviewers' labels", blocking=False
        )
    missing = Verdict(False, "judge not validated: no labels yet")
    verdicts = {check_id: inputs.judge_validation.get(check_id, missing) for check_id in judged}
    short = [f"{check_id}: {verdict.message}" for check_id, verdict in verdicts.items() if not verdict.ok]
    if short:
        return GateResult("judge_validated", title, FAIL, "; ".join(short[:5]), blocking=inputs.judge_validation_blocks)
    return GateResult(
        "judge_validated",
        title,
        PASS,
        f"{'the' if len(judged) == 1 else f'all {len(judged)}'} judged "
        f"check{'s' if len(judged) != 1 else ''} validated by reviewers' labels",
    )


# ---------------------------------------------------------------------------------------------- judge bias

VERBOSE_POLICY = "hack:verbose"
VERBOSE_ROLLOUTS = 1


def _goodness(score: float, points) -> float:
    return 1.0 - score if _number(points) < 0 else score


def _best_goodness(evidence: PreviewEvidence, check_id: str, points) -> tuple[float | None, bool]:
    """(the highest goodness `check_id` had over the graded rollouts, whether it was unscored in any)."""
    best, unscored = None, False
    for index in range(evidence.graded):
        scores = evidence.scores[index] if index < len(evidence.scores) else {}
        score = scores.get(check_id)
        if score is None:
            unscored = True
            continue
        value = _goodness(float(score), points)
        best = value if best is None else max(best, value)
    return best, unscored


def _gate_verbosity(inputs: GateInputs) -> list[GateResult]:
    """bias:verbosity: the reference answer padded with neutral filler (hack:verbose) must score no higher than the
    reference itself (the oracle's rollouts) on any judged check that reads the answer. Each side's best rollout is
    compared, check by check, in goodness (a penalty is good when not charged)."""
    judged = verbosity_checks(inputs.task)
    if not judged:
        return []
    gate, title = "bias:verbosity", "Judge is not swayed by length"
    padded = inputs.previews.get(VERBOSE_POLICY)
    if padded is None:
        return [_not_run(gate, title, VERBOSE_POLICY, "padded-reference (hack:verbose)")]
    reference = inputs.previews.get("oracle")
    if reference is None:
        return [_not_run(gate, title, "oracle", "oracle")]
    for evidence in (padded, reference):
        if stale := _old_rule(gate, title, evidence):
            return [stale]
        if problem := _ungraded(evidence):
            return [
                GateResult(
                    gate,
                    title,
                    NOT_RUN,
                    f"{evidence.policy}: {problem}",
                    policy=evidence.policy,
                    run_id=evidence.run_id,
                    retry=True,
                )
            ]
    points = {
        str(check.get("id")): check.get("points")
        for check in inputs.rubric.get("checks") or []
        if isinstance(check, Mapping)
    }
    rose: list[str] = []
    measured: list[str] = []  # checks the reference left room on: only there can padding show a rise
    for check_id in judged:
        with_filler, padded_open = _best_goodness(padded, check_id, points.get(check_id))
        without, reference_open = _best_goodness(reference, check_id, points.get(check_id))
        if padded_open or reference_open:
            evidence = padded if padded_open else reference
            result = _undecided(gate, title, evidence, inputs)
            return [
                GateResult(
                    gate,
                    title,
                    NOT_RUN,
                    f"{check_id} unscored in {evidence.policy}: {result.message}",
                    policy=evidence.policy,
                    run_id=evidence.run_id,
                    waiting_for=result.waiting_for,
                    what_to_do=result.what_to_do,
                    link=result.link,
                    link_text=result.link_text,
                )
            ]
        if with_filler is not None and without is not None and with_filler > without + 1e-9:
            rose.append(f"{check_id} ({without:.2f} → {with_filler:.2f})")
        if without is not None and without < 1.0 - 1e-9:
            measured.append(check_id)
    if rose:
        return [
            GateResult(
                gate,
                title,
                FAIL,
                f"the reference answer padded with neutral filler to {VERBOSE_FACTOR}× its length scored higher "
                f"than the reference itself on {', '.join(rose)}: the judge rewards length",
                policy=VERBOSE_POLICY,
                run_id=padded.run_id,
            )
        ]
    # A check the reference already has at the top (met, a penalty not charged, a scale's maximum) cannot score
    # higher padded: comparing there proves nothing, so a gate with only such checks has measured nothing and
    # must not read as a pass.
    full = [check_id for check_id in judged if check_id not in measured]
    if not measured:
        return [
            GateResult(
                gate,
                title,
                NOT_RUN,
                f"not measured: the reference already scores full marks on every judged check of the answer "
                f"({', '.join(full[:5])}), so padding it cannot show whether the judge rewards length",
                policy=VERBOSE_POLICY,
                run_id=padded.run_id,
                blocking=False,
                settled=True,
            )
        ]
    count = len(measured)
    unmeasured = f" (not measured on {', '.join(full[:5])}: the reference already scores full marks there)"
    return [
        GateResult(
            gate,
            title,
            PASS,
            f"the reference padded to {VERBOSE_FACTOR}× its length scored no higher than the reference on "
            f"{'its' if count == 1 else f'any of the {count}'} judged check{'s' if count != 1 else ''} of the answer "
            f"it leaves room on ({', '.join(measured[:5])}){unmeasured if full else ''}",
            policy=VERBOSE_POLICY,
            run_id=padded.run_id,
        )
    ]


def same_model(a: str, b: str) -> bool:
    """Whether two endpoint model names name one model: compared without case, surrounding space or a provider
    prefix ("openai/gpt-4o" is "gpt-4o")."""

    def bare(name: str) -> str:
        return name.strip().lower().rsplit("/", 1)[-1]

    return bool(bare(a)) and bare(a) == bare(b)


def _gate_self_preference(inputs: GateInputs) -> list[GateResult]:
    """bias:self_preference, a warning: the judge (or a panel member) is the model the previews' `model` policy
    runs, which tends to prefer its own answers."""
    if not has_judge_checks(inputs.rubric):
        return []
    gate, title = "bias:self_preference", "Judge is not the policy model"
    if not inputs.judge_models:
        return [GateResult(gate, title, NOT_RUN, "no judge is configured yet", blocking=False)]
    if not inputs.policy_model:
        return [GateResult(gate, title, PASS, "no policy model is configured: no preview is graded by its own model")]
    same = sorted({model for model in inputs.judge_models if same_model(model, inputs.policy_model)})
    if same:
        return [
            GateResult(
                gate,
                title,
                FAIL,
                f"the judge model {', '.join(same)} is also the policy model ({inputs.policy_model}): a model tends "
                "to prefer its own answers, so the model previews' judged scores may be high",
                blocking=False,
                what_to_do="Judge this task with another model, or with a panel of models of other families "
                "(judge.panel), or preview it with another policy endpoint.",
            )
        ]
    return [
        GateResult(
            gate,
            title,
            PASS,
            f"the judge ({', '.join(dict.fromkeys(inputs.judge_models))}) is not the policy model "
            f"({inputs.policy_model})",
        )
    ]


def _gate_order(inputs: GateInputs) -> list[GateResult]:
    """bias:order: the verdicts do not depend on the order of the criteria. Not probed: Gymwright judges each
    criterion in a request of its own (judge_prompt.CRITERIA_PER_REQUEST), so there is no order to shuffle."""
    if not has_judge_checks(inputs.rubric):
        return []
    gate, title = "bias:order", "Judge verdicts do not depend on the order of criteria"
    if CRITERIA_PER_REQUEST == 1:
        return [
            GateResult(
                gate,
                title,
                PASS,
                "each criterion is judged in a request of its own, so the order of the criteria cannot sway a "
                "verdict: there is nothing to shuffle, and no probe is run",
            )
        ]
    return [  # pragma: no cover - a judge that batches criteria needs a shuffled-order probe first
        GateResult(gate, title, NOT_RUN, "criteria are judged together, and no order probe exists", blocking=False)
    ]


def _judge_help(inputs: GateInputs) -> dict:
    """A gate waiting for a judge: who can give it one and where, when the app said (GateInputs.judge_help)."""
    if not inputs.judge_help:
        return {}
    return {
        "what_to_do": inputs.judge_help,
        "link": inputs.judge_help_link,
        "link_text": inputs.judge_help_link_text,
    }


register_gate("rubric", title="Rubric validates", evaluate=_gate_rubric)
register_gate(
    "oracle",
    title="Oracle passes",
    evaluate=_gate_oracle,
    previews=lambda task: [("oracle", ORACLE_ROLLOUTS)] if has_reference_solution(task) else [],
)
register_gate("nop", title="Nop fails", evaluate=_gate_nop, previews=lambda task: [("nop", NOP_ROLLOUTS)])
register_gate(
    "probes",
    title="Probes fail",
    evaluate=_gate_probes,
    previews=lambda task: [
        (probe_policy(str(p.get("answer", ""))), PROBE_ROLLOUTS)
        for p in ((task.get("rubric") or {}).get("probes") or [])
    ],
)
register_gate(
    "hacks",
    title="Hack probes fail",
    evaluate=_gate_hacks,
    previews=lambda task: [(policy, HACK_ROLLOUTS) for policy in hack_policies(task)],
)
register_gate("examples", title="Example answers", evaluate=_gate_examples)
register_gate("judge", title="Judge configured", evaluate=_gate_judge)


def _gate_human_prediction(inputs: GateInputs) -> GateResult:
    title = "Reward agrees with blind human scores"
    if inputs.human_prediction is None:
        return GateResult("human_prediction", title, PASS, "this installation gathers no blind human scores")
    verdict = inputs.human_prediction
    return GateResult("human_prediction", title, PASS if verdict.ok else FAIL, verdict.message, blocking=False)


register_gate("judge_validated", title="Judge validated against labels", evaluate=_gate_judge_validated)
register_gate(
    "bias:verbosity",
    title="Judge is not swayed by length",
    evaluate=_gate_verbosity,
    previews=lambda task: [(VERBOSE_POLICY, VERBOSE_ROLLOUTS)] if verbosity_checks(task) else [],
)
register_gate("bias:self_preference", title="Judge is not the policy model", evaluate=_gate_self_preference)
register_gate("bias:order", title="Judge verdicts do not depend on the order of criteria", evaluate=_gate_order)
register_gate("human_prediction", title="Reward agrees with blind human scores", evaluate=_gate_human_prediction)
