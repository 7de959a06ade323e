"""`episode_checks`: which checks cannot be graded from a response alone. It must agree with the engine
itself: graded with no workspace, sandbox or trajectory, exactly those checks (judge aside) come back
unscored. A new check kind or target that needs the episode and is not listed fails here."""

from __future__ import annotations

from grading.engine import grade
from grading.engine.checks import episode_checks
from grading.engine.models import Check, kinds_with

ONE_OF_EACH = [
    {"id": "string", "kind": "string_match", "points": 1, "expected": "42"},
    {"id": "pattern", "kind": "regex", "points": 1, "pattern": "4"},
    {"id": "num", "kind": "number", "points": 1, "expected": 42},
    {"id": "field", "kind": "json_field", "points": 1, "pointer": "/a", "op": "exists"},
    {"id": "similar", "kind": "text_similarity", "points": 1, "reference": "42", "threshold": 0.5},
    {"id": "exists", "kind": "file_exists", "points": 1, "path": "out.txt"},
    {"id": "content", "kind": "file_content", "points": 1, "path": "out.txt", "contains": "42"},
    {"id": "cell", "kind": "table_cell", "points": 1, "path": "t.csv", "row": 0, "column": 0, "expected": 1},
    {"id": "cmd", "kind": "command", "points": 1, "run": "true"},
    {"id": "py", "kind": "python", "points": 1, "code": "def check(ctx):\n    return True\n"},
    {"id": "suite", "kind": "tests", "points": 1, "files": ["test_it.py"]},
    {"id": "in_file", "kind": "string_match", "points": 1, "expected": "42", "target": "file:out.txt"},
    {"id": "in_trajectory", "kind": "regex", "points": 1, "pattern": "4", "target": "trajectory"},
    {"id": "in_stdout", "kind": "string_match", "points": 1, "expected": "42", "target": "stdout:echo 42"},
    {
        "id": "grouped",
        "kind": "group",
        "points": 1,
        "checks": [
            {"id": "g_text", "kind": "string_match", "points": 1, "expected": "4"},
            {"id": "g_file", "kind": "file_exists", "points": 1, "path": "x"},
        ],
    },
]


def test_every_kind_is_in_the_example():
    kinds = {member.model_fields["kind"].annotation.__args__[0] for member in Check.__origin__.__args__}
    assert kinds == {check["kind"] for check in ONE_OF_EACH} | {"llm_judge"}  # the judge: see below
    assert kinds_with("reads_episode") < kinds


def test_the_episode_checks_are_those_a_response_alone_leaves_unscored():
    rubric = {"schema": "gymwright.rubric/v1", "checks": ONE_OF_EACH}
    result = grade(rubric, answer='{"a": 42}')
    unscored = {check.id for check in result.iter_checks() if check.status == "unscored" and check.kind != "group"}
    assert (
        set(episode_checks(rubric))
        == unscored
        == {"exists", "content", "cell", "cmd", "py", "suite", "in_file", "in_trajectory", "in_stdout", "g_file"}
    )


def test_a_judge_check_on_the_answer_needs_no_episode():
    assert episode_checks({"checks": [{"id": "j", "kind": "llm_judge", "points": 1, "criterion": "ok"}]}) == []
    assert episode_checks(
        {"checks": [{"id": "j", "kind": "llm_judge", "points": 1, "criterion": "ok", "target": "trajectory"}]}
    ) == ["j"]
    assert episode_checks(None) == [] and episode_checks({"checks": "nonsense"}) == []
