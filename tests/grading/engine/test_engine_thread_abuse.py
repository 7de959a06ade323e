"""Abuse suite: the grader in a trainer's thread pool. verl calls a pack's reward function from worker
threads, where no SIGPROF timer can stop a check, so the checks that read a response are bounded by
design (linear string work, patterns under their own timeout, parses with size and depth limits), and
any response string — lone surrogates, NULs, megabytes — gets a grade, never an exception."""

from __future__ import annotations

import importlib
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from grading.engine import JudgeClient, JudgeConfig, grade, parse_rubric
from grading.engine.limits import BudgetExceeded, PatternBudget, cpu_budget, pattern_timeout_s
from grading.engine.models import CheckBase
from tests.support.openai_server import OpenAIServer

# The answer that held a worker thread for 51 s: a fence whose body never closes, parsed by a
# backtracking pattern (cubic in the number of lines).
FENCE = "```json\n" + "\n" * 4000 + "{" + " " * 1000
HOSTILE = {
    "fence": FENCE,
    "closed fence of newlines": "```" + "\n" * 4000 + "```",
    "lone surrogates": "42 \ud800 \udfff" * 100,
    "NULs": "42\x00" * 1000,
    "one megabyte": "4" * 1_000_000,
    "deep nesting": "[" * 100_000,
    "megabyte of words": "word 42, " * 120_000,
}
TEXT_CHECKS = [
    {"id": "json", "kind": "json_field", "points": 2, "pointer": "/total", "op": "eq", "expected": 42},
    {"id": "says", "kind": "string_match", "points": 1, "mode": "contains", "expected": "42"},
    {"id": "shouts", "kind": "regex", "points": -1, "pattern": "[A-Z]{5,}"},
    {"id": "total", "kind": "number", "points": 1, "expected": 42, "extract": r"total\D*(\d+)"},
    {"id": "first", "kind": "number", "points": 1, "expected": 42},
    {"id": "fuzzy", "kind": "text_similarity", "points": 1, "metric": "fuzzy", "reference": "the total is 42"},
    {"id": "rouge", "kind": "text_similarity", "points": 1, "metric": "rouge_l", "reference": "the total is 42"},
    {"id": "bleu", "kind": "text_similarity", "points": 1, "metric": "bleu", "reference": "the total is 42"},
]
for _check in TEXT_CHECKS:
    if _check["kind"] == "text_similarity":
        _check["threshold"] = 0.5
RUBRIC = parse_rubric({"schema": "gymwright.rubric/v1", "checks": TEXT_CHECKS})


def test_the_kinds_that_run_without_a_cpu_timer_are_exactly_those_that_read_only_text():
    """A new kind must decide: bounded by design (no timer on an in-memory target) or not."""
    from grading.engine import models

    kinds = {
        cls.model_fields["kind"].annotation.__args__[0]: cls.bounded_by_design
        for cls in vars(models).values()
        if isinstance(cls, type) and issubclass(cls, CheckBase) and cls is not CheckBase
    }
    assert {kind for kind, bounded in kinds.items() if bounded} == {
        "string_match",
        "regex",
        "number",
        "json_field",
        "text_similarity",
    }
    assert not kinds["python"] and not kinds["command"] and not kinds["table_cell"]


def test_a_hostile_response_graded_in_a_thread_pool_gets_a_grade_with_its_checks_decided():
    """Eight threads, as a trainer's reward pool: every hostile response is graded (the result() timeout is
    only a guard against a hang), and the fence fails the JSON check rather than holding the thread."""
    answers = list(HOSTILE.values()) * 2
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(grade, RUBRIC, answer=answer) for answer in answers]
        grades = [future.result(timeout=300) for future in futures]
    for name, result in zip(list(HOSTILE) * 2, grades):
        assert isinstance(result.reward, float) and 0.0 <= result.reward <= 1.0, name
        by_id = {check.id: check for check in result.checks}
        assert by_id["json"].status == "scored" and by_id["json"].score == 0.0, (name, by_id["json"].explanation)
        for check_id in ("says", "shouts", "total", "first", "fuzzy", "rouge", "bleu"):
            assert by_id[check_id].status == "scored", (name, check_id, by_id[check_id].explanation)
    fence = grades[0]
    assert "not JSON" in {c.id: c for c in fence.checks}["json"].explanation


def test_the_fenced_json_a_model_writes_is_still_read():
    """The linear fence parser reads what the pattern read: a fenced object, with or without a language."""
    for answer in ('```json\n{"total": 42}\n```', '```\n{"total": 42}\n```', '  ```js  \n\n {"total": 42} \n \n```  '):
        result = grade(RUBRIC, answer=answer)
        assert {c.id: c.score for c in result.checks}["json"] == 1.0, answer


@pytest.mark.parametrize("answer", [HOSTILE["lone surrogates"], HOSTILE["NULs"], "\ud83d\ude00 42"])
def test_unstorable_characters_reach_the_judge_and_the_grade_escaped(answer):
    """A lone surrogate made the judge request (and any report of the grade) fail to encode as UTF-8: the
    pack's compute_score raised. The grader reads NULs and lone surrogates as their \\uXXXX escapes."""
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": "says", "kind": "string_match", "points": 1, "mode": "contains", "expected": "42"},
            {"id": "judged", "kind": "llm_judge", "points": 1, "criterion": "Says 42."},
        ],
    }
    with OpenAIServer(default=json.dumps({"met": True, "explanation": "ok"})) as server:
        judge = JudgeClient(JudgeConfig(base_url=server.base_url, model="judge", api_key="test"))
        try:
            with ThreadPoolExecutor(2) as pool:
                result = pool.submit(grade, rubric, answer=answer, judge=judge).result(timeout=120)
        finally:
            judge.close()
        sent = json.dumps(server.requests[0], ensure_ascii=False)
    assert result.complete is True and result.reward == 1.0
    json.dumps(result.to_document(), ensure_ascii=False).encode("utf-8")  # a stored or printed grade
    judged = server.requests[0]["messages"][-1]["content"]
    assert "\\u0000" in judged or "\\ud800" in judged or "\\ud83d\\ude00" in judged
    sent.encode("utf-8")


def test_the_cpu_budget_never_stops_an_import_halfway(tmp_path, monkeypatch):
    """The main thread's CPU timer once fired inside the import system, between a module's import lock being
    taken and the `with` that gives it back: the lock stayed held, and the first import of that module from a
    trainer's worker threads waited for ever. An import that outlasts the budget now ends whole, the check is
    stopped right after it, and another thread imports the module at once."""
    module = "gw_budget_slow_import"
    (tmp_path / f"{module}.py").write_text(
        "import time\nspin_until = time.process_time() + 0.5\n"
        "while time.process_time() < spin_until:\n    pass\nIMPORTED_WHOLE = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    reached = []
    with pytest.raises(BudgetExceeded):
        with cpu_budget(0.05):
            importlib.import_module(module)
            reached.append("after the import")
            while True:  # the check goes on spending: the timer stops it here
                pass
    assert reached == ["after the import"]
    assert sys.modules[module].IMPORTED_WHOLE is True
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(importlib.import_module, module).result(timeout=60).IMPORTED_WHOLE is True
    del sys.modules[module]


def test_a_check_gives_back_the_pattern_budget_it_ran_under_even_when_it_raises():
    outer = pattern_timeout_s()
    with pytest.raises(RuntimeError), PatternBudget(0.25):
        assert pattern_timeout_s() == 0.25
        with PatternBudget(0.125):
            assert pattern_timeout_s() == 0.125
        assert pattern_timeout_s() == 0.25
        raise RuntimeError("the check's surprise")
    assert pattern_timeout_s() == outer
