"""The gate registry and the types gates read and answer: `GateInputs` (a version's task document and its
evidence), `GateResult`, `register_gate` / `evaluate_gates`, which previews the registered gates need
(`required_previews`, `previews_to_start`) and what an author does about a result (`what_to_do`). Pure,
no Django. The built-in gates, and what each one means, are in `gate_rules`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Literal

from grading.engine.calibration import Verdict
from grading.engine.scoring import SCORING_RULE

GateStatus = Literal["pass", "fail", "not_run"]
PASS, FAIL, NOT_RUN = "pass", "fail", "not_run"


@dataclass(frozen=True)
class GradeGap:
    """What an incomplete grade leaves open: the lowest and highest reward the rubric's formula
    can give once every check it left unscored is scored (each anywhere in [0, 1]), and why."""

    low: float
    high: float
    reasons: tuple[str, ...] = ()  # why its checks are unscored, in words, each once
    needs_judge: bool = False  # a judge check is unscored: a grade with no judge leaves it so again
    gated: bool = False  # a required check already failed: the reward is 0 whatever the rest score


@dataclass(frozen=True)
class PreviewEvidence:
    """The latest finished preview run of one policy on the exact version."""

    policy: str
    run_id: int | None
    n: int
    rewards: list[float]  # rewards of the graded rollouts
    passed: list[bool]  # their pass flags, same order
    errors: int = 0  # rollouts that ended without a grade
    # The oldest scoring rule its grades were totalled under (scoring.SCORING_RULE): an older one
    # left unscored checks out of `max`, so its rewards decide nothing: run it again.
    scoring_rule: int = SCORING_RULE
    rewarded: list[tuple[str, ...]] = field(default_factory=list)  # per graded rollout: checks that awarded points
    gaps: list[GradeGap | None] = field(default_factory=list)  # per graded rollout: None (or left out) = complete
    # per graded rollout: top-level check id -> score (None: unscored); read for hack:zero-width
    scores: list[Mapping[str, float | None]] = field(default_factory=list)

    @property
    def graded(self) -> int:
        return len(self.rewards)

    @property
    def incomplete(self) -> list[GradeGap]:
        """The gaps of its incomplete grades."""
        return [gap for gap in self.gaps[: self.graded] if gap is not None]

    def reward_ranges(self) -> list[tuple[float, float]]:
        """Per graded rollout, the (lowest, highest) reward its complete grade could have."""
        return [
            (gap.low, gap.high) if gap is not None else (reward, reward)
            for reward, gap in zip_longest(self.rewards, self.gaps[: self.graded])
        ]


@dataclass(frozen=True)
class ExampleAnswerResult:
    name: str
    ok: bool  # graded as its author expects
    message: str = ""
    # grading.engine.example_answers: as_expected | unexpected | error, or pending | incomplete
    # (no verdict yet, or a check could not be scored): those make the gate not_run, not fail.
    status: str = ""
    expect: str = ""  # "pass" | "fail": what its author expects

    @property
    def undecided(self) -> bool:
        return not self.ok and self.status in ("pending", "incomplete")


@dataclass
class GateInputs:
    task: Mapping  # the gymwright.task/v1 document
    previews: Mapping[str, PreviewEvidence] = field(default_factory=dict)  # policy -> latest finished run
    judge_configured: bool = False
    # With no judge configured: who can give the judge checks one, and where (the app's words and page), for the
    # gates that wait for a judge; empty: the general advice.
    judge_help: str = ""
    judge_help_link: str = ""
    judge_help_link_text: str = ""
    rubric_issues: list[str] = field(default_factory=list)  # "pointer: message" lines; empty = valid
    example_answers: list[ExampleAnswerResult] | None = None  # None: this installation cannot grade them
    # check id -> whether reviewers' labels validate its judge (calibration.judge_validation), for the binary
    # judged checks; None: nothing here gathers labels. Blocking only where the environment says so.
    judge_validation: Mapping[str, Verdict] | None = None
    judge_validation_blocks: bool = False
    # Whether the task's reward ranks rollouts as reviewers' blind scores do (calibration.human_prediction_verdict);
    # None: nothing here gathers blind scores. Only ever a warning.
    human_prediction: Verdict | None = None
    # The model ids the task's judge checks call (its judge, the models its checks name, its panel's members;
    # empty: no judge configured) and the policy endpoint's model id ("": none): the self-preference warning.
    judge_models: tuple[str, ...] = ()
    policy_model: str = ""

    @property
    def rubric(self) -> Mapping:
        return self.task.get("rubric") or {}


@dataclass(frozen=True)
class GateResult:
    gate: str
    title: str
    status: GateStatus
    message: str
    policy: str | None = None  # the preview policy whose evidence decided it
    run_id: int | None = None  # that preview run
    # False for a check this installation cannot make at all, and for a warning (a judge not validated by labels,
    # unless its environment makes that blocking): a failed non-blocking gate is shown and submits anyway.
    blocking: bool = True
    # A gate whose preview cannot decide it yet ("a judge"): Run gates starts nothing for it.
    waiting_for: str = ""
    # A failed gate that a new run of its preview may decide (a hack probe whose run errored or was
    # graded incompletely): Run gates starts that preview again.
    retry: bool = False
    # A gate left not_run that a new run of its preview would leave the same (the padded reference measured
    # nothing because the reference already scores full marks): Run gates starts nothing for it.
    settled: bool = False
    # What the author does next, in words (the task page shows it by the Submit button; the API returns it).
    what_to_do: str = ""
    # Where that is done (a page of this app), and the link's words.
    link: str = ""
    link_text: str = ""

    @property
    def ok(self) -> bool:
        return self.status == PASS or not self.blocking

    def to_dict(self) -> dict:
        return {
            "gate": self.gate,
            "title": self.title,
            "status": self.status,
            "message": self.message,
            "policy": self.policy,
            "run_id": self.run_id,
            "blocking": self.blocking,
            "what_to_do": self.what_to_do or what_to_do(self),
            "link": self.link,
            "link_text": self.link_text,
        }


@dataclass(frozen=True)
class Gate:
    name: str
    title: str
    evaluate: Callable[[GateInputs], GateResult | list[GateResult]]
    previews: Callable[[Mapping], list[tuple[str, int]]] = lambda task: []


_REGISTRY: dict[str, Gate] = {}


def register_gate(
    name: str,
    *,
    title: str,
    evaluate: Callable[[GateInputs], GateResult | list[GateResult]],
    previews: Callable[[Mapping], list[tuple[str, int]]] | None = None,
) -> Gate:
    """Add (or replace) a gate. `evaluate(inputs)` answers one GateResult or a list of them;
    `previews(task)` lists the (policy, n) previews it needs on a version of `task`."""
    gate = Gate(name=name, title=title, evaluate=evaluate, previews=previews or (lambda task: []))
    _REGISTRY[name] = gate
    return gate


def unregister_gate(name: str) -> Gate | None:
    """Remove a gate added by `register_gate` (a plugin unloaded, a test's own gate); the removed gate, or None."""
    return _REGISTRY.pop(name, None)


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


def previews_to_start(
    inputs: GateInputs, results: Iterable[GateResult], *, pending: Iterable[str] = ()
) -> list[tuple[str, int]]:
    """What "Run gates" starts: each preview the gates need that has no finished run (`inputs.previews`)
    and each whose latest run left its gate not_run (incomplete grades), unless that gate waits for
    something a new run would not have (no judge configured yet) or a new run would leave it the same
    (`settled`); never a policy in `pending` (a run of it is queued or running)."""
    undecided = {
        result.policy
        for result in results
        if (result.status == NOT_RUN or result.retry)
        and result.policy
        and not result.waiting_for
        and not result.settled
    }
    pending = set(pending)
    return [
        (policy, n)
        for policy, n in required_previews(inputs.task)
        if policy not in pending and (policy not in inputs.previews or policy in undecided)
    ]


def all_pass(results: Iterable[GateResult]) -> bool:
    return all(result.ok for result in results)


def what_to_do(result: GateResult) -> str:
    """The next step for a gate's result, in words: empty when it passes (or does not block)."""
    if result.ok:
        return ""
    if result.what_to_do:
        return result.what_to_do
    if result.waiting_for:
        return f"Configure {result.waiting_for}, then click Run gates."
    if result.status == NOT_RUN:
        return "Click Run gates, and wait for its previews to finish." if result.policy else "Wait, then reload."
    if result.retry:
        return "Click Run gates to run it again; if it fails again, fix what its evidence shows."
    return _WHAT_TO_DO.get(
        result.gate.split(":", 1)[0], "Fix what the message says, save a new version and run the gates."
    )


_WHAT_TO_DO = {
    "rubric": "Fix each error listed in the rubric or task, then save a new version.",
    "oracle": "Fix the reference solution or the rubric until the oracle passes every rollout, then run the gates.",
    "nop": "Make the checks require the work (required checks on what the task produces), then run the gates.",
    "probe": "Tighten the checks that rewarded the probe's answer, then run the gates.",
    "hack": "Make the checks named unreachable without doing the task (a `tests` check with grader or protected "
    "test files, exact file checks, penalties), then run the gates.",
    "examples": "Fix the rubric or the example answer (its expected verdict or files), then save a new version.",
    "judge": "Configure a judge endpoint (an admin adds one under Admin → Model endpoints), then run the gates.",
    "human_prediction": "Open the blind-scoring figures: turn each rollout the rubric passes and humans fail into an "
    "example answer expected to fail, then tighten the rubric until it fails them.",
    "bias": "Make the judged criteria say that length and restatement earn nothing (or add a penalty check for "
    "padding), or have the task judged by another judge or a judge panel (judge.panel), then run the gates.",
    "judge_validated": "Label the judge's verdicts on these checks (Review, Label the judge) until each has enough "
    "answers of both classes; if a rate stays low, reword the criterion or change the judge.",
}


def blocking_reasons(results: Iterable[GateResult]) -> list[dict]:
    """The gates that keep a version from being submitted, each with its message and what to do:
    [{"gate", "title", "status", "status_text", "message", "what_to_do", "link", "link_text"}] (status_text:
    "not run", not "not_run")."""
    return [
        {
            "gate": result.gate,
            "title": result.title,
            "status": result.status,
            "status_text": result.status.replace("_", " "),
            "message": result.message,
            "what_to_do": what_to_do(result),
            "link": result.link,
            "link_text": result.link_text,
        }
        for result in results
        if not result.ok
    ]
