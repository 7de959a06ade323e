"""What the disk hardening (issue 7, §2) costs and saves, side by side in one run (bubblewrap).

    .venv/bin/python bench/bench_disk_caps.py [--starts 10]

1. Snapshot of a workspace holding sparse files (2 x 200 MB and 1 x 50 MB of apparent
   size, 20 small files): the bounded, hole-keeping snapshot against a plain copy of
   every regular file (what snapshots did before), in host bytes allocated and seconds.
2. Sandbox start + stop with tmpfs caps (the default now) against without, median ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox.runtime import SandboxSpec, get_backend  # noqa: E402


def allocated(root: Path) -> int:
    return sum(p.lstat().st_blocks * 512 for p in root.rglob("*"))


def plain_copy(src: Path, dest: Path) -> None:
    for path in src.rglob("*"):
        if path.is_file() and not path.is_symlink():
            target = dest / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=10)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    spec = SandboxSpec(memory_mb=512, workspace_mb=600, tmp_mb=16, exec_timeout_s=60)
    work = Path(tempfile.mkdtemp(prefix="gw-bench-disk-"))
    work.chmod(0o755)
    try:
        backend = get_backend("bubblewrap", work_dir=work / "boxes")
        with backend.start(spec) as sandbox:
            made = sandbox.exec(
                "truncate -s 200M a.bin b.bin && truncate -s 50M c.bin && "
                "for i in $(seq 1 20); do echo $i > small$i.txt; done"
            )
            assert made.exit_code == 0, made
            started = time.perf_counter()
            snap = sandbox.snapshot(work / "bounded")
            bounded_s = time.perf_counter() - started
            left_out = sandbox.snapshot_left_out
            started = time.perf_counter()
            plain_copy(sandbox.workspace_dir, work / "plain")
            plain_s = time.perf_counter() - started
        bounded_bytes, plain_bytes = allocated(snap), allocated(work / "plain")
        shutil.rmtree(work / "plain")
        print(
            f"snapshot of 450 MB apparent (sparse): bounded {bounded_bytes / 1e6:.2f} MB allocated "
            f"in {bounded_s:.3f} s ({len(left_out)} left out) vs plain copy {plain_bytes / 1e6:.1f} MB "
            f"in {plain_s:.3f} s -> {plain_bytes / max(bounded_bytes, 1):.0f}x fewer bytes, "
            f"{plain_s / max(bounded_s, 1e-9):.1f}x faster"
        )
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.starts):
            for caps in (True, False):
                backend = get_backend("bubblewrap", work_dir=work / "boxes", tmpfs_caps=caps)
                started = time.perf_counter()
                box = backend.start(SandboxSpec(workspace_mb=64, tmp_mb=64))
                box.stop()
                times[caps].append((time.perf_counter() - started) * 1000)
        with_caps, without = statistics.median(times[True]), statistics.median(times[False])
        print(
            f"sandbox start+stop, median of {args.starts}: tmpfs caps {with_caps:.1f} ms vs "
            f"none {without:.1f} ms -> ratio {with_caps / without:.2f}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
