"""Every kind's worked example (grading/engine/kind_examples.py) grades as its help says it does."""

from __future__ import annotations

import pytest

from grading.engine.kind_examples import EXAMPLES
from grading.engine.schema import json_schema
from grading.engine.scoring import grade


def test_every_kind_in_the_schema_has_an_example():
    schema = json_schema("rubric")
    kinds = {
        d["properties"]["kind"]["const"]
        for d in schema["$defs"].values()
        if "kind" in d.get("properties", {}) and "const" in d["properties"]["kind"]
    }
    assert kinds == set(EXAMPLES)


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_each_example_grades_as_stated(kind, tmp_path):
    example = EXAMPLES[kind]
    for path, text in example.files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    rubric = {"schema": "gymwright.rubric/v1", "checks": [example.check]}
    result = grade(rubric, answer=example.answer, workspace=tmp_path).checks[0]
    assert result.status == example.status, result.explanation
    if example.status == "scored":
        assert result.score == pytest.approx(example.score), result.explanation
        assert example.result.startswith("met" if example.score == 1 else "not met")
