"""The rubric copilot (issue 32 §5): share of drafted checks that survive their tests, and time to a draft.
Run: .venv/bin/python bench/bench_copilot.py [--delay 0.3]   (a throwaway SQLite database, or DATABASE_URL
if set — then it creates and drops its own test database)

The model is the scripted OpenAI-protocol server (tests/support/openai_server.py) answering every request
after `--delay` seconds: the copilot's draft, split and degraded-answer requests and the judge's verdicts.
Four small reference tasks (a rope length, a capital, a JSON sum, and one of 20 checks for the timing):
prints, per task, drafted / survived, and the time to a draft of 20 checks with the tests run concurrently
(the default bounds) against one at a time (GYMWRIGHT_COPILOT_CONCURRENCY=1, judge concurrency 1): the
ratio, and the load average. Target: under 30 s for 20 checks with a 300 ms model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gymwright.settings")

import run_scratch

os.environ.setdefault("GYMWRIGHT_DATA_DIR", str(run_scratch.folder("copilot")))

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.test.runner import DiscoverRunner  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from tests.support import copilot_model as rope  # noqa: E402
from tests.support.copilot_model import CopilotScript  # noqa: E402
from tests.support.openai_server import OpenAIServer  # noqa: E402


def task_capital():
    prompt = "What is the capital of Australia? Answer in one sentence and give the year it became the capital."
    reference = "The capital of Australia is Canberra, which became the capital in 1913."
    draft = {
        "checks": [
            {"weight": "essential", "check": {"id": "canberra", "kind": "string_match", "expected": "Canberra"}},
            {
                "weight": "important",
                "check": {"id": "year", "kind": "number", "expected": 1913, "extract": r"in (\d{4})"},
            },
            {"weight": "optional", "check": {"id": "country", "kind": "string_match", "expected": "Australia"}},
            {"weight": "pitfall", "check": {"id": "sydney", "kind": "string_match", "expected": "Sydney"}},
            {
                "weight": "optional",
                "check": {"id": "one_sentence", "kind": "llm_judge", "criterion": "Answers in one sentence"},
            },
        ]
    }
    degraded = {
        "answers": [
            {
                "name": "sydney",
                "answer": "The capital of Australia is Sydney, since 1901.",
                "should_fail": ["canberra", "year", "sydney"],
            },
            {"name": "no year", "answer": "The capital of Australia is Canberra.", "should_fail": ["year"]},
        ]
    }
    return prompt, reference, CopilotScript(draft=draft, degraded=degraded, keywords={"Answers in one sentence": None})


def task_json():
    prompt = "Return a JSON object with the sum of 2 and 3 under the key total."
    reference = '{"total": 5}'
    compound = "Returns a single JSON object and uses the key named total"
    draft = {
        "checks": [
            {"weight": "essential", "check": {"id": "total", "kind": "json_field", "pointer": "/total", "expected": 5}},
            {"weight": "important", "check": {"id": "quoted_key", "kind": "regex", "pattern": '"total"'}},
            {"weight": "important", "check": {"id": "shape", "kind": "llm_judge", "criterion": compound}},
        ]
    }
    degraded = {
        "answers": [
            {"name": "wrong sum", "answer": '{"total": 6}', "should_fail": ["total"]},
            {"name": "prose", "answer": "The total is 5.", "should_fail": ["total", "quoted_key", "shape_1"]},
        ]
    }
    splits = {compound: ["Returns a single JSON object", "Uses the key named total"]}
    keywords = {"Returns a single JSON object": "{", "Uses the key named total": '"total"'}
    return prompt, reference, CopilotScript(draft=draft, degraded=degraded, splits=splits, keywords=keywords)


def task_twenty():
    """20 drafted checks (10 strings, 8 judged, 2 compound judged that split): the timing task."""
    facts = [f"fact{n} value {n * 7}" for n in range(18)]
    prompt = "List the eighteen facts of the report, each with its value."
    reference = "\n".join(facts)
    checks = [
        {"weight": "important", "check": {"id": f"s{n}", "kind": "string_match", "expected": facts[n]}}
        for n in range(10)
    ]
    keywords, splits = {}, {}
    for n in range(10, 18):
        criterion = f"Reports fact{n} with its value"
        keywords[criterion] = facts[n]
        checks.append({"weight": "important", "check": {"id": f"j{n}", "kind": "llm_judge", "criterion": criterion}})
    for n in (0, 1):
        criterion = f"Reports fact{n} with its value and also reports fact{n + 2} with its value"
        parts = [f"Reports fact{n} with its value", f"Reports fact{n + 2} with its value"]
        splits[criterion] = parts
        keywords.update({parts[0]: facts[n], parts[1]: facts[n + 2]})
        checks.append({"weight": "essential", "check": {"id": f"c{n}", "kind": "llm_judge", "criterion": criterion}})
    degraded = {
        "answers": [
            {"name": "half", "answer": "\n".join(facts[:9]), "should_fail": [f"s{n}" for n in range(9, 10)]},
            {
                "name": "wrong values",
                "answer": "\n".join(f"fact{n} value {n * 8}" for n in range(18)),
                "should_fail": [],
            },
            {"name": "none", "answer": "The report has facts.", "should_fail": []},
        ]
    }
    return (
        prompt,
        reference,
        CopilotScript(draft={"checks": checks}, degraded=degraded, splits=splits, keywords=keywords),
    )


# Hand-written rubrics (what an expert would write) and example answers for the agreement figure: each answer is
# graded by the hand-written rubric and by the drafted one (its pre-selected checks), and the verdicts compared.
HANDWRITTEN = {
    "capital": {
        "checks": [
            {"id": "h_canberra", "kind": "string_match", "points": 3, "expected": "Canberra"},
            {"id": "h_year", "kind": "regex", "points": 2, "pattern": r"\b1913\b"},
            {"id": "h_not_sydney", "kind": "string_match", "points": -2, "expected": "Sydney is the capital"},
        ],
        "answers": [
            "The capital of Australia is Canberra, which became the capital in 1913.",
            "Canberra has been Australia's capital since 1913.",
            "The capital of Australia is Canberra.",
            "The capital of Australia is Sydney, since 1901.",
            "Australia's capital? Melbourne, from 1913.",
            "",
            "What is the capital of Australia?",
        ],
    },
    "json-sum": {
        "checks": [
            {"id": "h_total", "kind": "json_field", "points": 3, "pointer": "/total", "expected": 5},
            {"id": "h_object", "kind": "regex", "points": 1, "pattern": r"^\s*\{[\s\S]*\}\s*$"},
        ],
        "answers": ['{"total": 5}', '{"total": 6}', "The total is 5.", '{"sum": 5}', '{"total": 5, "note": "2+3"}', ""],
    },
}


def _agreement(task_name: str, suggestions: list[dict], judge) -> tuple[int, int]:
    """(answers both rubrics pass or both fail, answers) at pass threshold 0.5, the drafted rubric being the
    pre-selected suggestions with the points the copilot gave them."""
    from grading.engine import grade

    hand = HANDWRITTEN[task_name]
    drafted = [s["check"] for s in suggestions if s["preselected"]]
    rubrics = [
        {"schema": "gymwright.rubric/v1", "pass_threshold": 0.5, "checks": hand["checks"]},
        {"schema": "gymwright.rubric/v1", "pass_threshold": 0.5, "checks": drafted},
    ]
    agree = 0
    for answer in hand["answers"]:
        verdicts = [grade(rubric, answer=answer, judge=judge).reward >= 0.5 for rubric in rubrics]
        agree += verdicts[0] == verdicts[1]
        if verdicts[0] != verdicts[1]:
            print(f"            disagree on {answer!r}: hand-written {'passes' if verdicts[0] else 'fails'} it")
    return agree, len(hand["answers"])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=0.3, help="seconds the model takes per request")
    args = parser.parse_args()
    setup_test_environment()
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = run_scratch.database_name(
        "/" + settings.DATABASES["default"]["NAME"], "copilot"
    )
    settings.OPENAI_BASE_URL = ""
    settings.JUDGE_CACHE_DIR = None  # every run asks the model: a cached verdict would not be timed
    runner = DiscoverRunner(verbosity=0, interactive=False)
    old_config = runner.setup_databases()
    print(f"load average before: {os.getloadavg()}")
    try:
        from django.contrib.auth.models import Group, User

        from authoring import services as authoring_services
        from grading.models import ModelEndpoint
        from grading.services import rubric_draft

        user = User.objects.create_user("bench")
        user.groups.add(Group.objects.get_or_create(name="author")[0])
        environment = authoring_services.environment_create(slug="bench", name="Bench", author=user, spec={})
        tasks = {
            "rope": (rope.PROMPT, rope.REFERENCE, rope.rope_script()),
            "capital": task_capital(),
            "json-sum": task_json(),
            "twenty": task_twenty(),
        }
        drafted = survived = 0
        timings = {}
        agreements: dict[str, tuple[int, int]] = {}
        for name, (prompt, reference, script) in tasks.items():
            task = authoring_services.task_create(
                slug=f"bench-{name}",
                environment=environment,
                author=user,
                content={
                    "title": name,
                    "prompt": prompt,
                    "rubric": {
                        "schema": "gymwright.rubric/v1",
                        "checks": [{"id": "x", "kind": "string_match", "points": 1, "expected": "x"}],
                    },
                    "solution": {"script": None, "answer": reference},
                },
            )
            with OpenAIServer(handler=script, delay=args.delay) as server:
                ModelEndpoint.objects.all().delete()
                ModelEndpoint.objects.create(
                    name="judge",
                    role="judge",
                    base_url=server.base_url,
                    model="bench",
                    is_default=True,
                    response_format="none",
                )
                modes = [("concurrent", settings.COPILOT_CONCURRENCY, settings.JUDGE_CONCURRENCY)]
                if name == "twenty":
                    modes.append(("one at a time", 1, 1))
                for mode, copilot_concurrency, judge_concurrency in modes:
                    saved = settings.COPILOT_CONCURRENCY, settings.JUDGE_CONCURRENCY, settings.COPILOT_DEADLINE_S
                    settings.COPILOT_CONCURRENCY, settings.JUDGE_CONCURRENCY = copilot_concurrency, judge_concurrency
                    if mode != "concurrent":  # timed whole: the draft's deadline would cut the last calls short
                        settings.COPILOT_DEADLINE_S = 600
                    server.reset()
                    started = time.perf_counter()
                    result = rubric_draft(task=task, user=user, count=20)
                    elapsed = time.perf_counter() - started
                    settings.COPILOT_CONCURRENCY, settings.JUDGE_CONCURRENCY, settings.COPILOT_DEADLINE_S = saved
                    timings[(name, mode)] = (elapsed, server.calls, len(result["suggestions"]))
                    if mode == "concurrent":
                        count = len(result["suggestions"])
                        kept = result["survived"]
                        drafted, survived = drafted + count, survived + kept
                        marks = sorted({p for s in result["suggestions"] for p in s["problems"]})
                        print(
                            f"{name:<9} drafted {count:>2}, refused {len(result['refused'])}, survived {kept:>2} ({kept / count:.0%})"
                        )
                        for mark in marks[:6]:
                            print(f"            marked: {mark}")
                        if name in HANDWRITTEN:
                            from grading.endpoints import judge_client_for

                            judge = judge_client_for({}, environment=environment)
                            try:
                                agree, total = _agreement(name, result["suggestions"], judge)
                            finally:
                                judge.close()
                            agreements[name] = (agree, total)
                            print(f"            agrees with the hand-written rubric on {agree} of {total} answers")
        print(f"survived overall: {survived} / {drafted} = {survived / drafted:.0%}")
        agree, total = (sum(pair[i] for pair in agreements.values()) for i in (0, 1))
        print(
            f"agreement with hand-written rubrics (pass/fail at 0.5, pre-selected drafted checks): {agree} / {total} "
            f"answers = {agree / total:.0%} (scripted drafts: this checks the pipeline, not a real model's quality)"
        )
        fast, fast_calls, fast_checks = timings[("twenty", "concurrent")]
        slow, slow_calls, _ = timings[("twenty", "one at a time")]
        print(
            f"time to a draft of {fast_checks} checks, {args.delay * 1000:.0f} ms model: concurrent {fast:.1f} s "
            f"({fast_calls} model calls), one at a time {slow:.1f} s ({slow_calls} calls); ratio {slow / fast:.1f}x; "
            f"target < 30 s: {'met' if fast < 30 else 'MISSED'}"
        )
        print(
            json.dumps(
                {
                    "survived": survived,
                    "drafted": drafted,
                    "agreement": [agree, total],
                    "draft_20_s": round(fast, 2),
                    "sequential_s": round(slow, 2),
                }
            )
        )
    finally:
        runner.teardown_databases(old_config)
        print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
