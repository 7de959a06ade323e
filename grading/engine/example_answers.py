"""Example answers as the rubric's own tests: the verdict logic. Pure, no Django.

A task document may carry `examples` (see `models.ExampleAnswer`): answers the author saved with
the verdict they expect. Each is graded like a dry run, and `example_verdict` compares the grade
with the expectation:

- `as_expected`: the grade is complete, `passed` matches `expect` ("pass" / "fail") and the
  reward is inside `reward` ({"min", "max"}) when one is given;
- `unexpected`: the grade is complete and one of those does not hold (the message says which);
- `incomplete`: a check could not be scored (no judge configured, a check that needs the
  sandbox, a check over its CPU budget): no verdict, never a pass by default;
- `error`: grading itself was stopped (a limit) or failed; the message says why.

(Kinds are for the kind reference, `grading.engine.kind_examples`; these are answers.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from .models import ExampleAnswer, Grade, check_model, flat_checks, has_judge_checks

ExampleStatus = Literal["as_expected", "unexpected", "incomplete", "error", "pending"]
AS_EXPECTED, UNEXPECTED, INCOMPLETE, ERROR, PENDING = "as_expected", "unexpected", "incomplete", "error", "pending"
STATUS_WORDS = {
    AS_EXPECTED: "as expected",
    UNEXPECTED: "not as expected",
    INCOMPLETE: "incomplete",
    ERROR: "error",
    PENDING: "pending",
}


@dataclass(frozen=True)
class ExampleVerdict:
    """How one example answer graded against what its author expects."""

    name: str
    expect: str  # "pass" | "fail"
    status: ExampleStatus
    message: str
    got: str | None = None  # "pass" | "fail" | None when there is no verdict
    reward: float | None = None
    reward_min: float | None = None  # the expected range, when the example gives one
    reward_max: float | None = None
    # The grade's reward_upper (scoring rule 2); None in a verdict stored under the old rule: grade it again.
    reward_upper: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == AS_EXPECTED

    @property
    def expected_text(self) -> str:
        """e.g. "pass, reward 0.8–1"."""
        if self.reward_min is None and self.reward_max is None:
            return self.expect
        return f"{self.expect}, reward {_number(self.reward_min or 0)}–{_number(1 if self.reward_max is None else self.reward_max)}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExampleVerdict:
        return cls(**{key: data.get(key) for key in cls.__dataclass_fields__})


def _number(value: float) -> str:
    return f"{value:g}"


def _example(example: ExampleAnswer | Mapping) -> ExampleAnswer:
    return example if isinstance(example, ExampleAnswer) else ExampleAnswer.model_validate(dict(example))


def _unscored_points(grade: Grade) -> float:
    return sum(check.points for check in grade.checks if check.status == "unscored" and check.points > 0)


def reward_range_text(reward: float, reward_upper: float | None) -> str:
    """ "reward 0.40" for a complete grade, "reward 0.40–1.00" for an incomplete one's bounds."""
    if reward_upper is None or reward_upper <= reward:
        return f"reward {reward:.2f}"
    return f"reward {reward:.2f}–{reward_upper:.2f}"


def example_verdict(example: ExampleAnswer | Mapping, grade: Grade | Mapping) -> ExampleVerdict:
    """Compare one example's grade with the verdict its author expects."""
    example = _example(example)
    grade = grade if isinstance(grade, Grade) else Grade.model_validate(dict(grade))
    low = example.reward.min if example.reward is not None else None
    high = example.reward.max if example.reward is not None else None
    base = dict(name=example.name, expect=example.expect, reward_min=low, reward_max=high)
    unscored = [check for check in grade.iter_checks() if check.status == "unscored"]
    upper = grade.reward_upper
    if not grade.complete or unscored:
        points = _unscored_points(grade)
        # Under the old rule (no reward_upper) max left the unscored checks out.
        total = grade.max if upper is not None else grade.max + points
        head = (
            f"incomplete — {_number(points)} of {_number(total)} points could not be scored"
            if points
            else "incomplete — some checks could not be scored"
        )
        if upper is not None:
            head += f", {reward_range_text(grade.reward, upper)}"
        reasons = sorted({check.explanation for check in unscored if check.explanation})
        return ExampleVerdict(
            **base,
            status=INCOMPLETE,
            reward=grade.reward,
            reward_upper=upper,
            message=head + (f" ({'; '.join(reasons[:3])})" if reasons else ""),
        )
    base["reward_upper"] = grade.reward if upper is None else upper
    got = "pass" if grade.passed else "fail"
    problems = []
    if got != example.expect:
        problems.append(f"expected {example.expect}, got {got} (reward {grade.reward:.2f})")
    if low is not None and grade.reward < low - 1e-9:
        problems.append(f"reward {grade.reward:.2f} is below the expected minimum {_number(low)}")
    if high is not None and grade.reward > high + 1e-9:
        problems.append(f"reward {grade.reward:.2f} is above the expected maximum {_number(high)}")
    if problems:
        return ExampleVerdict(**base, status=UNEXPECTED, got=got, reward=grade.reward, message="; ".join(problems))
    return ExampleVerdict(
        **base,
        status=AS_EXPECTED,
        got=got,
        reward=grade.reward,
        message=f"{got}, reward {grade.reward:.2f}, as expected",
    )


OLD_RULE_MESSAGE = "graded under the old scoring rule — grade it again"


def current_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """A stored verdict (`ExampleVerdict.to_dict()`) as it stands today: one graded before `reward_upper`
    existed (scoring rule 1: unscored checks left out of the reward's maximum) is no verdict any more,
    only pending, until the example is graded again."""
    result = dict(result)
    if result.get("status") in (AS_EXPECTED, UNEXPECTED, INCOMPLETE) and "reward_upper" not in result:
        result.update(status=PENDING, got=None, message=OLD_RULE_MESSAGE)
    return result


def example_failed(example: ExampleAnswer | Mapping, message: str, *, status: ExampleStatus = ERROR) -> ExampleVerdict:
    """The verdict of an example that could not be graded (`error`) or is not graded yet (`pending`)."""
    example = _example(example)
    return ExampleVerdict(
        name=example.name,
        expect=example.expect,
        status=status,
        message=message,
        reward_min=example.reward.min if example.reward else None,
        reward_max=example.reward.max if example.reward else None,
    )


def example_workspace_files(example: ExampleAnswer | Mapping) -> list[tuple[str, bytes]]:
    """(path, bytes) of the files an example puts in the workspace (paths already validated)."""
    return [(item.path, item.content.encode("utf-8")) for item in _example(example).files]


def rubric_needs(rubric: Mapping) -> set[str]:
    """What grading this rubric needs beyond a dry run: {"judge"} (`has_judge_checks`) and/or {"sandbox"}
    (a check whose kind `needs_sandbox`, or one that reads a command's output)."""
    needs = {"judge"} if has_judge_checks(rubric) else set()
    for check, _, _, _ in flat_checks(rubric.get("checks")):
        if getattr(check_model(check), "needs_sandbox", False) or str(check.get("target", "")).startswith("stdout:"):
            needs.add("sandbox")
            break
    return needs


def grade_examples(
    task, *, judge=None, sandbox=None, checks_module: str | None = None
) -> list[tuple[ExampleVerdict, dict]]:
    """Grade every example answer of a parsed `Task` in this process (the CLI; the web app grades
    them in a bounded child process or a worker): [(verdict, grade document)].

    Each example gets a fresh temporary workspace holding only its own files."""
    import tempfile
    from pathlib import Path

    from .safe_files import place_files
    from .scoring import grade

    results = []
    for example in task.examples or []:
        with tempfile.TemporaryDirectory(prefix="gymwright-example-") as tmp:
            root = Path(tmp)
            place_files(root, dict(example_workspace_files(example)))
            graded = grade(
                task.rubric,
                answer=example.answer,
                workspace=root,
                judge=judge,
                sandbox=sandbox,
                checks_module=checks_module,
            )
        results.append((example_verdict(example, graded), graded.to_document()))
    return results


def verdict_changes(before: list[ExampleVerdict], after: list[ExampleVerdict]) -> list[dict[str, Any]]:
    """Per example name (in `after`'s order, then the removed ones): its status in both lists and
    whether its verdict changed. An example only on one side has None on the other and is
    "added" or "removed", not changed."""
    old = {verdict.name: verdict for verdict in before}
    new = {verdict.name: verdict for verdict in after}
    rows = []
    for name in [v.name for v in after] + [v.name for v in before if v.name not in new]:
        a, b = old.get(name), new.get(name)
        rows.append(
            {
                "name": name,
                "before": a,
                "after": b,
                "added": a is None,
                "removed": b is None,
                "changed": a is not None and b is not None and a.status != b.status,
            }
        )
    return rows


__all__ = [
    "AS_EXPECTED",
    "ERROR",
    "INCOMPLETE",
    "PENDING",
    "STATUS_WORDS",
    "UNEXPECTED",
    "ExampleVerdict",
    "example_failed",
    "grade_examples",
    "example_verdict",
    "example_workspace_files",
    "rubric_needs",
    "verdict_changes",
]
