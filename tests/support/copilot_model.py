"""A scripted model for the rubric copilot, served by `OpenAIServer` (tests and bench/bench_copilot.py).

One handler answers the copilot's three requests (told apart by the first line of their system message:
the draft, the degraded answers, the split of a compound criterion) and the judge's: a judge verdict is
"met" when the graded text contains the keyword the script gives the criterion. Replies are the JSON a
real model would write; a test replaces one of them (`replies`) to send something hostile.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from grading.engine.copilot import DEGRADE_SYSTEM, DRAFT_SYSTEM, SPLIT_SYSTEM

DRAFT, DEGRADE, SPLIT, JUDGE = "draft", "degrade", "split", "judge"


def request_kind(body: dict) -> str:
    system = body["messages"][0]["content"]
    for kind, prompt in ((DRAFT, DRAFT_SYSTEM), (DEGRADE, DEGRADE_SYSTEM), (SPLIT, SPLIT_SYSTEM)):
        if system.startswith(prompt.split("\n", 1)[0]):
            return kind
    return JUDGE


def judge_parts(body: dict) -> tuple[str, str]:
    """(criterion, graded text) of a judge request."""
    user = body["messages"][-1]["content"]
    criterion = user.split("Criterion:\n", 1)[1].split("\n\n", 1)[0]
    text = re.search(r"<answer>\n(.*)\n</answer>", user, re.DOTALL)
    return criterion, text.group(1) if text else ""


class CopilotScript:
    """The handler: `replies[kind]` is a str or a callable(body) -> str; `keywords` maps a criterion to
    the text whose presence makes the judge say "met" (None: always met)."""

    def __init__(self, *, draft, degraded, splits: dict[str, list[str]] | None = None, keywords=None):
        self.replies: dict[str, str | Callable] = {
            DRAFT: json.dumps(draft) if not isinstance(draft, str) else draft,
            DEGRADE: json.dumps(degraded) if not isinstance(degraded, str) else degraded,
        }
        self.splits = splits or {}
        self.keywords = keywords or {}
        self.seen: dict[str, int] = {}

    def __call__(self, body: dict) -> str:
        kind = request_kind(body)
        self.seen[kind] = self.seen.get(kind, 0) + 1
        if kind in self.replies:
            reply = self.replies[kind]
            return reply(body) if callable(reply) else reply
        if kind == SPLIT:
            criterion = body["messages"][-1]["content"].split("<criterion>\n", 1)[1].rsplit("\n</criterion>", 1)[0]
            return json.dumps({"parts": self.splits.get(criterion, [criterion])})
        criterion, text = judge_parts(body)
        keyword = self.keywords.get(criterion)
        met = keyword is None or keyword in text
        return json.dumps({"met": met, "explanation": f"{'has' if met else 'lacks'} {keyword!r}"})


# The worked task the tests and the bench share: a rope 7 times a 6 m rope.
PROMPT = (
    "A rope is 6 m long and a second rope is 7 times as long. How long is the second rope, in meters? Show your steps."
)
REFERENCE = "Step 1: 7 × 6 = 42.\nThe second rope is 42 meters long."
COMPOUND = "Shows the multiplication step and states the final length in meters"
DRAFT_REPLY = {
    "checks": [
        {
            "weight": "essential",
            "rationale": "The length is the answer.",
            "check": {"id": "length_42", "kind": "number", "expected": 42, "extract": r"(\d+) meters"},
        },
        {
            "weight": "important",
            "rationale": "The unit is asked for.",
            "check": {"id": "says_meters", "kind": "string_match", "expected": "meters"},
        },
        {
            "weight": "optional",
            "rationale": "Tone.",
            "check": {"id": "polite", "kind": "llm_judge", "criterion": "The answer is polite"},
        },
        {
            "weight": "essential",
            "rationale": "Working and result.",
            "check": {"id": "shows_work", "kind": "llm_judge", "criterion": COMPOUND},
        },
        {
            "weight": "pitfall",
            "points": 4,
            "rationale": "The classic slip: 6 x 8.",
            "check": {"id": "claims_48", "kind": "llm_judge", "criterion": "Claims the second rope is 48 meters"},
        },
        {"weight": "important", "rationale": "bad", "check": {"id": "bad_regex", "kind": "regex", "pattern": "("}},
        {"weight": "important", "rationale": "code", "check": {"id": "code", "kind": "python", "code": "x"}},
    ]
}
SPLITS = {COMPOUND: ["Shows the multiplication step", "States the final length in meters"]}
KEYWORDS = {
    "The answer is polite": None,
    "Shows the multiplication step": "Step",
    "States the final length in meters": "meters long",
    "Claims the second rope is 48 meters": "48",
}
DEGRADED_REPLY = {
    "answers": [
        {
            "name": "wrong number",
            "flaw": "6 x 8 instead of 6 x 7",
            "answer": "Step 1: 8 × 6 = 48.\nThe second rope is 48 meters long.",
            "should_fail": ["length_42", "claims_48"],
        },
        {
            "name": "missing steps",
            "flaw": "no working",
            "answer": "The second rope is 42 meters long.",
            "should_fail": ["shows_work_1"],
        },
    ]
}


def rope_script() -> CopilotScript:
    return CopilotScript(draft=DRAFT_REPLY, degraded=DEGRADED_REPLY, splits=SPLITS, keywords=KEYWORDS)
