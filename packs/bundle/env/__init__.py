"""The pack's agentic tasks as a live environment (docs/environments.md in Gymwright).

    from env import TaskEnvironment

    env = TaskEnvironment(backend="bubblewrap")      # or "docker"
    prompt = env.reset(task_id=env.tasks()[0])       # a fresh sandbox with the task's files
    env.bash("ls")                                   # the task's tools, as typed methods
    print(env.grade()["reward"])                     # the bundled grader, in that sandbox
    env.close()

`env/runtime/` is Gymwright's sandbox runtime and `grader/` its grading engine, byte for byte the code
that ran the app's previews; nothing here imports Django or Gymwright. Install `env/requirements.txt`.
"""

import sys
from pathlib import Path

# The pack's own grading engine (grader/grading/engine), unless the process already has one loaded.
_GRADER = Path(__file__).resolve().parent.parent / "grader"
if "grading" not in sys.modules and (_GRADER / "grading" / "engine").is_dir() and str(_GRADER) not in sys.path:
    sys.path.insert(0, str(_GRADER))

from .environment import TaskEnvironment, agentic_task_ids  # noqa: E402

# verifiers 0.4 loads `env` as a taskset package by what `__all__` exports (env/verifiers_env.py): those
# classes import verifiers, so they are resolved on first use and the rest of env/ works without it.
_VERIFIERS = ("GymwrightEnv", "GymwrightHarness", "GymwrightTaskset")


def __getattr__(name: str):
    if name in _VERIFIERS:
        try:
            from . import verifiers_env
        except ImportError as exc:
            raise ImportError(
                f"env.{name} needs verifiers 0.4 (pip install --no-deps verifiers==0.4.0 && "
                f"pip install -r env/requirements-verifiers.txt): {exc}"
            ) from exc
        return getattr(verifiers_env, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["TaskEnvironment", "agentic_task_ids", *_VERIFIERS]
