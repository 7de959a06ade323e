"""Benchmark of the rubric engine (issue 3). Run: .venv/bin/python bench/bench_engine.py

(a) a 200-check deterministic rubric on a 100 kB answer: median grade time over
    50 runs, against a baseline measured in the same run — a bare loop doing the
    same string/regex/number/similarity operations with no engine around them.
    Target: ≤ 20 ms median.
(c) a training loop's case: a ~2 KB answer against 10 checks (string_match, regex, number, fuzzy
    text_similarity; one a penalty), where the literal prefilter skips little: median CPU per grade over
    batches, against the same bare loop. Goal (the integrity issue's): within 3× of the loop. The pack's own
    `compute_score` (task document read and all) on the same kind of case is bench_reward_fn.py's.
(b) 100 llm_judge checks against the local OpenAI-protocol test server answering
    after 300 ms, judge concurrency 16: wall time (target ≤ 3 s) against the
    ideal 100/16 × 0.3 s, then a re-grade of the same answer (target: 0 calls).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading.engine import (  # noqa: E402
    JudgeClient,
    JudgeConfig,
    grade,
    parse_rubric,
    similarity,
)
from grading.engine.checks import find_number  # noqa: E402

WORDS = (
    "revenue cost margin quarter forecast ledger audit invoice total growth risk model "
    "assumption cash flow balance sheet equity debt interest tax region segment"
).split()


def make_answer(size: int = 100_000, seed: int = 7) -> str:
    rng = random.Random(seed)
    parts = []
    length = 0
    while length < size:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))
        if rng.random() < 0.2:
            sentence += f" total: {rng.randint(1, 9)},{rng.randint(100, 999)}.{rng.randint(0, 9)}"
        sentence = sentence.capitalize() + ".\n"
        parts.append(sentence)
        length += len(sentence)
    parts.insert(len(parts) // 2, "Final revenue: 1,234.5 (Q3). Margin 25%.\n")
    return "".join(parts)[:size]


def make_rubric() -> dict:
    """200 checks: 70 string_match, 60 regex, 30 number, 10 text_similarity, 10 groups of 3 (30 children)."""
    checks = []
    rng = random.Random(3)
    for i in range(70):
        word = rng.choice(WORDS) if i % 2 == 0 else f"absent{i}"
        checks.append(
            {
                "id": f"s{i}",
                "kind": "string_match",
                "points": rng.choice([1, 2, 3, -1]),
                "mode": rng.choice(["contains", "not_contains"]),
                "expected": word,
            }
        )
    for i in range(60):
        pattern = rf"\b{rng.choice(WORDS)}\s+{rng.choice(WORDS)}\b" if i % 2 == 0 else rf"\bnever{i}\w*\b"
        checks.append(
            {"id": f"r{i}", "kind": "regex", "points": 1, "pattern": pattern, "flags": "i" if i % 3 == 0 else ""}
        )
    for i in range(30):
        extract = r"Final revenue: ([\d,.]+)" if i % 2 == 0 else None
        check = {"id": f"n{i}", "kind": "number", "points": 2, "expected": 1234.5, "tolerance": 0.5}
        if extract:
            check["extract"] = extract
        checks.append(check)
    for i in range(10):
        checks.append(
            {
                "id": f"t{i}",
                "kind": "text_similarity",
                "points": 1,
                "metric": ["fuzzy", "rouge_l", "bleu"][i % 3],
                "reference": "revenue grew in the third quarter while cost and margin held",
                "threshold": 0.05,
            }
        )
    for i in range(10):
        children = [
            {"id": f"g{i}_{j}", "kind": "string_match", "points": 1, "expected": rng.choice(WORDS)} for j in range(3)
        ]
        checks.append(
            {
                "id": f"g{i}",
                "kind": "group",
                "points": 3,
                "aggregate": ["all", "any", "mean", "min"][i % 4],
                "checks": children,
            }
        )
    return {"schema": "gymwright.rubric/v1", "checks": checks}


def baseline(rubric, answer: str) -> int:
    """The same operations as the rubric, as a bare loop (no results, explanations or scoring)."""
    met = 0
    folded = re.sub(r"\s+", " ", answer).strip().casefold()
    tokens = similarity.tokens(answer)
    for check in rubric.iter_checks():
        kind = check.kind
        if kind == "string_match":
            met += check.expected.casefold() in folded
        elif kind == "regex":
            met += re.compile(check.pattern, re.IGNORECASE if check.flags else 0).search(answer) is not None
        elif kind == "number":
            text = answer
            if check.extract:
                found = re.compile(check.extract).search(answer)
                text = found.group(1) if found else ""
            parsed = find_number(text)
            met += parsed is not None and abs(parsed[0] - check.expected) <= check.tolerance
        elif kind == "text_similarity":
            if check.metric == "fuzzy":
                met += similarity.fuzzy(answer, check.reference) >= check.threshold
            else:
                metric = similarity.rouge_l if check.metric == "rouge_l" else similarity.bleu
                met += metric(tokens, similarity.tokens(check.reference)) >= check.threshold
    return met


def median_ms(function, runs: int) -> tuple[float, float]:
    """(median wall ms, median CPU ms of this process) — CPU time is steadier on a shared, busy machine."""
    wall, cpu = [], []
    for _ in range(runs):
        started, started_cpu = time.perf_counter(), time.process_time()
        function()
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def bench_deterministic(runs: int) -> list[tuple[str, str]]:
    answer = make_answer()
    rubric = parse_rubric(make_rubric())
    total = sum(1 for _ in rubric.iter_checks())
    grade(rubric, answer=answer)  # warm-up: imports, caches
    baseline(rubric, answer)
    engine_ms, engine_cpu = median_ms(lambda: grade(rubric, answer=answer), runs)
    base_ms, base_cpu = median_ms(lambda: baseline(rubric, answer), runs)
    result = grade(rubric, answer=answer)
    return [
        ("(a) checks in rubric / answer size", f"{total} / {len(answer.encode()) // 1000} kB"),
        (f"(a) engine grade, median of {runs}", f"{engine_ms:.2f} ms wall, {engine_cpu:.2f} ms CPU (target ≤ 20 ms)"),
        (f"(a) bare-loop baseline, median of {runs}", f"{base_ms:.2f} ms wall, {base_cpu:.2f} ms CPU"),
        ("(a) engine / baseline", f"{engine_ms / base_ms:.2f}× wall, {engine_cpu / base_cpu:.2f}× CPU"),
        ("(a) reward (sanity)", f"{result.reward:.3f}, complete={result.complete}"),
    ]


def make_small_rubric() -> dict:
    """10 checks a training loop's rubric has: 3 string_match (one a penalty), 3 regex, 2 number, 2 text_similarity."""
    checks = [
        {"id": "s0", "kind": "string_match", "points": 2, "expected": "revenue"},
        {"id": "s1", "kind": "string_match", "points": 1, "mode": "not_contains", "expected": "absent1"},
        {"id": "s2", "kind": "string_match", "points": -1, "expected": "as an ai"},
        {"id": "r0", "kind": "regex", "points": 1, "pattern": r"\bcost\s+\w+\b", "flags": "i"},
        {"id": "r1", "kind": "regex", "points": 1, "pattern": r"\b(?:margin|growth)\b"},
        {"id": "r2", "kind": "regex", "points": 1, "pattern": r"total: \d,\d{3}"},
        {
            "id": "n0",
            "kind": "number",
            "points": 2,
            "expected": 1234.5,
            "tolerance": 0.5,
            "extract": r"Final revenue: ([\d,.]+)",
        },
        {"id": "n1", "kind": "number", "points": 1, "expected": 25, "tolerance": 0.5, "extract": r"Margin (\d+)%"},
        {
            "id": "t0",
            "kind": "text_similarity",
            "points": 1,
            "metric": "fuzzy",
            "reference": "revenue grew in the third quarter while cost and margin held",
            "threshold": 0.05,
        },
        {
            "id": "t1",
            "kind": "text_similarity",
            "points": 1,
            "metric": "rouge_l",
            "reference": "revenue grew in the third quarter while cost and margin held",
            "threshold": 0.05,
        },
    ]
    return {"schema": "gymwright.rubric/v1", "checks": checks}


def bench_small(batches: int = 15, per_batch: int = 200) -> list[tuple[str, str]]:
    answer = make_answer(2_000, seed=11)
    answer = answer[:1900] + "\nFinal revenue: 1,234.5 (Q3). Margin 25%.\n"
    rubric = parse_rubric(make_small_rubric())
    grade(rubric, answer=answer)
    baseline(rubric, answer)

    def per_call_cpu_us(function) -> float:
        times = []
        for _ in range(batches):
            started = time.process_time()
            for _ in range(per_batch):
                function()
            times.append((time.process_time() - started) * 1e6 / per_batch)
        return statistics.median(times)

    # alternating, so a change in the machine's load falls on both
    engine, loop = [], []
    for _ in range(3):
        engine.append(per_call_cpu_us(lambda: grade(rubric, answer=answer)))
        loop.append(per_call_cpu_us(lambda: baseline(rubric, answer)))
    engine_us, loop_us = statistics.median(engine), statistics.median(loop)
    result = grade(rubric, answer=answer)
    ratio = engine_us / loop_us
    return [
        ("(c) checks in rubric / answer size", f"10 / {len(answer.encode())} bytes"),
        ("(c) engine grade, CPU per call", f"{engine_us:.0f} µs"),
        ("(c) bare-loop baseline, CPU per call", f"{loop_us:.0f} µs"),
        ("(c) engine / baseline", f"{ratio:.2f}× CPU (goal ≤ 3×: {'met' if ratio <= 3 else 'not met'})"),
        ("(c) reward (sanity)", f"{result.reward:.3f}, complete={result.complete}"),
    ]


def _serve(delay_s: float, connection) -> None:
    """Child process: the test server (so its threads do not share the engine's GIL, as a real server would not)."""
    from tests.support.openai_server import OpenAIServer

    with OpenAIServer(default='{"met": true, "explanation": "ok"}', delay=delay_s) as server:
        connection.send(server.base_url)
        connection.recv()  # until the parent is done
        connection.send({"calls": server.calls, "peak": server.max_in_flight})


def bench_judge(checks: int, delay_s: float, concurrency: int) -> list[tuple[str, str]]:
    import multiprocessing

    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": f"j{i}", "kind": "llm_judge", "points": 1, "criterion": f"Criterion number {i}."}
                for i in range(checks)
            ],
        }
    )
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(delay_s, child), daemon=True)
    server.start()
    try:
        base_url = parent.recv()
        config = JudgeConfig(
            base_url=base_url, model="judge", api_key="bench", concurrency=concurrency, timeout_s=30, max_retries=0
        )
        with JudgeClient(config) as judge:
            judge._openai()  # warm-up: importing the openai SDK (~1 s on a busy machine) is a once-per-process cost
            started = time.perf_counter()
            first = grade(rubric, answer="An answer to judge.", judge=judge)
            first_s = time.perf_counter() - started
            first_calls = judge.calls
            started = time.perf_counter()
            second = grade(rubric, answer="An answer to judge.", judge=judge)
            second_s = time.perf_counter() - started
            second_calls = judge.calls - first_calls
        parent.send("done")
        stats = parent.recv()
    finally:
        server.join(timeout=5)
        if server.is_alive():
            server.kill()
    ideal = checks / concurrency * delay_s
    scored = sum(1 for check in first.checks if check.status == "scored")
    assert scored == checks and second.reward == first.reward == 1.0
    return [
        (
            f"(b) {checks} judge checks, server delay {delay_s * 1000:.0f} ms, concurrency {concurrency}",
            f"{first_s:.2f} s (target ≤ 3 s), {first_calls} calls, server saw {stats['calls']}, peak in flight {stats['peak']}",
        ),
        ("(b) ideal 100/16 × 0.3 s", f"{ideal:.3f} s → ratio {first_s / ideal:.2f}×"),
        ("(b) re-grade, same answer", f"{second_s * 1000:.1f} ms, {second_calls} calls (target 0)"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args()
    rows = bench_deterministic(args.runs) + bench_small() + bench_judge(100, 0.3, 16)
    width = max(len(name) for name, _ in rows)
    print(f"{'measure'.ljust(width)}  result")
    print(f"{'-' * width}  {'-' * 40}")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    if args.json:
        print(json.dumps(dict(rows), ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
