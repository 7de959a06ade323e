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

__all__ = ["TaskEnvironment", "agentic_task_ids"]
