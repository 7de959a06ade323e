"""The environment a pack bundles for its agentic tasks (env/): the pack's own TaskEnvironment
(packs/bundle/env/) over Gymwright's sandbox runtime, lifted byte for byte into env/runtime/ the way
`grader` lifts the grading engine into grader/, and env/requirements.txt (no Django)."""

from __future__ import annotations

import re
from pathlib import Path

from .grader import grader_requirements
from .info import BUNDLE_DIR

RUNTIME_DIR = Path(__file__).resolve().parents[2] / "sandbox" / "runtime"
ENV_BUNDLE_DIR = BUNDLE_DIR / "env"
# `python -m env serve` (env/server.py) is built on openenv-core, which brings its server's own parts
# (fastapi, uvicorn, websockets): pinned here, the version the server and its tests were made against.
OPENENV_REQUIREMENT = "openenv-core==0.3.0"
# env/verifiers_env.py runs on verifiers 0.4.0, whose own requirements pull a far larger tree (renderers'
# multimodal extra with transformers, gepa, prime-tunnel, ...) than taskset loading and `vf-eval` use.
# These are the distributions that `import verifiers.v1` and a `vf-eval env` run of the pack import (traced with
# sys.modules at exit), at versions meeting verifiers 0.4.0's requirements; openai 2.x is verifiers' pin
# (`openai<3`), which the bundled grader and `python -m env episode` also run on. tqdm is openai's.
VERIFIERS_REQUIREMENTS = (
    "verifiers==0.4.0",
    "aiofiles==25.1.0",
    "aiohappyeyeballs==2.7.1",
    "aiohttp==3.14.5",
    "aiosignal==1.4.0",
    "annotated-types==0.8.0",
    "anthropic==2.14.0",
    "antlr4-python3-runtime==4.13.2",
    "anyio==4.16.0",
    "attrs==26.1.0",
    "certifi==2026.10.19.post1",
    "cffi==2.1.1",
    "click==8.5.1",
    "connectrpc==0.11.1",
    "cryptography==50.0.2",
    "distro==1.9.0",
    "docstring-parser==0.18.0",
    "frozenlist==1.8.0",
    "h11==0.16.0",
    "httpcore==1.0.9",
    "httpx==0.28.1",
    "httpx2==2.16.2",
    "idna==3.20",
    "jiter==0.19.0",
    "latex2sympy2-extended==1.11.0",
    "loguru==0.7.3",
    "math-verify==0.9.0",
    "mcp==2.0.0",
    "mcp-types==2.0.0",
    "mpmath==1.3.0",
    "multidict==7.2.1",
    "numpy==2.4.6",
    "openai==2.54.0",
    "opentelemetry-api==1.45.2",
    "prime-pydantic-config==0.4.3",
    "prime-runs==0.1.4",
    "prime-sandboxes==0.5.1",
    "prime-traces==0.0.10",
    "propcache==0.5.4",
    "protobuf==7.36.2",
    "protobuf-py==0.1.1",
    "protobuf-py-ext==0.1.1",
    "pydantic==2.14.4",
    "pydantic-core==2.50.5",
    "pygments==2.21.0",
    "pyqwest==0.12.0",
    "python-multipart==0.0.34",
    "renderers==0.1.12",
    "rich==15.0.0",
    "sniffio==1.3.1",
    "sse-starlette==3.7.0",
    "starlette==1.10.0",
    "sympy==1.14.0",
    "tenacity==9.2.1",
    "tomli-w==1.2.0",
    "tqdm==4.67.1",
    "typing-extensions==4.16.0",
    "typing-inspection==0.4.5",
    "uvicorn==0.54.0",
    "yarl==1.25.1",
)


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


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def verifiers_requirements(engine: list[tuple[str, bytes]], files: list[tuple[str, bytes]]) -> str:
    """env/requirements-verifiers.txt, for `pip install --no-deps -r env/requirements-verifiers.txt`: every
    distribution the verifiers wrapper's path imports, pinned and closed under dependencies, so the install
    needs no resolver and brings nothing else: VERIFIERS_REQUIREMENTS, and env/requirements.txt's pins but
    openai (verifiers pins openai 2) and openenv-core, with what they require as installed here."""
    import importlib.metadata

    from packaging.requirements import Requirement

    pins = {_canonical(pin.split("==")[0]): pin for pin in VERIFIERS_REQUIREMENTS}
    todo = [
        pin.split("==")[0]
        for pin in env_requirements(engine, files).splitlines()
        if _canonical(pin.split("==")[0]) not in ("openai", "openenv-core")
    ]
    seen = set()
    while todo:
        name = _canonical(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            pins[name] = f"{name}=={importlib.metadata.version(name)}"
            required = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            if name not in pins:
                raise
            continue
        for line in required:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return "".join(f"{pin}\n" for pin in sorted(pins.values()))
