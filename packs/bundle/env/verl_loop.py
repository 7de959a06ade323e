"""verl 0.9's multi-turn rollout on the pack's environment: `GymwrightAgentLoop`, verl's `ToolAgentLoop` whose
tools are the task's own, run in the episode's sandbox, and whose reward is the environment's grade.

verl makes one agent loop per trajectory (`hydra.utils.instantiate` of the entry `python -m env verl` writes
to agent_loop.yaml). Each `run()` reads the task id from the row's `extra_info.task_id`, starts a
`TaskEnvironment` on it (a fresh sandbox), offers the model that task's tools, feeds each tool call to the
sandbox, stops once the episode ends (`submit`, the task's step or time limit, a full workspace), then grades
it with the pack's grader — the last assistant message is the answer when the model never submitted — and
sets the trajectory's `reward_score` (verl then does not call a reward function for it) and the grade in
`extra_fields["gymwright_grade"]`. The sandbox is stopped whatever happens.

    python -m env verl --out verl/          # verl/agent_loop.yaml and verl/agentic.parquet (one row a task)
    PYTHONPATH=$PWD python -m verl.trainer.main_ppo ... \\
        data.train_files=$PWD/verl/agentic.parquet data.val_files=$PWD/verl/agentic.parquet \\
        actor_rollout_ref.rollout.multi_turn.enable=True \\
        actor_rollout_ref.rollout.agent.agent_loop_config_path=$PWD/verl/agent_loop.yaml \\
        actor_rollout_ref.rollout.agent.default_agent_loop=gymwright_agent
"""

from __future__ import annotations

import asyncio
from typing import Any

from verl.experimental.agent_loop.tool_agent_loop import AgentState, ToolAgentLoop
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from .environment import TaskEnvironment

AGENT_NAME = "gymwright_agent"


class EpisodeTool(BaseTool):
    """One tool of the task, bound to one trajectory's environment (verl's create/execute/release per call
    are no-ops around it: the sandbox lives as long as the trajectory)."""

    def __init__(self, env: TaskEnvironment, schema: dict):
        # BaseTool.__init__ prints every schema: set its attributes without it, one tool set per trajectory
        self.config = {}
        try:
            self.tool_schema = OpenAIFunctionToolSchema.model_validate(schema)
        except ValueError:  # an author's parameter schema verl's model is stricter about: keep it as given
            self.tool_schema = OpenAIFunctionToolSchema.model_construct(**schema)
        self.name = schema["function"]["name"]
        self._env = env

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs) -> tuple[ToolResponse, float, dict]:
        text = await asyncio.to_thread(self._env.call_tool, self.name, parameters)
        return ToolResponse(text=text), 0.0, {}


class GymwrightAgentLoop(ToolAgentLoop):
    """verl's tool agent loop over one episode of a task of the pack (see the module's docstring)."""

    def __init__(self, *args, backend: str = "bubblewrap", image: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._backend = backend
        self._image = image
        self._env: TaskEnvironment | None = None
        self._last_answer = ""

    async def run(self, sampling_params: dict[str, Any], priority: int = 0, **kwargs):
        extra_info = kwargs.get("extra_info") or {}
        task_id = extra_info.get("task_id") if isinstance(extra_info, dict) else None
        if not task_id:
            raise ValueError("a gymwright_agent row needs extra_info.task_id (python -m env verl writes such rows)")
        env = TaskEnvironment(backend=self._backend, image=self._image)
        self._env = env
        try:
            await asyncio.to_thread(env.reset, task_id=task_id)
            tools = [EpisodeTool(env, schema) for schema in env.tool_schemas()]
            self.tools = {tool.name: tool for tool in tools}
            self.tool_schemas = [tool.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for tool in tools]
            output = await super().run(sampling_params, priority=priority, **kwargs)
            grade = await asyncio.to_thread(env.grade, answer=self._last_answer)
        finally:
            await asyncio.to_thread(env.close)
        output.reward_score = float(grade["reward"])
        output.extra_fields["gymwright_grade"] = grade
        return output

    async def _handle_generating_state(self, agent_data, sampling_params, ignore_termination: bool = False):
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        last = agent_data.messages[-1] if agent_data.messages else None
        if isinstance(last, dict) and last.get("role") == "assistant" and isinstance(last.get("content"), str):
            self._last_answer = last["content"]
        return state

    async def _handle_processing_tools_state(self, agent_data):
        state = await super()._handle_processing_tools_state(agent_data)
        if self._env is not None and self._env.stop_reason is not None:
            return AgentState.TERMINATED  # submitted, or out of steps, time or disk: the episode is over
        return state


__all__ = ["AGENT_NAME", "EpisodeTool", "GymwrightAgentLoop"]
