"""The environment a pack bundles for its agentic tasks (env/): the pack's own TaskEnvironment
(packs/bundle/env/) over Gymwright's sandbox runtime, lifted byte for byte into env/runtime/ the way
`grader` lifts the grading engine into grader/, and env/requirements.txt (no Django)."""

from __future__ import annotations

from pathlib import Path

from .grader import grader_requirements
from .info import BUNDLE_DIR

RUNTIME_DIR = Path(__file__).resolve().parents[2] / "sandbox" / "runtime"
ENV_BUNDLE_DIR = BUNDLE_DIR / "env"
# `python -m env serve` (env/server.py) is built on openenv-core, which brings its server's own parts
# (fastapi, uvicorn, websockets): pinned here, the version the server and its tests were made against.
OPENENV_REQUIREMENT = "openenv-core==0.3.0"


def _sources(root: Path) -> list[Path]:
    return sorted(
        (path for path in root.rglob("*.py") if "__pycache__" not in path.parts),
        key=lambda path: path.relative_to(root).as_posix(),
    )


def env_files() -> list[tuple[str, bytes]]:
    """env/'s Python files as (path in the pack, bytes): the environment, then the runtime under env/runtime/."""
    files = [
        (f"env/{path.relative_to(ENV_BUNDLE_DIR).as_posix()}", path.read_bytes()) for path in _sources(ENV_BUNDLE_DIR)
    ]
    files += [
        (f"env/runtime/{path.relative_to(RUNTIME_DIR).as_posix()}", path.read_bytes()) for path in _sources(RUNTIME_DIR)
    ]
    return files


def env_requirements(engine: list[tuple[str, bytes]], files: list[tuple[str, bytes]]) -> str:
    """env/requirements.txt: every third-party distribution the bundled engine (`engine`, grader_files())
    and env/ (`files`, env_files()) import, pinned to the versions installed here, and openenv-core."""
    pins = set(grader_requirements([*engine, *files]).splitlines()) | {OPENENV_REQUIREMENT}
    return "".join(f"{pin}\n" for pin in sorted(pins))
