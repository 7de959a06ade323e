"""docs/formats.md cannot drift from the engine: every check kind, every key of every kind, and every
key of the rubric, task, environment, grade and check-result objects in the published JSON Schema is
documented there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grading.engine import json_schema

DOC = Path(__file__).resolve().parents[3] / "docs" / "formats.md"


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _kind_rows() -> dict[str, str]:
    """The rows of the check-kinds table: {kind: the whole row}."""
    rows = {}
    for line in _doc().splitlines():
        found = re.match(r"^\| `([a-z_]+)` \| .* \|$", line)
        if found and line.count("|") >= 4:
            rows.setdefault(found.group(1), line)
    return rows


def _kinds() -> dict[str, set[str]]:
    """{kind: its own keys (beyond the common ones)} from the engine's rubric schema."""
    schema = json_schema("rubric")
    common = {"id", "kind", "points", "title", "tags", "required", "target"}
    kinds = {}
    for definition in schema["$defs"].values():
        kind = definition.get("properties", {}).get("kind", {}).get("const")
        if kind:
            kinds[kind] = set(definition["properties"]) - common
    return kinds


def test_the_schema_has_the_kinds_this_test_reads():
    assert {"string_match", "regex", "llm_judge", "group"} <= set(_kinds())  # the lookup itself works


@pytest.mark.parametrize("kind", sorted(_kinds()))
def test_every_check_kind_in_the_engines_schema_is_documented_with_all_its_keys(kind):
    rows = _kind_rows()
    assert kind in rows, f"docs/formats.md has no row for check kind {kind!r} in its kinds table"
    missing = sorted(key for key in _kinds()[kind] if f"`{key}`" not in rows[kind])
    assert not missing, f"docs/formats.md: the {kind} row does not mention {missing}"


@pytest.mark.parametrize(
    "schema_name, definition",
    [
        ("rubric", None),
        ("rubric", "CommandCheck"),
        ("rubric", "JudgeSettings"),
        ("rubric", "Probe"),
        ("task", None),
        ("task", "Environment"),
        ("task", "Limits"),
        ("task", "FileRef"),
        ("task", "Solution"),
        ("task", "CustomTool"),
        ("task", "ExampleAnswer"),
        ("task", "ExampleFile"),
        ("grade", None),
        ("grade", "CheckGrade"),
        ("grade", "ProtectedFileState"),
    ],
)
def test_every_key_of_the_formats_is_documented(schema_name, definition):
    schema = json_schema(schema_name)
    properties = (schema if definition is None else schema["$defs"][definition])["properties"]
    text = _doc()
    missing = sorted(key for key in properties if f"`{key}`" not in text)
    assert not missing, f"docs/formats.md does not mention {schema_name} {definition or ''} keys {missing}"


def test_the_readme_points_at_the_formats_page_not_outside_the_repository():
    readme = (DOC.parents[1] / "README.md").read_text(encoding="utf-8")
    assert "docs/formats.md" in readme and "../shared/" not in readme
