"""Gymwright's sandbox core: backends (bubblewrap, docker), tools, the agent
harness loop, policies and rollouts. Pure Python: never imports Django.

Contract: docs/internals.md ("sandbox.runtime"); CLI: `python -m sandbox.runtime`.
"""

from .backends import Backend, Sandbox, get_backend
from .harness import Episode, run_episode, trajectory_text
from .policies import ModelConfig, Policy, PolicyError, Turn, make_policy
from .results import CheckSandbox, ExecResult, exec_result_dict
from .rollout import RolloutResult, run_rollout
from .spec import SandboxError, SandboxSpec
from .tools import BUILTIN_TOOLS, ToolRunner, enabled_tools, mcp_tool_definitions, openai_tool_definitions


def reap_containers(
    client=None, *, older_than: float | None = None, owner: str | None = None, now: float | None = None
) -> list[str]:
    """Remove docker sandbox containers left behind (see backends.docker.reap_containers)."""
    from .backends.docker import reap_containers as reap

    return reap(client, older_than=older_than, owner=owner, now=now)


__all__ = [
    "BUILTIN_TOOLS",
    "Backend",
    "Episode",
    "ModelConfig",
    "Policy",
    "PolicyError",
    "RolloutResult",
    "ToolRunner",
    "Turn",
    "enabled_tools",
    "make_policy",
    "mcp_tool_definitions",
    "openai_tool_definitions",
    "run_episode",
    "run_rollout",
    "trajectory_text",
    "CheckSandbox",
    "ExecResult",
    "Sandbox",
    "SandboxError",
    "SandboxSpec",
    "exec_result_dict",
    "get_backend",
    "reap_containers",
]
