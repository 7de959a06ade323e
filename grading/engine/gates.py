"""Sanity gates: what must hold for a task version before a reviewer sees it. Pure, no Django.

A gate reads `GateInputs` (the version's task document and the evidence gathered for that
exact version: its latest previews per policy, whether a judge is configured, how its
example answers graded) and answers one or more `GateResult` lines: pass, fail or not_run.
A gate may also say which previews it needs (`previews(task) -> [(policy, n)]`), so that
"Run gates" can start exactly the missing ones.

Other parts extend the set with `register_gate` (hack probes register `hack:NAME` gates).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Literal, Mapping

from grading.engine.calibration import DEFAULT_HACK_LIMIT, band_verdict, hack_limit, hack_message
from grading.engine.hacks import applicable_hacks

GateStatus = Literal["pass", "fail", "not_run"]
PASS, FAIL, NOT_RUN = "pass", "fail", "not_run"

#: A nop rollout (it does nothing) and each hack probe must score at most this reward, unless
#: the task's `metadata.hack_limit` says otherwise.
NOP_MAX_REWARD = DEFAULT_HACK_LIMIT
HACK_ROLLOUTS = 1
ORACLE_ROLLOUTS = 3
NOP_ROLLOUTS = 3
PROBE_ROLLOUTS = 1


@dataclass(frozen=True)
class PreviewEvidence:
    """The latest finished preview run of one policy on the exact version."""

    policy: str
    run_id: int | None
    n: int
    rewards: list[float]          # rewards of the graded rollouts
    passed: list[bool]            # their pass flags, same order
    errors: int = 0               # rollouts that ended without a grade
    rewarded: list[tuple[str, ...]] = field(default_factory=list)  # per graded rollout: checks that awarded points

    @property
    def graded(self) -> int:
        return len(self.rewards)


@dataclass(frozen=True)
class ExampleAnswerResult:
    name: str
    ok: bool          # graded as its author expects
    message: str = ""
    # grading.engine.example_answers: as_expected | unexpected | error, or pending | incomplete
    # (no verdict yet, or a check could not be scored): those make the gate not_run, not fail.
    status: str = ""

    @property
    def undecided(self) -> bool:
        return not self.ok and self.status in ("pending", "incomplete")


@dataclass
class GateInputs:
    task: Mapping                                  # the gymwright.task/v1 document
    previews: Mapping[str, PreviewEvidence] = field(default_factory=dict)  # policy -> latest finished run
    judge_configured: bool = False
    rubric_issues: list[str] = field(default_factory=list)  # "pointer: message" lines; empty = valid
    example_answers: list[ExampleAnswerResult] | None = None  # None: this installation cannot grade them

    @property
    def rubric(self) -> Mapping:
        return self.task.get("rubric") or {}


@dataclass(frozen=True)
class GateResult:
    gate: str
    title: str
    status: GateStatus
    message: str
    policy: str | None = None     # the preview policy whose evidence decided it
    run_id: int | None = None     # that preview run
    blocking: bool = True         # False only for a check this installation cannot make at all

    @property
    def ok(self) -> bool:
        return self.status == PASS or not self.blocking

    def to_dict(self) -> dict:
        return {"gate": self.gate, "title": self.title, "status": self.status, "message": self.message,
                "policy": self.policy, "run_id": self.run_id, "blocking": self.blocking}


@dataclass(frozen=True)
class Gate:
    name: str
    title: str
    evaluate: Callable[[GateInputs], GateResult | list[GateResult]]
    previews: Callable[[Mapping], list[tuple[str, int]]] = lambda task: []


_REGISTRY: dict[str, Gate] = {}


def register_gate(name: str, *, title: str, evaluate: Callable[[GateInputs], GateResult | list[GateResult]],
                  previews: Callable[[Mapping], list[tuple[str, int]]] | None = None) -> Gate:
    """Add (or replace) a gate. `evaluate(inputs)` answers one GateResult or a list of them;
    `previews(task)` lists the (policy, n) previews it needs on a version of `task`."""
    gate = Gate(name=name, title=title, evaluate=evaluate, previews=previews or (lambda task: []))
    _REGISTRY[name] = gate
    return gate


def registered_gates() -> list[Gate]:
    return list(_REGISTRY.values())


def evaluate_gates(inputs: GateInputs) -> list[GateResult]:
    results: list[GateResult] = []
    for gate in registered_gates():
        outcome = gate.evaluate(inputs)
        results.extend(outcome if isinstance(outcome, list) else [outcome])
    return results


def required_previews(task: Mapping) -> list[tuple[str, int]]:
    """Every (policy, n) preview the gates need on a version of `task`, without duplicates."""
    seen: dict[str, int] = {}
    for gate in registered_gates():
        for policy, n in gate.previews(task):
            seen[policy] = max(n, seen.get(policy, 0))
    return list(seen.items())


def missing_previews(task: Mapping, previews: Mapping[str, PreviewEvidence] | Iterable[str]) -> list[tuple[str, int]]:
    """The previews the gates need that have no run on this version yet."""
    have = set(previews)
    return [(policy, n) for policy, n in required_previews(task) if policy not in have]


def all_pass(results: Iterable[GateResult]) -> bool:
    return all(result.ok for result in results)


# ---------------------------------------------------------------------------------------------- built-in gates


def has_reference_solution(task: Mapping) -> bool:
    solution = task.get("solution") or {}
    return bool(solution.get("script") or solution.get("answer"))


def has_judge_checks(rubric: Mapping) -> bool:
    stack = list(rubric.get("checks") or [])
    while stack:
        check = stack.pop()
        if not isinstance(check, dict):
            continue
        if check.get("kind") == "llm_judge":
            return True
        stack.extend(check.get("checks") or [])
    return False


def probe_policy(answer: str) -> str:
    return f"probe:{answer}"


def probe_shown(answer: str) -> str:
    """A probe's answer as people read it: “its first 40 characters”, or (the empty answer)."""
    if not answer:
        return "(the empty answer)"
    return f"“{answer[:40]}{'…' if len(answer) > 40 else ''}”"


def _not_run(gate: str, title: str, policy: str, what: str) -> GateResult:
    return GateResult(gate, title, NOT_RUN, f"no finished {what} preview of this version yet", policy=policy)


def _incomplete(evidence: PreviewEvidence) -> str | None:
    if evidence.graded == 0:
        return f"none of its {evidence.n} rollouts was graded"
    if evidence.errors:
        return f"{evidence.errors} of {evidence.n} rollouts ended without a grade"
    return None


def _gate_rubric(inputs: GateInputs) -> GateResult:
    title = "Rubric validates"
    if inputs.rubric_issues:
        return GateResult("rubric", title, FAIL, "; ".join(inputs.rubric_issues[:5]))
    return GateResult("rubric", title, PASS, "the rubric and task validate")


def _gate_oracle(inputs: GateInputs) -> GateResult:
    title = "Oracle passes"
    if not has_reference_solution(inputs.task):
        return GateResult("oracle", title, PASS, "no reference solution, nothing to check", policy="oracle")
    evidence = inputs.previews.get("oracle")
    if evidence is None:
        return _not_run("oracle", title, "oracle", "oracle")
    problem = _incomplete(evidence)
    if problem:
        return GateResult("oracle", title, FAIL, problem, policy="oracle", run_id=evidence.run_id)
    verdict = band_verdict("oracle", sum(evidence.passed) / evidence.graded)
    message = f"{sum(evidence.passed)} of {evidence.graded} passed: {verdict.message}"
    return GateResult("oracle", title, PASS if verdict.ok else FAIL, message, policy="oracle", run_id=evidence.run_id)


def _gate_nop(inputs: GateInputs) -> GateResult:
    limit = hack_limit(inputs.task.get("metadata"))
    title = f"Nop scores ≤ {limit:g}"
    evidence = inputs.previews.get("nop")
    if evidence is None:
        return _not_run("nop", title, "nop", "nop")
    problem = _incomplete(evidence)
    if problem:
        return GateResult("nop", title, FAIL, problem, policy="nop", run_id=evidence.run_id)
    worst = max(evidence.rewards)
    ok = worst <= limit
    message = (f"highest reward {worst:.2f}" + ("" if ok else f" > {limit:g}: the rubric rewards doing nothing"))
    return GateResult("nop", title, PASS if ok else FAIL, message, policy="nop", run_id=evidence.run_id)


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
        problem = _incomplete(evidence)
        if problem:
            results.append(GateResult(f"probe:{index}", title, FAIL, problem, policy=policy, run_id=evidence.run_id))
            continue
        worst = max(evidence.rewards)
        ok = worst <= limit
        message = f"highest reward {worst:.2f}" + ("" if ok else f" > {limit:g}: the rubric rewards this probe")
        results.append(GateResult(f"probe:{index}", title, PASS if ok else FAIL, message, policy=policy,
                                  run_id=evidence.run_id))
    return results


def hack_policies(task: Mapping) -> list[str]:
    return [f"hack:{name}" for name in applicable_hacks(task)]


def _gate_hacks(inputs: GateInputs) -> list[GateResult]:
    """Every applicable hack probe scores at most the task's limit; one that does not names
    the checks that rewarded it."""
    limit = hack_limit(inputs.task.get("metadata"))
    results = []
    for policy in hack_policies(inputs.task):
        title = f"{policy} scores ≤ {limit:g}"
        evidence = inputs.previews.get(policy)
        if evidence is None:
            results.append(_not_run(policy, title, policy, policy))
            continue
        problem = _incomplete(evidence)
        if problem:
            results.append(GateResult(policy, title, FAIL, problem, policy=policy, run_id=evidence.run_id))
            continue
        worst = max(range(evidence.graded), key=lambda i: evidence.rewards[i])
        rewarded = evidence.rewarded[worst] if worst < len(evidence.rewarded) else ()
        reward = evidence.rewards[worst]
        results.append(GateResult(policy, title, PASS if reward <= limit else FAIL,
                                  hack_message(policy.split(":", 1)[1], reward, limit, rewarded),
                                  policy=policy, run_id=evidence.run_id))
    return results


def _gate_examples(inputs: GateInputs) -> GateResult:
    title = "Example answers grade as expected"
    if inputs.example_answers is None:
        return GateResult("examples", title, NOT_RUN, "this installation cannot grade saved example answers yet",
                          blocking=False)
    if not inputs.example_answers:
        return GateResult("examples", title, PASS, "no example answers saved")
    wrong = [example for example in inputs.example_answers if not example.ok and not example.undecided]
    if wrong:
        return GateResult("examples", title, FAIL, "; ".join(
            f"{example.name}: {example.message or 'not graded as expected'}" for example in wrong[:5]))
    undecided = [example for example in inputs.example_answers if example.undecided]
    if undecided:
        return GateResult("examples", title, NOT_RUN, "; ".join(
            f"{example.name}: {example.message or example.status}" for example in undecided[:5]))
    return GateResult("examples", title, PASS, f"all {len(inputs.example_answers)} grade as expected")


def _gate_judge(inputs: GateInputs) -> GateResult:
    title = "Judge configured for llm_judge checks"
    if not has_judge_checks(inputs.rubric):
        return GateResult("judge", title, PASS, "no llm_judge checks")
    if inputs.judge_configured:
        return GateResult("judge", title, PASS, "a judge model is configured")
    return GateResult("judge", title, FAIL, "the rubric has llm_judge checks but no judge model is configured, "
                                            "so they would be unscored")


register_gate("rubric", title="Rubric validates", evaluate=_gate_rubric)
register_gate("oracle", title="Oracle passes", evaluate=_gate_oracle,
              previews=lambda task: [("oracle", ORACLE_ROLLOUTS)] if has_reference_solution(task) else [])
register_gate("nop", title="Nop fails", evaluate=_gate_nop, previews=lambda task: [("nop", NOP_ROLLOUTS)])
register_gate("probes", title="Probes fail", evaluate=_gate_probes,
              previews=lambda task: [(probe_policy(str(p.get("answer", ""))), PROBE_ROLLOUTS)
                                     for p in ((task.get("rubric") or {}).get("probes") or [])])
register_gate("hacks", title="Hack probes fail", evaluate=_gate_hacks,
              previews=lambda task: [(policy, HACK_ROLLOUTS) for policy in hack_policies(task)])
register_gate("examples", title="Example answers", evaluate=_gate_examples)
register_gate("judge", title="Judge configured", evaluate=_gate_judge)
