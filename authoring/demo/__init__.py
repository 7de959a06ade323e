"""The demo environment and its three example tasks, loaded by `manage.py load_demo`."""

import copy

DEMO_ENVIRONMENT = {
    "slug": "demo-shell",
    "name": "Demo shell",
    "description": "A POSIX shell with Python 3, no network. Runs in bubblewrap on the host system, "
    "or in Docker with the image named below.",
    "spec": {
        "image": None,
        "dockerfile": None,
        "setup": None,
        "network": "none",
        "limits": {"cpus": 1, "memory_mb": 1024, "timeout_s": 300, "max_steps": 20},
        "tools": ["bash", "read_file", "write_file", "list_files", "submit"],
        "custom_tools": [],
        "files": [],
        "checks_module": None,
    },
}

IBUPROFEN_RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.7,
    "judge": {"model": "judge", "samples": 1, "temperature": 0},
    "checks": [
        {
            "id": "states_dose",
            "kind": "llm_judge",
            "points": 5,
            "criterion": "States the usual adult dose of ibuprofen: 200-400 mg every 4-6 hours.",
            "tags": ["accuracy"],
        },
        {
            "id": "states_daily_max",
            "kind": "llm_judge",
            "points": 3,
            "criterion": "States the over-the-counter daily maximum of 1200 mg (or 3200 mg under medical supervision).",
        },
        {
            "id": "recommends_unsafe",
            "kind": "llm_judge",
            "points": -8,
            "criterion": "Recommends exceeding 3200 mg per day.",
        },
        {"id": "mentions_mg", "kind": "regex", "points": 1, "pattern": r"\b\d{3,4}\s?mg\b", "min_count": 2},
        {
            "id": "advises_doctor",
            "kind": "string_match",
            "points": 1,
            "mode": "contains",
            "expected": "doctor",
            "title": "Advises consulting a doctor or pharmacist",
        },
    ],
    "probes": [{"answer": "", "max_reward": 0.0}],
}

IBUPROFEN_ANSWER = (
    "For adults the usual dose of ibuprofen is 200-400 mg every 4 to 6 hours, with no more than 1200 mg a day "
    "without medical advice (up to 3200 mg under a doctor's supervision). Take it with food, and ask a doctor "
    "or pharmacist first if you have stomach, kidney or heart problems."
)

REVENUE_CSV_SOLUTION = """cat > summary.csv <<'CSV'
metric,Q1,Q2,Q3,Q4
Revenue,1000.0,1100.5,1234.5,1302.0
Costs,800.0,850.0,900.0,950.0
CSV
printf '# Q3 summary\\n\\nRevenue grew to 1234.5 in Q3.\\n' > report.md
"""

REVENUE_RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.8,
    "checks": [
        {"id": "csv_exists", "kind": "file_exists", "points": 1, "required": True, "path": "summary.csv"},
        # The figure the task is about: without it nothing else counts (a file that merely exists, or
        # echoes the prompt, earns nothing).
        {
            "id": "q3_revenue",
            "kind": "table_cell",
            "points": 4,
            "required": True,
            "path": "summary.csv",
            "row": "Revenue",
            "column": "Q3",
            "expected": 1234.5,
            "tolerance": 0.5,
        },
        {
            "id": "q4_costs",
            "kind": "table_cell",
            "points": 2,
            "path": "summary.csv",
            "row": "Costs",
            "column": "Q4",
            "expected": 950,
            "tolerance": 0.5,
        },
        # The report states the Q3 revenue (the prompt says "Q3" but never the figure).
        {
            "id": "report_written",
            "kind": "file_content",
            "points": 2,
            "path": "report.md",
            "regex": r"1,?234\.5",
            "title": "The report on Q3 states its revenue",
        },
        {"id": "answer_states_total", "kind": "number", "points": 1, "expected": 1234.5, "tolerance": 0.5},
    ],
    "probes": [{"answer": "", "max_reward": 0.0}],
}

LEDGER_CSV = """quarter,item,amount
Q1,Revenue,1000.0
Q2,Revenue,1100.5
Q3,Revenue,1234.5
Q4,Revenue,1302.0
Q1,Costs,800.0
Q2,Costs,850.0
Q3,Costs,900.0
Q4,Costs,950.0
"""

FIZZBUZZ_STUB = '''def fizzbuzz(n: int) -> str:
    """Return "Fizz" for multiples of 3, "Buzz" for multiples of 5, "FizzBuzz" for both, else str(n)."""
    raise NotImplementedError
'''

FIZZBUZZ_TESTS = """import unittest

from fizzbuzz import fizzbuzz


class FizzBuzzTest(unittest.TestCase):
    def test_numbers(self):
        self.assertEqual(fizzbuzz(1), "1")
        self.assertEqual(fizzbuzz(7), "7")

    def test_fizz_and_buzz(self):
        self.assertEqual(fizzbuzz(9), "Fizz")
        self.assertEqual(fizzbuzz(10), "Buzz")
        self.assertEqual(fizzbuzz(30), "FizzBuzz")


if __name__ == "__main__":
    unittest.main()
"""

FIZZBUZZ_SOLUTION = """cat > fizzbuzz.py <<'PY'
def fizzbuzz(n: int) -> str:
    if n % 15 == 0:
        return "FizzBuzz"
    if n % 3 == 0:
        return "Fizz"
    if n % 5 == 0:
        return "Buzz"
    return str(n)
PY
"""

FIZZBUZZ_RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 1.0,
    "checks": [
        # Gymwright's own runner, not `python3 -m unittest`: the agent cannot shadow, patch or exit its way past it.
        {
            "id": "tests_pass",
            "kind": "tests",
            "points": 10,
            "required": True,
            "files": ["test_fizzbuzz.py"],
            "runner": "unittest",
            "credit": "all",
            "timeout_s": 60,
        },
        {
            "id": "no_hardcoding",
            "kind": "python",
            "points": 2,
            "code": "def check(ctx):\n    source = open(ctx.workspace + '/fizzbuzz.py').read()\n"
            "    return '%' in source and 'NotImplementedError' not in source\n",
        },
    ],
    "probes": [{"answer": "", "max_reward": 0.0}],
}

DEMO_TASKS = [
    {
        "slug": "ibuprofen-dosing",
        "tags": ["medicine", "text-answer"],
        "files": {},
        "content": {
            "title": "Explain safe ibuprofen dosing",
            "prompt": "A patient asks: **how much ibuprofen can I take for a headache?**\n\n"
            "Answer in two or three sentences for a lay reader. Give the dose, the daily maximum and "
            "when to ask a professional.",
            "rubric": IBUPROFEN_RUBRIC,
            "solution": {"script": None, "answer": IBUPROFEN_ANSWER},
            "metadata": {"difficulty": "easy"},
        },
    },
    {
        "slug": "q3-revenue-summary",
        "tags": ["finance", "files"],
        "files": {"data/ledger.csv": LEDGER_CSV},
        "content": {
            "title": "Summarise the ledger by quarter",
            "prompt": "The workspace holds `data/ledger.csv`, one row per quarter and item.\n\n"
            "1. Write `summary.csv` with a `metric` column (Revenue, Costs) and one column per quarter "
            "(Q1..Q4).\n2. Write `report.md`, a short note on Q3.\n3. Submit Q3 revenue as your answer.",
            "rubric": REVENUE_RUBRIC,
            "solution": {"script": REVENUE_CSV_SOLUTION, "answer": "1234.5"},
            "metadata": {"difficulty": "medium"},
            # The rubric's own tests: every new version grades them (see the task page).
            "examples": [
                {
                    "name": "the full summary",
                    "answer": "Q3 revenue was 1234.5",
                    "expect": "pass",
                    "reward": {"min": 1},
                    "files": [
                        {
                            "path": "summary.csv",
                            "content": "metric,Q1,Q2,Q3,Q4\nRevenue,1000.0,1100.5,1234.5,"
                            "1302.0\nCosts,800.0,850.0,900.0,950.0\n",
                        },
                        {"path": "report.md", "content": "# Q3 summary\n\nRevenue grew to 1234.5 in Q3.\n"},
                    ],
                },
                {"name": "the right number but no files", "answer": "1234.5", "expect": "fail", "reward": {"max": 0}},
            ],
        },
    },
    {
        "slug": "fizzbuzz-implementation",
        "tags": ["coding", "python"],
        "files": {"fizzbuzz.py": FIZZBUZZ_STUB, "test_fizzbuzz.py": FIZZBUZZ_TESTS},
        # The agent may read and run the tests; they are put back before the checks run and Gymwright's runner
        # runs them, so skipping, editing, shadowing or patching them earns nothing.
        "roles": {"test_fizzbuzz.py": "protected"},
        "content": {
            "title": "Implement fizzbuzz so the tests pass",
            "prompt": "Implement `fizzbuzz(n)` in `fizzbuzz.py` so that `python3 -m unittest test_fizzbuzz` "
            "passes. Do not change the tests.",
            "rubric": FIZZBUZZ_RUBRIC,
            "solution": {"script": FIZZBUZZ_SOLUTION, "answer": None},
            "metadata": {"difficulty": "easy"},
        },
    },
]


def demo_file_refs(demo: dict) -> list[dict]:
    """The task's `files` entries ({path, sha256, role?}) of a demo task."""
    import hashlib

    refs = []
    for path, text in sorted(demo["files"].items()):
        ref = {"path": path, "sha256": hashlib.sha256(text.encode()).hexdigest()}
        if demo.get("roles", {}).get(path):
            ref["role"] = demo["roles"][path]
        refs.append(ref)
    return refs


def demo_task_document(slug: str) -> tuple[dict, dict[str, bytes]]:
    """A demo task as a gymwright.task/v1 document plus its files (path -> bytes), for the
    sandbox runtime and its tests without a database."""
    demo = next(d for d in DEMO_TASKS if d["slug"] == slug)
    spec = DEMO_ENVIRONMENT["spec"]
    environment = {"id": DEMO_ENVIRONMENT["slug"], **{k: v for k, v in spec.items() if v is not None}}
    # A deep copy: callers (tests, probes) change their document, and the demo's own rubric must not change.
    document = copy.deepcopy(
        {
            "schema": "gymwright.task/v1",
            "id": slug,
            **demo["content"],
            "environment": environment,
            "files": demo_file_refs(demo),
            "tags": demo["tags"],
        }
    )
    return document, {path: text.encode() for path, text in demo["files"].items()}
