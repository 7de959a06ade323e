"""verifiers 0.4 (`verifiers.v1`) on the pack's environment: the pack's agentic tasks as a taskset, the
rollout played by a harness whose tools are the task's own, run in the episode's Gymwright sandbox, and the
reward the grade that sandbox gives (RUBRIC.md "Scoring": the lower bound).

verifiers 0.4 loads an environment by id from an importable package exporting its classes through `__all__`
(a `Taskset`, and optionally one `Harness` and one `Env`); from inside the unpacked pack that package is
`env` (env/__init__.py exports these three lazily, so env/ stays usable without verifiers installed):

    pip install --no-deps verifiers==0.4.0 && pip install -r env/requirements-verifiers.txt
    PYTHONPATH=$PWD vf-eval env -m MODEL --client.base-url URL/v1 --no-push -n 2 -r 4

- `GymwrightTaskset` yields one `GymwrightTask` per agentic task (`TaskData.id` is the task id).
- `GymwrightHarness` runs `python -m env episode` (env/__main__.py) in verifiers' `subprocess` runtime: one
  `TaskEnvironment` per rollout — a fresh sandbox (bubblewrap or docker, `--env.agent.harness.backend`) with
  the task's files — driven by the model through verifiers' interception endpoint with the task's tools
  (bash, read_file, write_file, list_files, submit, custom tools), then graded in that sandbox by the pack's
  grader and stopped. Its last assistant message is the answer when the model never submits.
- `GymwrightTask.grade` (the task's `@vf.reward`) is that grade's `reward`. It is read from the file the
  episode program wrote in the rollout's runtime folder on the host, which the agent's tools (inside the
  sandbox) cannot reach; a missing, unreadable or malformed grade, one of another task, or a run that failed
  earns 0. Nothing a model says is read for the reward.
- `GymwrightEnv` is verifiers' single-agent env with these defaults: the `subprocess` runtime (the sandbox is
  Gymwright's; verifiers' own container runtimes do not hold the pack) and this harness.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Literal

import verifiers.v1 as vf
from verifiers.v1.runtimes import SubprocessConfig

from grading.engine.safe_files import read_regular

from .environment import PACK_DIR, _pack_tasks

GRADE_FILE = ".gymwright-grade.json"
# A grade document is small (per-check results, bounded messages); a bigger file is no grade of ours.
MAX_GRADE_BYTES = 4 * 1024 * 1024


class GymwrightData(vf.TaskData):
    """One agentic task of the pack: `id` is its task id, `prompt` its prompt."""


class GymwrightTask(vf.Task[GymwrightData]):
    @property
    def key(self) -> str:
        return f"gymwright:{self.data.id}"

    @vf.reward
    async def grade(self, trace: vf.Trace, runtime: vf.Runtime) -> float:
        """The grade the episode's sandbox gave (its lower bound); 0 when there is none to trust."""
        document, error = await read_grade(runtime, self.data.id)
        trace.info["gymwright_grade"] = document if document is not None else {"error": error}
        return float(document["reward"]) if document is not None else 0.0


class GymwrightTasksetConfig(vf.TasksetConfig):
    pack_dir: str | None = None
    """The unpacked pack (default: the folder above env/)."""


class GymwrightTaskset(vf.Taskset[GymwrightTask, GymwrightTasksetConfig]):
    def load(self) -> list[GymwrightTask]:
        pack = str(Path(self.config.pack_dir or PACK_DIR).resolve())
        return [
            GymwrightTask(
                GymwrightData(id=task_id, name=document.get("title") or task_id, prompt=document["prompt"]),
                self.config.task,
            )
            for task_id, document in sorted(_pack_tasks(pack).items())
        ]


class GymwrightHarnessConfig(vf.HarnessConfig):
    id: str = "env"
    backend: Literal["bubblewrap", "docker"] = "bubblewrap"
    """The sandbox each rollout's episode runs in."""
    image: str | None = None
    """docker: one image for every task instead of each task's own."""
    pack_dir: str | None = None
    """The unpacked pack (default: the folder above env/)."""


class GymwrightHarness(vf.Harness[GymwrightHarnessConfig]):
    APPENDS_SYSTEM_PROMPT = True
    # The model's tools run in the Gymwright sandbox the episode program starts, never on the host.
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def setup(self, runtime: vf.Runtime) -> None:
        if runtime.type != "subprocess":
            raise vf.HarnessError(
                f"the Gymwright harness runs its episode program on the host, which starts the task's own "
                f"sandbox: use verifiers' subprocess runtime (--env.agent.runtime.type subprocess), "
                f"not {runtime.type!r}"
            )

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **kwargs) -> vf.ProgramResult:
        pack = Path(self.config.pack_dir or PACK_DIR).resolve()
        argv = [sys.executable, "-m", "env", "episode", "--task-id", str(data.id), "--out", GRADE_FILE]
        argv += ["--base-url", endpoint, "--model", ctx.model, "--backend", self.config.backend]
        if self.config.image:
            argv += ["--image", self.config.image]
        if self.config.pack_dir:
            argv += ["--pack-dir", str(pack)]
        # The interception secret goes in the environment, where the sandbox's processes never see it.
        environment = {**self.config.resolved_env, "OPENAI_API_KEY": secret, "PYTHONPATH": str(pack)}
        return await runtime.run_program(argv, environment)


class GymwrightEnvConfig(vf.SingleAgentEnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(runtime=SubprocessConfig(), harness=GymwrightHarnessConfig())


class GymwrightEnv(vf.Env[GymwrightEnvConfig]):
    """verifiers' single-agent env, with the Gymwright harness on the subprocess runtime by default."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        await agents.agent.run(task)


async def read_grade(runtime, task_id: str | None) -> tuple[dict | None, str]:
    """The grade document the episode program left in the runtime, and '' — or None and why not."""
    # The subprocess runtime's folder on the host (GymwrightHarness.setup refuses any other runtime), read as the
    # host reads every file it did not write itself: a regular file, no link, not past the bound.
    try:
        raw = read_regular(GRADE_FILE, max_bytes=MAX_GRADE_BYTES, root=runtime.workdir)
    except FileNotFoundError:
        return None, "no grade: the episode program wrote none"
    except ValueError:
        return None, f"no grade: {GRADE_FILE} is over {MAX_GRADE_BYTES} bytes"
    except OSError as exc:
        return None, f"no grade: {GRADE_FILE} could not be read ({exc.strerror or type(exc).__name__})"
    try:
        document = json.loads(raw)
    except ValueError:
        return None, f"no grade: {GRADE_FILE} is not JSON"
    if not isinstance(document, dict) or document.get("task_id") != task_id:
        return None, f"no grade: {GRADE_FILE} is not the grade of task {task_id!r}"
    grade = document.get("grade")
    reward = grade.get("reward") if isinstance(grade, dict) else None
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        return None, f"no grade: {GRADE_FILE} has no numeric reward"
    if not 0.0 <= reward <= 1.0:
        return None, f"no grade: reward {reward!r} is outside [0, 1]"
    return grade, ""


__all__ = ["GymwrightEnv", "GymwrightHarness", "GymwrightTask", "GymwrightTaskset"]
