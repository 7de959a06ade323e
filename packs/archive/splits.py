"""How a pack divides its tasks: the held-out split (a stable hash of the task id) and the difficulty bins
(from each task's last model preview)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from grading.engine.calibration import DEFAULT_BAND

DIFFICULTY_BINS = ("unsolved", "hard", "in band", "easy", "not previewed")


def split_bucket(task_id: str) -> float:
    """Where a task id hashes in [0, 1): below the test ratio it is in the test split."""
    return int.from_bytes(hashlib.sha256(task_id.encode("utf-8")).digest()[:8], "big") / 2**64


def split_of(task_id: str, test_ratio: float) -> str:
    """'test' or 'train', from a stable hash of the task id (the same in every version of every pack)."""
    return "test" if split_bucket(task_id) < test_ratio else "train"


def empty_split(counts: dict) -> str | None:
    """The split ("test" before "train") that holds none of a pack's tasks, or None: where every trainer's and
    `datasets`' recipe needs both (the pack page's plan, the card, export_pack's note)."""
    if not counts.get("train") and not counts.get("test"):
        return None
    return next((name for name in ("test", "train") if not counts.get(name)), None)


def test_ratio_filling_both(task_ids: Iterable[str]) -> float | None:
    """A test ratio, in hundredths, at which these tasks fill both splits: the smallest that puts one in test, or
    when that would empty train, the largest that keeps one there; None where no ratio can (a single task)."""
    buckets = sorted(split_bucket(task_id) for task_id in task_ids)
    if len(buckets) < 2:
        return None
    low, high = buckets[0], buckets[-1]  # a ratio r fills both when low < r <= high
    for ratio in ((int(low * 100) + 1) / 100, int(high * 100) / 100):
        if low < ratio <= high:
            return ratio
    return None


def difficulty_of(calibration: dict | None, band: tuple[float, float] = DEFAULT_BAND) -> str:
    """Which histogram bin a task falls in, from its last model preview's pass rate."""
    if not calibration or calibration.get("pass_rate") is None:
        return "not previewed"
    rate = calibration["pass_rate"]
    if rate <= 0:
        return "unsolved"
    if rate < band[0]:
        return "hard"
    if rate <= band[1]:
        return "in band"
    return "easy"
