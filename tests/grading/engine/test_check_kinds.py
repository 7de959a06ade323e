"""A check kind owns its facts: each one's model declares what it needs and does (CheckBase's flags),
every consumer reads them from there, and the rubric's check tree has one walk (`flat_checks`). Adding
a kind is one class and its tests; a kind that leaves a fact undecided fails here."""

from __future__ import annotations

import pytest

from grading.engine import gate_rules, parse_rubric
from grading.engine.checks import episode_checks
from grading.engine.example_answers import rubric_needs
from grading.engine.hack_targets import applicable_hacks
from grading.engine.models import (
    CHECK_FLAGS,
    CHECK_MODELS,
    Check,
    CheckBase,
    check_model,
    flat_checks,
    has_judge_checks,
    kinds_with,
)

# What each consumer used before the facts moved onto the models (issue 28), written out once more:
# the derived sets must be these, so that moving them changed nothing.
BEFORE = {
    # grading/engine/checks.py EPISODE_KINDS: read the agent's workspace or run in its sandbox
    "reads_episode": {"file_exists", "file_content", "table_cell", "command", "python", "tests"},
    # grading/engine/example_answers.py SANDBOX_KINDS, grading/engine/hack_targets.py CODE_KINDS
    "needs_sandbox": {"command", "python", "tests"},
    # hack_targets.py's "empty-files" and lint.py's _read_path: the kinds that read a workspace file at `path`
    "reads_workspace": {"file_exists", "file_content", "table_cell"},
    # hack_targets.py EXHAUSTIBLE_KINDS = CODE_KINDS | FILE_KINDS | {llm_judge, regex, number, text_similarity}
    "grows_with_output": {
        "command",
        "python",
        "tests",
        "file_exists",
        "file_content",
        "table_cell",
        "json_field",
        "llm_judge",
        "regex",
        "number",
        "text_similarity",
    },
    # gate_rules.has_judge_checks, grading.services.rubric_has_judge_checks, rubric_needs: kind == "llm_judge"
    "judged": {"llm_judge"},
    "bounded_by_design": {"string_match", "regex", "number", "json_field", "text_similarity"},
}


def test_every_kind_declares_every_flag_on_its_own_class():
    kinds = {member.model_fields["kind"].annotation.__args__[0] for member in Check.__origin__.__args__}
    assert kinds == set(CHECK_MODELS)
    for flag in CHECK_FLAGS:
        assert not hasattr(CheckBase, flag), f"CheckBase must not give {flag} a default: each kind decides"
        for kind, model in CHECK_MODELS.items():
            assert flag in vars(model), f"{kind} ({model.__name__}) does not declare {flag}"
            assert isinstance(vars(model)[flag], bool), f"{kind}.{flag} is not a bool"


def test_the_sets_derived_from_the_flags_are_those_each_consumer_used():
    assert set(BEFORE) == set(CHECK_FLAGS)
    for flag, kinds in BEFORE.items():
        assert kinds_with(flag) == kinds, flag
    with pytest.raises(ValueError, match="not a check kind's flag"):
        kinds_with("judge")


def test_a_flag_is_read_the_same_from_a_model_a_document_and_a_grade():
    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "j", "kind": "llm_judge", "points": 1, "criterion": "ok"}],
        }
    )
    document = rubric.to_document()
    assert rubric.checks[0].judged and check_model(document["checks"][0]).judged
    assert check_model({"kind": "llm_judge", "status": "scored"}) is CHECK_MODELS["llm_judge"]
    assert check_model({"kind": "no_such_kind"}) is None and check_model({"kind": ["x"]}) is None
    assert check_model(7) is None


JUDGED_IN_A_GROUP = {
    "schema": "gymwright.rubric/v1",
    "checks": [
        {"id": "says", "kind": "string_match", "points": 1, "expected": "x"},
        {
            "id": "both",
            "kind": "group",
            "points": 1,
            "checks": [
                {"id": "run", "kind": "command", "points": 1, "run": "true"},
                {"id": "good", "kind": "llm_judge", "points": 1, "criterion": "is good"},
            ],
        },
    ],
}


def test_does_this_rubric_have_judge_checks_has_one_answer():
    parsed = parse_rubric(JUDGED_IN_A_GROUP)
    assert gate_rules.has_judge_checks is has_judge_checks
    assert has_judge_checks(parsed) and has_judge_checks(JUDGED_IN_A_GROUP)
    assert rubric_needs(JUDGED_IN_A_GROUP) == {"judge", "sandbox"}
    plain = {"schema": "gymwright.rubric/v1", "checks": JUDGED_IN_A_GROUP["checks"][:1]}
    assert not has_judge_checks(plain) and not has_judge_checks(parse_rubric(plain)) and rubric_needs(plain) == set()
    assert not has_judge_checks({"checks": "nonsense"}) and not has_judge_checks(None)


def test_the_consumers_read_the_flags_of_checks_inside_groups():
    assert episode_checks(JUDGED_IN_A_GROUP) == ["run"]
    task = {"schema": "gymwright.task/v1", "id": "t", "prompt": "Say x.", "rubric": JUDGED_IN_A_GROUP}
    found = applicable_hacks(task)
    assert {"skip-tests", "judge-injection", "exit-zero", "exhaust"} <= set(found)
    assert "empty-files" not in found


def test_the_walk_is_iterative_and_in_document_order():
    deep: dict = {"id": "leaf", "kind": "string_match", "points": 1, "expected": "x"}
    for level in range(5000):  # far past Python's recursion limit
        deep = {"id": f"g{level}", "kind": "group", "points": 1, "checks": [deep]}
    rows = list(flat_checks([deep, {"id": "after", "kind": "regex", "points": 1, "pattern": "x"}]))
    assert len(rows) == 5002
    assert rows[0].pointer == "/checks/0" and rows[0].depth == 0
    assert rows[5000].check["id"] == "leaf" and rows[5000].depth == 5000 and rows[5000].parent_id == "g0"
    assert rows[5000].pointer == "/checks/0" + "/checks/0" * 5000
    assert (rows[5001].check["id"], rows[5001].depth, rows[5001].pointer) == ("after", 0, "/checks/1")
    parsed = parse_rubric(JUDGED_IN_A_GROUP)
    assert [check.id for check in parsed.iter_checks()] == ["says", "both", "run", "good"]
