"""Agentic tasks, a pack of them and helpers for the tests of a pack's env/ (TaskEnvironment): a
file-producing task with a custom tool and a grader-only check script, a coding task whose tests are
one protected and one grader-only file, and a text task (no env/ needed for it)."""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import sys
import tarfile
from pathlib import Path

from grading.engine import content_sha256, parse_task
from packs import archive
from tests.packs.test_standalone import TEXT_TASK, environment

SALES = b"region,amount\nnorth,10\nsouth,20\neast,30\n"
VERIFY_TOTAL = b'#!/bin/sh\ntest "$(tr -d " \\n" < total.txt)" = 60\n'
COUNT_TOOL = (
    b"import json, sys\n"
    b"args = json.load(sys.stdin)\n"
    b"lines = open('/workspace/' + args['path']).read().splitlines()\n"
    b"print(len(lines) - (1 if args.get('skip_header') else 0))\n"
)
CALC = b"def add(a, b):\n    return a - b\n"
CALC_FIXED = "def add(a, b):\n    return a + b\n"
TEST_CALC = (
    b"import unittest\n\nfrom calc import add\n\n\n"
    b"class TestAdd(unittest.TestCase):\n"
    b"    def test_small(self):\n        self.assertEqual(add(2, 3), 5)\n"
)
TEST_HIDDEN = (
    b"import unittest\n\nfrom calc import add\n\n\n"
    b"class TestHidden(unittest.TestCase):\n"
    b"    def test_negative(self):\n        self.assertEqual(add(-1, 1), 0)\n\n"
    b"    def test_large(self):\n        self.assertEqual(add(10, 5), 15)\n"
)
BLOBS = {
    hashlib.sha256(data).hexdigest(): data for data in (SALES, VERIFY_TOTAL, COUNT_TOOL, CALC, TEST_CALC, TEST_HIDDEN)
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


ALL_TOOLS = ["bash", "read_file", "write_file", "list_files", "submit"]
COUNT_ROWS = {
    "name": "count_rows",
    "description": "Count the lines of a CSV file in the workspace.",
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The file, relative to /workspace."},
            "skip_header": {"type": "boolean", "description": "Leave the header line out."},
        },
        "required": ["path"],
    },
    "command": "python3 /env/tools/count.py",
}

FILE_TASK = {
    "schema": "gymwright.task/v1",
    "id": "sum-sales",
    "version": 1,
    "title": "Sum the sales",
    "prompt": "Add up the amounts in data/sales.csv, write the total to total.txt and submit it.",
    "environment": environment(
        id="sales-desk",
        tools=ALL_TOOLS,
        custom_tools=[COUNT_ROWS],
        files=[{"path": "tools/count.py", "sha256": sha(COUNT_TOOL)}],
    ),
    "files": [
        {"path": "data/sales.csv", "sha256": sha(SALES)},
        {"path": "checks/verify.sh", "sha256": sha(VERIFY_TOTAL), "role": "grader"},
    ],
    "solution": {"script": "awk -F, 'NR > 1 { s += $2 } END { print s }' data/sales.csv > total.txt", "answer": "60"},
    "rubric": {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 0.7,
        "checks": [
            {"id": "has_total", "kind": "file_exists", "points": 1, "path": "total.txt"},
            {"id": "total_right", "kind": "command", "points": 3, "run": "sh checks/verify.sh", "timeout_s": 30},
            {"id": "says_60", "kind": "string_match", "points": 1, "mode": "contains", "expected": "60"},
        ],
    },
    "tags": ["files"],
    "metadata": {},
}

CODING_TASK = {
    "schema": "gymwright.task/v1",
    "id": "fix-add",
    "version": 1,
    "title": "Fix add",
    "prompt": "calc.py's add() is wrong. Fix it so that the tests in tests/ pass, then submit.",
    "environment": environment(id="python", tools=ALL_TOOLS),
    "files": [
        {"path": "calc.py", "sha256": sha(CALC)},
        {"path": "tests/test_calc.py", "sha256": sha(TEST_CALC), "role": "protected"},
        {"path": "tests/test_hidden.py", "sha256": sha(TEST_HIDDEN), "role": "grader"},
    ],
    "solution": {"script": "printf 'def add(a, b):\\n    return a + b\\n' > calc.py", "answer": "fixed"},
    "rubric": {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 0.7,
        "checks": [
            {
                "id": "tests_pass",
                "kind": "tests",
                "points": 3,
                "files": ["tests/test_calc.py", "tests/test_hidden.py"],
                "runner": "unittest",
                "credit": "per_test",
                "timeout_s": 60,
            },
        ],
    },
    "tags": ["code"],
    "metadata": {},
}

AGENTIC = (FILE_TASK, CODING_TASK)
_counter = itertools.count()


def build_pack_dir(tmp: Path, documents=(TEXT_TASK, *AGENTIC), *, slug: str = "envs", blobs=None) -> Path:
    """Build a pack of `documents` (every task in the train split) and unpack it: the pack's folder."""
    items = sorted(
        (archive.TaskItem(parse_task(doc).to_document() | doc, content_sha256(doc)) for doc in documents),
        key=lambda item: item.document["id"],
    )
    archive.build_pack(
        out=tmp / f"{slug}.tar.gz",
        tasks=items,
        read_blob=(blobs or BLOBS).__getitem__,
        scratch_dir=tmp / f"scratch-{slug}",
        info=archive.PackInfo(slug=slug, name=slug, version="1.0.0", test_ratio=0.0),
    )
    with tarfile.open(tmp / f"{slug}.tar.gz") as tar:
        tar.extractall(tmp / f"out-{slug}", filter="data")
    return tmp / f"out-{slug}" / f"{slug}-1.0.0"


def load_env(pack_dir: Path):
    """The pack's env package, imported from its folder under a name of its own (as `import env` does
    from inside the pack, without clashing with another pack's)."""
    name = f"gw_pack_env_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(
        name, pack_dir / "env" / "__init__.py", submodule_search_locations=[str(pack_dir / "env")]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def play(env, policy, task_id: str) -> dict:
    """Drive `env` (a TaskEnvironment) with a runtime policy (oracle, nop, probe, hack) the way a trainer
    does, one tool call at a time through `call_tool`, and grade it: the grade document."""
    prompt = env.reset(task_id=task_id)
    messages = [{"role": "system", "content": env.system_prompt}, {"role": "user", "content": prompt}]
    tools = env.tool_schemas()
    for _ in range(200):
        message = policy.next_turn(messages, tools).message
        calls = message.get("tool_calls") or []
        messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
        if not calls:
            return env.grade(answer=message.get("content") or "")
        for call in calls:
            output = env.call_tool(call["function"]["name"], call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
        if env.stop_reason is not None:
            break
    return env.grade()
