"""What grading a task's example answers adds to a save (issue 11, example answers).
Run: .venv/bin/python bench/bench_example_answers.py [--examples 10] [--runs 5]

A deterministic rubric's examples are graded while the version is saved, in a bounded child
process (grading.engine.isolated). Side by side in one run, interleaved so load changes hit both:
(a) one child per example (grade_in_subprocess × N, what reusing the single dry run would cost)
    against all N in one child (grade_many_in_subprocess, what a save does);
(b) one child with one example (a dry run) against one child with N (the cost per extra example).
Prints medians, the ratios and the load average. No target: informational.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading.engine.isolated import grade_in_subprocess, grade_many_in_subprocess  # noqa: E402

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.7,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 3, "expected": "42"},
        {"id": "unit", "kind": "regex", "points": 2, "pattern": r"\bmeters?\b"},
        {"id": "report", "kind": "file_content", "points": 1, "path": "out/report.md", "contains": "revenue"},
        {"id": "total", "kind": "number", "points": 1, "expected": 42, "tolerance": 0.5},
    ],
}


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        (workspace / "out").mkdir()
        (workspace / "out" / "report.md").write_text("revenue is up\n")
        items = [(f"It is 42 meters (example {index})", workspace) for index in range(args.examples)]
        per_child, batched, single = [], [], []
        for run in range(args.runs + 1):  # the first round warms the page cache
            a = timed(lambda: [grade_in_subprocess(RUBRIC, answer=answer, workspace=ws) for answer, ws in items])
            b = timed(lambda: grade_many_in_subprocess(RUBRIC, items=items))
            c = timed(lambda: grade_many_in_subprocess(RUBRIC, items=items[:1]))
            if run:
                per_child.append(a), batched.append(b), single.append(c)
    a, b, c = (statistics.median(values) for values in (per_child, batched, single))
    n = args.examples
    print(
        f"(a) {n} examples: one child each {a * 1000:.0f} ms, all in one child {b * 1000:.0f} ms "
        f"(median of {args.runs}); one-each/batched = {a / b:.2f}x"
    )
    print(
        f"(b) one child: 1 example {c * 1000:.0f} ms, {n} examples {b * 1000:.0f} ms; "
        f"{n}/1 = {b / c:.2f}x, +{(b - c) / max(n - 1, 1) * 1000:.1f} ms per extra example"
    )
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
