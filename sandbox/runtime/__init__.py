"""Gymwright's sandbox core: backends (bubblewrap, docker), tools, the agent
harness loop, policies and rollouts. Pure Python: never imports Django.

Contract: docs/internals.md ("sandbox.runtime"); CLI: `python -m sandbox.runtime`.
"""

from .backends import Backend, Sandbox, get_backend
from .results import CheckSandbox, ExecResult, exec_result_dict
from .spec import SandboxError, SandboxSpec


def reap_containers(client=None, *, older_than: float | None = None) -> list[str]:
    """Remove docker sandbox containers left behind (see backends.docker.reap_containers)."""
    from .backends.docker import reap_containers as reap

    return reap(client, older_than=older_than)


__all__ = [
    "Backend",
    "CheckSandbox",
    "ExecResult",
    "Sandbox",
    "SandboxError",
    "SandboxSpec",
    "exec_result_dict",
    "get_backend",
    "reap_containers",
]
