"""Hostile input to the grader (issue 7 §3): what each bound costs and what it saves.

Run: .venv/bin/python bench/bench_hostile_input.py

(a) dry-run grading of a small deterministic rubric: in process vs in the limited child
    process (grading.engine.isolated) that dry runs now use: the price of isolation.
(b) the catastrophic pattern `(a+)+$` on 'a'*n+'!': Python's `re` at small n (time doubles per
    extra 'a') against the budgeted engine at n=5000, stopped at GYMWRIGHT_CHECK_CPU_S.
(c) a crafted CSV first line (',"' repeated): csv.Sniffer on the whole line vs on the bounded sample.
(d) an XLSX bomb (4 GB declared): refused from its directory vs the work an inflate would need.
All figures in one run, with the load average printed (2 cores shared by several engineers).
"""

from __future__ import annotations

import csv
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading.engine import grade, parse_rubric  # noqa: E402
from grading.engine.isolated import grade_in_subprocess  # noqa: E402
from grading.engine.limits import GradeLimits  # noqa: E402

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 3, "expected": "42"},
        {"id": "unit", "kind": "regex", "points": 2, "pattern": r"\bmeters?\b"},
        {"id": "num", "kind": "number", "points": 1, "expected": 42},
        {
            "id": "cell",
            "kind": "table_cell",
            "points": 1,
            "path": "t.csv",
            "row": "Revenue",
            "column": "Q3",
            "expected": 7,
        },
    ],
}


def timed(function, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        (workspace / "t.csv").write_text("label,Q3\nRevenue,7\n")
        rubric = parse_rubric(RUBRIC)
        answer = "It is 42 meters."
        assert grade(rubric, answer=answer, workspace=workspace).reward == 1.0
        inside = timed(lambda: grade(rubric, answer=answer, workspace=workspace), 20)
        child = timed(lambda: grade_in_subprocess(RUBRIC, answer=answer, workspace=workspace), 5)
        print(
            f"(a) dry-run grade, median: in process {inside * 1000:.1f} ms, limited child process "
            f"{child * 1000:.0f} ms (x{child / inside:.0f})"
        )

    growth = []
    for n in (18, 20, 22):
        started = time.perf_counter()
        re.search(r"(a+)+$", "a" * n + "!")
        growth.append((n, time.perf_counter() - started))
    per_char = (growth[-1][1] / growth[0][1]) ** (1 / (growth[-1][0] - growth[0][0]))
    limits = GradeLimits.from_env()
    started = time.perf_counter()
    result = grade(
        parse_rubric(
            {
                "schema": "gymwright.rubric/v1",
                "checks": [{"id": "evil", "kind": "regex", "points": 1, "pattern": r"(a+)+$"}],
            }
        ),
        answer="a" * 5000 + "!",
    )
    stopped = time.perf_counter() - started
    print(
        f"(b) re at n={growth[0][0]}: {growth[0][1] * 1000:.0f} ms, n={growth[-1][0]}: {growth[-1][1] * 1000:.0f} ms "
        f"(x{per_char:.2f} per 'a': n=5000 never ends); budgeted engine at n=5000: {result.checks[0].status} after "
        f"{stopped:.2f} s (budget {limits.check_cpu_s:g} s CPU)"
    )

    line = ',"' * 10_000  # 20 kB; the 60 kB line takes minutes
    started = time.perf_counter()
    try:
        csv.Sniffer().sniff(line)
    except csv.Error:
        pass
    whole = time.perf_counter() - started
    started = time.perf_counter()
    try:
        csv.Sniffer().sniff(line[: limits.csv_sniff_bytes])
    except csv.Error:
        pass
    bounded = time.perf_counter() - started
    print(
        f"(c) csv.Sniffer on a 20 kB crafted line: whole {whole:.2f} s, bounded to {limits.csv_sniff_bytes} bytes "
        f"{bounded * 1000:.1f} ms (x{whole / bounded:.0f})"
    )

    from tests.grading.engine.test_engine_abuse import _bomb

    started = time.perf_counter()
    data = _bomb(4000)
    built = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "m.xlsx").write_bytes(data)
        started = time.perf_counter()
        result = grade(
            parse_rubric(
                {
                    "schema": "gymwright.rubric/v1",
                    "checks": [
                        {
                            "id": "q3",
                            "kind": "table_cell",
                            "points": 1,
                            "path": "m.xlsx",
                            "row": "Revenue",
                            "column": "Q3",
                            "expected": 5,
                        }
                    ],
                }
            ),
            answer="",
            workspace=tmp,
        )
        refused = time.perf_counter() - started
    import zlib

    chunk = b" " * (16 * 1024 * 1024)
    packed = zlib.compress(chunk, 9)
    started = time.perf_counter()
    zlib.decompress(packed)
    inflate_per_mb = (time.perf_counter() - started) / 16
    print(
        f"(d) XLSX bomb of {len(data) / 1024:.0f} kB declaring 4000 MB: {result.checks[0].status} in "
        f"{refused * 1000:.0f} ms; inflating it would take ~{inflate_per_mb * 4000:.1f} s of CPU and 4 GB "
        f"(built in {built:.1f} s)"
    )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
