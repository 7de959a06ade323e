"""A pack's live environment (env/, issue 29). Prints a table; ratios are measured side by side in one run.

    .venv/bin/python bench/bench_env.py [--steps 60] [--starts 20] [--sessions 64] [--session-steps 10]

Builds a one-task pack (an agentic task: a file and a command check), unpacks it and imports its env/ as a lab
does, then on bubblewrap:

1. Per-step overhead: the environment's `bash("true")` (tool runner, trajectory, step accounting) against a
   raw `exec("true")` in the same sandbox, interleaved call by call (target <= 1.2x).
2. Sandbox start to first observation: `reset(task_id)` — a fresh sandbox with the task's files, the prompt
   back (target <= 150 ms median).
3. --sessions concurrent sessions on a thread pool as wide: each resets, runs --session-steps `bash` steps
   and is graded; errors, steps per second and p50/p95 step latency.

4. The same over OpenEnv (when `make openenv-venv` has made var/openenv-venv): `python -m env serve` from the
   unpacked pack, OpenEnv's own client stepping `bash true` over the session's WebSocket, against raw execs
   measured here in the same run.

The load average is printed before and after: the figures of a run above load 2 are marked as such.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import statistics
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grading.engine import content_sha256, parse_task  # noqa: E402
from packs import archive  # noqa: E402

DATA = b"a,b\n1,2\n"
TASK = {
    "schema": "gymwright.task/v1",
    "id": "bench-env",
    "version": 1,
    "title": "Copy the data",
    "prompt": "Copy data.csv to out.csv, then submit done.",
    "environment": {
        "id": "bench",
        "version": 1,
        "tools": ["bash", "read_file", "write_file", "list_files", "submit"],
        "limits": {"cpus": 1, "memory_mb": 256, "timeout_s": 600, "max_steps": 200},
    },
    "files": [{"path": "data.csv", "sha256": hashlib.sha256(DATA).hexdigest()}],
    "solution": {"script": "cp data.csv out.csv", "answer": "done"},
    "rubric": {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": "out", "kind": "file_exists", "points": 1, "path": "out.csv"},
            {"id": "same", "kind": "command", "points": 1, "run": "cmp data.csv out.csv", "timeout_s": 30},
        ],
    },
}


def load() -> str:
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())


def build_env_module(tmp: Path):
    item = archive.TaskItem(parse_task(TASK).to_document() | TASK, content_sha256(TASK))
    archive.build_pack(
        out=tmp / "bench.tar.gz",
        tasks=[item],
        read_blob={hashlib.sha256(DATA).hexdigest(): DATA}.__getitem__,
        scratch_dir=tmp / "scratch",
        info=archive.PackInfo(slug="bench", name="bench", version="1.0.0", test_ratio=0.0),
    )
    with tarfile.open(tmp / "bench.tar.gz") as tar:
        tar.extractall(tmp / "out", filter="data")
    pack_dir = tmp / "out" / "bench-1.0.0"
    spec = importlib.util.spec_from_file_location(
        "bench_pack_env", pack_dir / "env" / "__init__.py", submodule_search_locations=[str(pack_dir / "env")]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_pack_env"] = module
    spec.loader.exec_module(module)
    return module, pack_dir


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def step_overhead(env, n: int) -> tuple[float, float]:
    """Median ms of env.bash("true") and of a raw exec("true") in the same sandbox, interleaved."""
    env.reset(task_id=TASK["id"])
    sandbox = env._sandbox  # the episode's own sandbox: the raw baseline runs in it
    for _ in range(3):
        env.bash("true")
        sandbox.exec("true", timeout_s=30)
    stepped, raw = [], []
    for _ in range(n):
        started = time.perf_counter()
        sandbox.exec("true", timeout_s=30)
        raw.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        env.bash("true")
        stepped.append((time.perf_counter() - started) * 1000)
    env.close()
    return statistics.median(stepped), statistics.median(raw)


def first_observation(env, n: int) -> tuple[list[float], list[float]]:
    """Per reset: ms to the prompt, and ms to the first tool result (reset + bash("true")): bubblewrap makes
    the workspace at start and its namespaces at each exec, so the second is the honest "sandbox ready"."""
    samples, ready = [], []
    env.reset(task_id=TASK["id"])  # warm-up: the backend's first sandbox
    for _ in range(n):
        started = time.perf_counter()
        prompt = env.reset(task_id=TASK["id"])
        samples.append((time.perf_counter() - started) * 1000)
        assert prompt == TASK["prompt"]
        assert env.bash("true").startswith("exit code: 0")
        ready.append((time.perf_counter() - started) * 1000)
    env.close()
    return samples, ready


def concurrent_sessions(module, pack_dir: Path, backend, sessions: int, steps: int) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    rewards: list[float] = []
    lock = threading.Lock()
    gate = threading.Barrier(sessions)

    def session(index: int) -> None:
        env = module.TaskEnvironment(pack_dir, backend=backend)
        try:
            env.reset(task_id=TASK["id"])
            gate.wait(timeout=600)  # every session holds its sandbox before the steps start
            mine = []
            for step in range(steps):
                started = time.perf_counter()
                out = env.bash("cp data.csv out.csv" if step == steps - 1 else f"echo {index}-{step}")
                mine.append((time.perf_counter() - started) * 1000)
                if not out.startswith("exit code: 0"):
                    raise RuntimeError(f"step {step}: {out[:200]}")
            env.submit("done")
            reward = env.grade()["reward"]
            with lock:
                latencies.extend(mine)
                rewards.append(reward)
        except Exception as exc:  # noqa: BLE001 - counted and shown: the point is that there are none
            with lock:
                errors.append(f"{type(exc).__name__}: {exc}"[:300])
            try:
                gate.abort()
            except threading.BrokenBarrierError:
                pass
        finally:
            env.close()

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=sessions) as pool:
        list(pool.map(session, range(sessions)))
    wall = time.perf_counter() - started
    return {"latencies": latencies, "errors": errors, "rewards": rewards, "wall": wall}


def raw_exec_ms(backend, n: int) -> list[float]:
    from bench_pack_env.runtime.spec import SandboxSpec

    with backend.start(SandboxSpec(), files={}) as box:
        for _ in range(3):
            box.exec("true", timeout_s=30)
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            box.exec("true", timeout_s=30)
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def over_openenv(pack_dir: Path, backend, steps: int, resets: int) -> dict | str:
    """The server's figures, or why they were not measured."""
    import json
    import socket
    import subprocess
    import urllib.request

    python = ROOT / "var" / "openenv-venv" / "bin" / "python"
    if not python.exists():
        return "not measured: var/openenv-venv is missing (make openenv-venv)"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [str(python), "-m", "env", "serve", "--port", str(port)],
        cwd=pack_dir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            if server.poll() is not None:
                return f"not measured: the server exited ({server.stderr.read().decode()[-300:]})"
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    return "not measured: the server did not answer /health in 300 s"
                time.sleep(0.5)
        raw_before = raw_exec_ms(backend, steps // 2)
        done = subprocess.run(
            [str(python), str(ROOT / "bench" / "env_client.py"), url, TASK["id"], str(steps), str(resets)],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        raw_after = raw_exec_ms(backend, steps - steps // 2)
        if done.returncode != 0:
            return f"not measured: the client failed ({done.stderr[-300:]})"
        seen = json.loads(done.stdout)
        seen["raw"] = raw_before + raw_after
        return seen
    finally:
        server.terminate()
        server.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--session-steps", type=int, default=10)
    args = parser.parse_args()
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="bench-env-") as tmp:
        module, pack_dir = build_env_module(Path(tmp))
        from bench_pack_env.runtime.backends import get_backend

        backend = get_backend("bubblewrap")
        env = module.TaskEnvironment(pack_dir, backend=backend)
        stepped, raw = step_overhead(env, args.steps)
        starts, ready = first_observation(env, args.starts)
        busy = concurrent_sessions(module, pack_dir, backend, args.sessions, args.session_steps)
        served = over_openenv(pack_dir, backend, args.steps, args.starts)
    load_after = load()
    loaded = max(float(load_before.split(" / ")[0]), float(load_after.split(" / ")[0])) > 2
    ratio = stepped / raw if raw else float("inf")
    start_median = statistics.median(starts)
    latencies = busy["latencies"]
    steps_done = len(latencies)
    print(f"load average before: {load_before}; after: {load_after} ({os.cpu_count()} cores)")
    if loaded:
        print("NOTE: run above load 2 (other work on this machine): the absolute times are inflated")
    print()
    print(f"{'measure':<58} {'value':>12} {'target':>10}")
    print(f"{'env.bash(true) per step, median (bubblewrap)':<58} {stepped:>9.1f} ms")
    print(f"{'raw exec(true) in the same sandbox, median':<58} {raw:>9.1f} ms")
    verdict = "ok" if ratio <= 1.2 else "MISSED"
    print(f"{'  ratio env / raw':<58} {ratio:>11.2f}x {'<= 1.2x':>10} {verdict}")
    verdict = "ok" if start_median <= 150 else "MISSED"
    print(f"{'sandbox start to first observation, median':<58} {start_median:>9.1f} ms {'<= 150 ms':>10} {verdict}")
    print(f"{'  p95 / min over ' + str(len(starts)) + ' resets':<58} {pct(starts, 0.95):>6.1f} / {min(starts):.1f} ms")
    print(f"{'sandbox start to first tool result (reset + bash true), median':<58} {statistics.median(ready):>9.1f} ms")
    print(f"{'  p95':<58} {pct(ready, 0.95):>9.1f} ms")
    print(
        f"{str(args.sessions) + ' concurrent sessions x ' + str(args.session_steps) + ' steps: errors':<58} "
        f"{len(busy['errors']):>12} {'0':>10} {'ok' if not busy['errors'] else 'MISSED'}"
    )
    if steps_done:
        print(f"{'  steps per second (all sessions, wall incl. resets/grades)':<58} {steps_done / busy['wall']:>12.1f}")
        print(f"{'  step latency p50 / p95':<58} {pct(latencies, 0.5):>6.1f} / {pct(latencies, 0.95):.1f} ms")
        print(
            f"{'  rewards (the last step does the task): all 1.0':<58} {str(all(r == 1.0 for r in busy['rewards'])):>12}"
        )
    if isinstance(served, str):
        print(f"OpenEnv server: {served}")
    else:
        server_step, server_raw = statistics.median(served["steps"]), statistics.median(served["raw"])
        print(f"{'OpenEnv: step bash(true) over /ws, median':<58} {server_step:>9.1f} ms")
        print(f"{'  raw exec(true), median (same run, around the client)':<58} {server_raw:>9.1f} ms")
        print(f"{'  ratio server step / raw exec':<58} {server_step / server_raw:>11.2f}x")
        print(
            f"{'OpenEnv: reset to first observation, median / p95':<58} "
            f"{statistics.median(served['first']):>6.1f} / {pct(served['first'], 0.95):.1f} ms"
        )
        print(
            f"{'OpenEnv: reset to first tool result, median / p95':<58} "
            f"{statistics.median(served['ready']):>6.1f} / {pct(served['ready'], 0.95):.1f} ms"
        )
    for error in busy["errors"][:5]:
        print(f"  error: {error}")
    return 0 if not busy["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
