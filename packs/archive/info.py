"""What a pack build is given and gives back, and the constants every part of the archive shares."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

PACK_SCHEMA = "gymwright.pack/v1"
FIXED_MTIME = 1_700_000_000  # every entry's mtime: the bytes must not depend on when they were built
BUNDLE_DIR = Path(__file__).resolve().parent.parent / "bundle"
ENGINE_DIR = Path(__file__).resolve().parents[2] / "grading" / "engine"


class PackError(Exception):
    """The pack cannot be built from this input (message says which task and why)."""


class BuildCancelled(Exception):
    """The build was asked to stop; nothing was published."""


@dataclasses.dataclass(frozen=True)
class PackInfo:
    slug: str
    name: str
    version: str
    description: str = ""
    licence: str = "proprietary"
    test_ratio: float = 0.1
    gymwright_version: str = "0.1.0"


@dataclasses.dataclass
class TaskItem:
    """One task to pack: its gymwright.task/v1 document, its sha256 and its last model preview's numbers."""

    document: dict
    sha256: str
    calibration: dict | None = None  # {policy, n, pass_rate, pass_at_k, mean_reward}


@dataclasses.dataclass
class BuildResult:
    manifest: dict
    sha256: str
    size: int
    content_sha256: str


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
