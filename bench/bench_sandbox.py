"""Sandbox and rollout benchmarks (issue 4). Prints a table; ratios are measured side by side in one run.

    .venv/bin/python bench/bench_sandbox.py [--execs 50] [--rollouts 32] [--steps 10]
        [--step-delay 0.2] [--concurrency 8] [--rollout-backend bubblewrap|docker] [--no-docker]

1. Exec overhead of `true` in a started sandbox: bubblewrap (target <= 15 ms
   median) and docker exec (target <= 80 ms), each also as a ratio to a plain
   `docker run --rm --network none <busybox> true` measured in the same run.
2. N rollouts of S steps each against the local OpenAI-protocol test server,
   which answers every request after --step-delay seconds (a bash `true` tool
   call, then submit on the last step), run on a thread pool of --concurrency:
   actual wall time against the ideal ceil(N / concurrency) * S * delay
   (target <= 1.5x).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox.runtime import ModelConfig, SandboxSpec, get_backend, make_policy, run_rollout  # noqa: E402

TASK = {
    "schema": "gymwright.task/v1",
    "id": "bench-steps",
    "prompt": "Run true a few times, then submit ok.",
    "environment": {"id": "bench", "limits": {"cpus": 1, "memory_mb": 256, "timeout_s": 600, "max_steps": 50}},
    "rubric": {
        "schema": "gymwright.rubric/v1",
        "checks": [{"id": "ok", "kind": "string_match", "points": 1, "expected": "ok"}],
    },
}


def median_ms(fn, n: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def bench_execs(args, rows):
    bwrap = get_backend("bubblewrap")
    with bwrap.start(SandboxSpec()) as box:
        bwrap_ms = median_ms(lambda: box.exec(["true"]), args.execs)
    rows.append(("bubblewrap exec `true` (median)", f"{bwrap_ms:.1f} ms", "<= 15 ms"))
    if args.no_docker:
        return
    import docker

    from tests.support.images import busybox_image

    client = docker.from_env()
    image = busybox_image(client)
    backend = get_backend("docker", client=client, default_image=image)
    with backend.start(SandboxSpec()) as box:
        exec_ms = median_ms(lambda: box.exec(["true"]), args.execs)
    run_ms = median_ms(
        lambda: subprocess.run(
            ["docker", "run", "--rm", "--network", "none", image, "true"], check=True, capture_output=True
        ),
        max(5, args.execs // 5),
        warmup=1,
    )
    rows.append(("docker exec `true` (median)", f"{exec_ms:.1f} ms", "<= 80 ms"))
    rows.append(("docker run --rm `true` (median, baseline)", f"{run_ms:.1f} ms", ""))
    rows.append(("bubblewrap exec / docker run", f"{bwrap_ms / run_ms:.3f}x", ""))
    rows.append(("docker exec / docker run", f"{exec_ms / run_ms:.3f}x", ""))


def bench_rollouts(args, rows):
    from tests.support.openai_server import OpenAIServer, tool_call

    steps = args.steps

    def reply(body):
        turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turns + 1 >= steps:
            return {"tool_calls": [tool_call("submit", {"answer": "ok"})]}
        return {"tool_calls": [tool_call("bash", {"command": "true"})]}

    options = {}
    if args.rollout_backend == "docker":
        import docker

        from tests.support.images import busybox_image

        options = {"default_image": busybox_image(docker.from_env())}
    backend = get_backend(args.rollout_backend, **options)
    with OpenAIServer(handler=reply, delay=args.step_delay) as server:
        policy = make_policy(
            "model", model_config=ModelConfig(base_url=server.base_url, model="bench", api_key="x", max_retries=0)
        )

        def one(_):
            return run_rollout(TASK, policy=policy, backend=backend)

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            results = list(pool.map(one, range(args.rollouts)))
        wall = time.perf_counter() - started
    bad = [r.error or r.stop_reason for r in results if r.error or r.steps != steps or not r.grade.passed]
    ideal = math.ceil(args.rollouts / args.concurrency) * steps * args.step_delay
    label = (
        f"{args.rollouts} rollouts x {steps} steps, {args.step_delay * 1000:.0f} ms/step, "
        f"{args.concurrency} threads ({args.rollout_backend})"
    )
    rows.append((label + ": wall", f"{wall:.2f} s", f"ideal {ideal:.2f} s"))
    rows.append((label + ": actual / ideal", f"{wall / ideal:.3f}x", "<= 1.5x"))
    rows.append(("rollouts that failed or did not finish", str(len(bad)), "0"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--execs", type=int, default=50)
    parser.add_argument("--rollouts", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--step-delay", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rollout-backend", choices=["bubblewrap", "docker"], default="bubblewrap")
    parser.add_argument("--no-docker", action="store_true")
    args = parser.parse_args()
    rows: list[tuple[str, str, str]] = []
    bench_execs(args, rows)
    bench_rollouts(args, rows)
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'result':>12}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>12}  {target}")
    print(f"(cpus: {os.cpu_count()}, load: {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
