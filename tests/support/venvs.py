"""Separate virtualenvs for tests that must run without Gymwright: the pack's stand-alone grader, Harbor,
Inspect, verl and TRL.

Each is cached under var/ (created once, reused) by Makefile targets that .ci/run also calls:
`make grader-venv` (only the bundled grader's requirements, no Django), `make harbor-venv`
(harbor needs Python >= 3.12), `make inspect-venv` (inspect_ai and the grader's requirements) and
`make trainers-venv` (verl and TRL with PyTorch on the CPU, and the grader's requirements).
Where one cannot be made they skip with how, or fail in CI.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.services import missing

ROOT = Path(__file__).resolve().parents[2]


def _make(target: str, stamp: Path, how: str) -> Path:
    if not stamp.exists():
        done = subprocess.run(["make", "-s", target], cwd=ROOT, capture_output=True, text=True, timeout=1500)
        if done.returncode != 0 or not stamp.exists():
            missing(f"the {target} virtualenv", f"{how}: {done.stderr.strip()[-500:]}")
    return stamp.parent / "bin"


def grader_python() -> str:
    return str(_make("grader-venv", ROOT / "var/grader-venv/.installed", "make grader-venv") / "python")


def harbor_bin() -> str:
    return str(
        _make("harbor-venv", ROOT / "var/harbor-venv/.installed", "make harbor-venv (needs Python 3.12)") / "harbor"
    )


def inspect_bin() -> str:
    return str(_make("inspect-venv", ROOT / "var/inspect-venv/.installed", "make inspect-venv") / "inspect")


def trainers_python() -> str:
    return str(_make("trainers-venv", ROOT / "var/trainers-venv/.installed", "make trainers-venv") / "python")


def openenv_python() -> str:
    """The pack's env/requirements.txt (openenv-core among them) and OpenEnv's client: `python -m env serve`."""
    return str(_make("openenv-venv", ROOT / "var/openenv-venv/.installed", "make openenv-venv") / "python")


def verifiers_python() -> str:
    """verifiers 0.4.0 and a pack's env/requirements-verifiers.txt, installed --no-deps as a lab does:
    `vf-eval env` on a pack's env/verifiers_env.py."""
    return str(_make("verifiers-venv", ROOT / "var/verifiers-venv/.installed", "make verifiers-venv") / "python")
