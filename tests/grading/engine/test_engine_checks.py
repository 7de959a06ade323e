"""Each deterministic check kind: when it is met, when not, what it reads."""

from __future__ import annotations

import hashlib
import os

import openpyxl
import pytest

from grading.engine import grade, parse_rubric
from grading.engine.describe import check_in_words


def one(check: dict, *, answer: str = "", **kwargs):
    """Grade a rubric of one check; return that check's result."""
    check = {"id": "c", "points": 1, **check}
    result = grade(parse_rubric({"schema": "gymwright.rubric/v1", "checks": [check]}), answer=answer, **kwargs)
    return result.checks[0]


def score(check: dict, **kwargs):
    result = one(check, **kwargs)
    assert result.status == "scored", result.explanation
    return result.score


# ---------------------------------------------------------------- string_match


@pytest.mark.parametrize(
    "mode, expected, answer, met",
    [
        ("contains", "42", "The answer is 42.", True),
        ("contains", "43", "The answer is 42.", False),
        ("not_contains", "error", "all fine", True),
        ("not_contains", "error", "an ERROR here", False),
        ("equals", "Paris", "  paris ", True),
        ("equals", "Paris", "Paris, France", False),
        ("starts_with", "yes", "Yes, it is", True),
        ("ends_with", "done.", "all\n\n done.", True),
        ("starts_with", "no", "yes", False),
    ],
)
def test_string_match_modes(mode, expected, answer, met):
    assert score({"kind": "string_match", "mode": mode, "expected": expected}, answer=answer) == (1.0 if met else 0.0)


def test_string_match_normalises_whitespace_by_default_and_can_stop():
    check = {"kind": "string_match", "mode": "contains", "expected": "big   red\tdog"}
    assert score(check, answer="a big red\n dog") == 1.0
    assert score({**check, "normalize_whitespace": False}, answer="a big red\n dog") == 0.0


def test_string_match_can_be_case_sensitive():
    check = {"kind": "string_match", "expected": "NaCl", "case_sensitive": True}
    assert score(check, answer="nacl") == 0.0
    assert score(check, answer="NaCl") == 1.0


def test_string_match_reads_the_trajectory():
    check = {"kind": "string_match", "expected": "ran pytest", "target": "trajectory"}
    assert score(check, answer="", trajectory="step 1: ran pytest") == 1.0
    result = one(check, answer="")
    assert result.status == "unscored" and "trajectory" in result.explanation


# ---------------------------------------------------------------- regex


def test_regex_matches_and_counts():
    check = {"kind": "regex", "pattern": r"\bcat\b"}
    assert score(check, answer="a cat sat") == 1.0
    assert score(check, answer="concatenate") == 0.0
    assert score({**check, "min_count": 2}, answer="cat cat") == 1.0
    assert score({**check, "min_count": 3}, answer="cat cat") == 0.0


def test_regex_must_not_match():
    check = {"kind": "regex", "pattern": "TODO", "must_match": False}
    assert score(check, answer="finished") == 1.0
    assert score(check, answer="TODO: finish") == 0.0


def test_regex_flags():
    check = {"kind": "regex", "pattern": "^total$", "flags": "im"}
    assert score(check, answer="x\nTOTAL\ny") == 1.0
    assert score({**check, "flags": ""}, answer="x\nTOTAL\ny") == 0.0


# ---------------------------------------------------------------- number


@pytest.mark.parametrize(
    "answer, expected, extra, met",
    [
        ("The revenue was 1,234.5 dollars", 1234.5, {}, True),
        ("about 3.14159", 3.14, {"tolerance": 0.01}, True),
        ("about 3.2", 3.14, {"tolerance": 0.01}, False),
        ("growth of 25%", 0.25, {}, True),
        ("growth of 25%", 25, {}, True),
        ("-7 degrees", -7, {}, True),
        ("1000", 1010, {"rel_tolerance": 0.01}, True),
        ("1000", 1020, {"rel_tolerance": 0.01}, False),
        ("no digits here", 1, {}, False),
        ("Q3 revenue: 12", 12, {}, True),
        ("6.02e23 atoms", 6.02e23, {"rel_tolerance": 1e-9}, True),
    ],
)
def test_number_reads_the_first_number(answer, expected, extra, met):
    assert score({"kind": "number", "expected": expected, **extra}, answer=answer) == (1.0 if met else 0.0)


def test_number_extract_uses_its_group():
    check = {"kind": "number", "expected": 99, "extract": r"final: (\S+)"}
    assert score(check, answer="step 1: 5, final: 99") == 1.0
    assert score(check, answer="step 1: 99, nothing final") == 0.0


# ---------------------------------------------------------------- json_field


@pytest.mark.parametrize(
    "op, pointer, expected, met",
    [
        ("eq", "/name", "Ada", True),
        ("eq", "/n", 3.0, True),
        ("eq", "/flag", 1, False),
        ("ne", "/name", "Bob", True),
        ("lt", "/n", 4, True),
        ("le", "/n", 3, True),
        ("gt", "/n", 3, False),
        ("ge", "/items/1", 20, True),
        ("in", "/name", ["Ada", "Grace"], True),
        ("in", "/name", ["Grace"], False),
        ("exists", "/items/2", None, False),
        ("exists", "/a~1b", None, True),
        ("eq", "/missing", 1, False),
        ("gt", "/name", 1, False),
    ],
)
def test_json_field_ops(op, pointer, expected, met):
    answer = '{"name": "Ada", "n": 3, "flag": true, "items": [10, 20], "a/b": 0}'
    check = {"kind": "json_field", "pointer": pointer, "op": op, "expected": expected}
    assert score(check, answer=answer) == (1.0 if met else 0.0)


def test_json_field_tolerates_a_code_fence_and_fails_on_non_json():
    check = {"kind": "json_field", "pointer": "/ok", "expected": True}
    assert score(check, answer='```json\n{"ok": true}\n```') == 1.0
    result = one(check, answer="not json")
    assert result.score == 0.0 and "not JSON" in result.explanation


# ---------------------------------------------------------------- files


def test_file_exists_with_globs(workspace):
    (workspace / "out" / "deep").mkdir(parents=True)
    (workspace / "out" / "deep" / "report.md").write_text("# hi")
    assert score({"kind": "file_exists", "path": "out/deep/report.md"}, workspace=workspace) == 1.0
    assert score({"kind": "file_exists", "path": "**/*.md"}, workspace=workspace) == 1.0
    assert score({"kind": "file_exists", "path": "*.csv"}, workspace=workspace) == 0.0


def test_file_checks_without_a_workspace_are_unscored():
    result = one({"kind": "file_exists", "path": "a.txt"})
    assert result.status == "unscored" and "workspace" in result.explanation


def test_file_content_conditions(workspace):
    (workspace / "a.txt").write_text("hello world\n")
    digest = hashlib.sha256(b"hello world\n").hexdigest()
    assert score({"kind": "file_content", "path": "a.txt", "contains": "world"}, workspace=workspace) == 1.0
    assert score({"kind": "file_content", "path": "a.txt", "regex": r"^hel+o"}, workspace=workspace) == 1.0
    assert score({"kind": "file_content", "path": "a.txt", "equals": "hello world\n"}, workspace=workspace) == 1.0
    assert score({"kind": "file_content", "path": "a.txt", "equals": "hello"}, workspace=workspace) == 0.0
    assert score({"kind": "file_content", "path": "a.txt", "sha256": digest}, workspace=workspace) == 1.0
    assert score({"kind": "file_content", "path": "a.txt", "sha256": "0" * 64}, workspace=workspace) == 0.0


def test_file_content_not_contains_mirrors_string_match_and_a_missing_file_never_passes(workspace):
    (workspace / "a.txt").write_text("hello world\n")
    check = {"kind": "file_content", "path": "a.txt", "not_contains": "TODO"}
    result = one(check, workspace=workspace)
    assert result.score == 1.0 and "does not contain" in result.explanation
    (workspace / "a.txt").write_text("hello\n# TODO: the rest\n")
    result = one(check, workspace=workspace)
    assert result.score == 0.0 and "contains" in result.explanation
    # Deleting the file is not a way to have no TODO in it.
    result = one({**check, "path": "gone.txt"}, workspace=workspace)
    assert result.status == "scored" and result.score == 0.0 and "does not exist" in result.explanation
    assert check_in_words({**check, "id": "c", "points": 1}) == "file a.txt does not contain “TODO”"


def test_a_missing_file_scores_zero_not_unscored(workspace):
    result = one({"kind": "file_content", "path": "nope.txt", "contains": "x"}, workspace=workspace)
    assert result.status == "scored" and result.score == 0.0 and "does not exist" in result.explanation


def test_file_target_reads_the_workspace(workspace):
    (workspace / "notes.md").write_text("Total: 42")
    assert score({"kind": "number", "expected": 42, "target": "file:notes.md"}, workspace=workspace) == 1.0


def test_a_symlink_out_of_the_workspace_is_refused(workspace, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("password")
    os.symlink(secret, workspace / "link.txt")
    result = one({"kind": "file_content", "path": "link.txt", "contains": "password"}, workspace=workspace)
    assert result.status == "scored" and result.score == 0.0 and "symbolic link" in result.explanation
    os.symlink(tmp_path, workspace / "up")
    assert score({"kind": "file_exists", "path": "up/*.txt"}, workspace=workspace) == 0.0


def test_a_link_anywhere_on_the_path_fails_the_check_even_inside_the_workspace(workspace):
    (workspace / "real").mkdir()
    (workspace / "real" / "out.txt").write_text("the answer")
    os.symlink("real", workspace / "linked")
    os.symlink("real/out.txt", workspace / "out.txt")
    for path in ("linked/out.txt", "out.txt"):
        result = one({"kind": "file_content", "path": path, "contains": "answer"}, workspace=workspace)
        assert result.status == "scored" and result.score == 0.0 and "symbolic link" in result.explanation, path
        assert score({"kind": "file_exists", "path": path}, workspace=workspace) == 0.0, path
    # a penalty on a linked file is charged: the link does not hide the bad content
    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": "ok", "kind": "string_match", "points": 3, "expected": "x"},
                {"id": "leak", "kind": "file_content", "points": -3, "path": "out.txt", "contains": "answer"},
            ],
        }
    )
    penalty = grade(rubric, answer="x", workspace=workspace)
    assert penalty.checks[1].score == 1.0 and penalty.checks[1].awarded == -3.0 and penalty.reward == 0.0
    assert score({"kind": "file_exists", "path": "real/out.txt"}, workspace=workspace) == 1.0


# ---------------------------------------------------------------- table_cell


@pytest.fixture
def tables(workspace):
    (workspace / "t.csv").write_text('name,Q1,Q3\nRevenue,"1,000",1234.7\nCost,5,6%\n')
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Notes"
    summary = book.create_sheet("Summary")
    summary.append(["", "Q1", "Q3", "Region"])
    summary.append(["Revenue", 1000, 1234.5, "EMEA"])
    summary.append(["Cost", 400, 410, "EMEA"])
    book.save(workspace / "model.xlsx")
    return workspace


@pytest.mark.parametrize(
    "check, met",
    [
        (
            {
                "path": "model.xlsx",
                "sheet": "Summary",
                "row": "Revenue",
                "column": "Q3",
                "expected": 1234.5,
                "tolerance": 0.5,
            },
            True,
        ),
        (
            {
                "path": "model.xlsx",
                "sheet": "Summary",
                "row": "Revenue",
                "column": "Q3",
                "expected": 1236,
                "tolerance": 0.5,
            },
            False,
        ),
        ({"path": "model.xlsx", "sheet": 1, "row": 1, "column": 2, "expected": 410}, True),
        ({"path": "model.xlsx", "sheet": "Summary", "row": "cost", "column": "Region", "expected": "EMEA"}, True),
        ({"path": "model.xlsx", "row": "Revenue", "column": "Q3", "expected": 1234.5}, False),  # first sheet is Notes
        ({"path": "model.xlsx", "sheet": "Nope", "row": 0, "column": 0, "expected": 1}, False),
        ({"path": "t.csv", "row": "Revenue", "column": "Q1", "expected": 1000}, True),
        ({"path": "t.csv", "row": "Revenue", "column": "Q3", "expected": 1234.5, "tolerance": 0.25}, True),
        ({"path": "t.csv", "row": "Cost", "column": "Q3", "expected": 0.06}, True),
        ({"path": "t.csv", "row": "Profit", "column": "Q3", "expected": 1}, False),
        ({"path": "t.csv", "row": 5, "column": 1, "expected": 1}, False),
    ],
)
def test_table_cell(tables, check, met):
    assert score({"kind": "table_cell", **check}, workspace=tables) == (1.0 if met else 0.0)


# ---------------------------------------------------------------- text_similarity


@pytest.mark.parametrize("metric", ["fuzzy", "rouge_l", "bleu"])
def test_text_similarity_metrics_separate_close_from_far(metric):
    reference = "the quick brown fox jumps over the lazy dog"
    check = {"kind": "text_similarity", "metric": metric, "reference": reference, "threshold": 0.5}
    assert score(check, answer="The quick brown fox jumped over the lazy dog") == 1.0
    assert score(check, answer="completely unrelated words about taxes") == 0.0
    assert score({**check, "threshold": 1.0}, answer=reference) == 1.0


def test_rouge_l_and_bleu_by_hand():
    from grading.engine.similarity import bleu, rouge_l

    # LCS("a b c d", "a c d e") = 3 -> P = R = 3/4 -> F = 0.75
    assert rouge_l("a b c d", "a c d e") == pytest.approx(0.75)
    assert rouge_l("", "a") == 0.0
    # identical 4-token texts: all precisions 1 -> BLEU 1
    assert bleu("a b c d", "a b c d") == pytest.approx(1.0)
    # candidate "a b" vs reference "a b c d": p1 = 1, p2 = (1+1)/(1+1) = 1, p3 = (0+1)/(0+1) = 1, p4 = 1;
    # brevity penalty exp(1 - 4/2) = e^-1
    assert bleu("a b", "a b c d") == pytest.approx(0.36787944, rel=1e-6)
    assert bleu("x y", "a b") == 0.0


def test_a_glob_with_a_partial_double_star_is_rejected():
    from grading.engine import validate_rubric

    issues = validate_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "f", "kind": "file_exists", "points": 1, "path": "out/**x"}],
        }
    )
    assert [issue.pointer for issue in issues] == ["/checks/0/path"]


def test_an_unexpected_error_in_one_check_fails_it_and_grades_the_rest(monkeypatch):
    from grading.engine import checks

    def explode(check, ctx):
        raise RuntimeError("surprise")

    monkeypatch.setitem(checks._HANDLERS, "regex", explode)
    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": "r", "kind": "regex", "points": 1, "pattern": "x"},
                {"id": "s", "kind": "string_match", "points": 1, "expected": "x"},
            ],
        }
    )
    result = grade(rubric, answer="x")
    assert result.checks[0].status == "scored" and result.checks[0].score == 0.0
    assert "error while checking: RuntimeError: surprise" in result.checks[0].explanation
    assert result.checks[1].score == 1.0 and result.reward == 0.5 and result.complete


# ---------------------------------------------------------------- hostile workspace files


def test_a_fifo_in_the_workspace_is_not_met_and_never_blocks_the_grader(tmp_path):
    os.mkfifo(tmp_path / "report.md")
    result = one({"kind": "file_content", "path": "report.md", "contains": "x"}, workspace=tmp_path)
    assert result.status == "scored" and result.score == 0.0
    assert "FIFO" in result.explanation


def test_a_file_the_snapshot_left_out_fails_with_the_reason(tmp_path):
    result = one(
        {"kind": "file_content", "path": "big.bin", "contains": "x"},
        workspace=tmp_path,
        left_out={"big.bin": "snapshot size limit: 524288000 bytes"},
    )
    assert result.status == "scored" and result.score == 0.0
    assert "left out of the workspace snapshot" in result.explanation
    assert "snapshot size limit" in result.explanation
