"""What isolation costs per exec (issue 7, network and process parts).
Run: .venv/bin/python bench/bench_isolation.py [--runs 30]

Side by side in one run, interleaved so load changes hit both sides alike:
(a) bubblewrap: an exec of `true` in a sandbox without network (forked by the
    sandbox's spawner) against one with egress (its own network namespace:
    slirp4netns started and the nftables filter installed for every exec);
(b) docker (when an engine is there): an exec of `true` against one that first
    starts a `setsid` background child (the sweep after the exec kills it).
Prints medians, the ratios and the load average. No target: informational.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox.runtime import SandboxSpec, get_backend  # noqa: E402
from sandbox.runtime.egress_filter import EgressPolicy  # noqa: E402


def timed(box, command) -> float:
    started = time.perf_counter()
    result = box.exec(command)
    elapsed = time.perf_counter() - started
    assert result.exit_code == 0, result
    return elapsed


def side_by_side(box_a, cmd_a, box_b, cmd_b, runs: int) -> tuple[float, float]:
    a, b = [], []
    for _ in range(2):  # warm-up
        timed(box_a, cmd_a), timed(box_b, cmd_b)
    for _ in range(runs):
        a.append(timed(box_a, cmd_a))
        b.append(timed(box_b, cmd_b))
    return statistics.median(a), statistics.median(b)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    spec = SandboxSpec(memory_mb=256, pids=64)
    plain_backend = get_backend("bubblewrap")
    egress_backend = get_backend("bubblewrap", egress=EgressPolicy())
    with plain_backend.start(spec) as plain, egress_backend.start(spec.with_overrides(network="egress")) as net:
        a, b = side_by_side(plain, "true", net, "true", args.runs)
    print(
        f"(a) bubblewrap exec `true`: no network {a * 1000:.1f} ms, egress {b * 1000:.1f} ms "
        f"(median of {args.runs}); egress/none = {b / a:.2f}x, +{(b - a) * 1000:.1f} ms per exec"
    )
    try:
        import docker

        client = docker.from_env()
        client.ping()
        from tests.support.images import busybox_image

        image = busybox_image(client)
    except Exception as exc:  # noqa: BLE001 - the docker half is optional
        print(f"(b) docker: skipped ({exc})")
    else:
        backend = get_backend("docker", client=client, default_image=image)
        with backend.start(spec) as box:
            a, b = side_by_side(box, "true", box, "setsid sleep 1000 </dev/null >/dev/null 2>&1 & true", args.runs)
        print(
            f"(b) docker exec: `true` {a * 1000:.1f} ms, with a setsid child to sweep {b * 1000:.1f} ms "
            f"(median of {args.runs}); ratio {b / a:.2f}x"
        )
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
