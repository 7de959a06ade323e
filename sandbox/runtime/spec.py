"""What a sandbox is made of: the spec built from a task's environment, and the error type.

Pure data, no I/O. Backends read a `SandboxSpec`; they never look at a Task.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from grading.engine.models import DEFAULT_TOOLS, Limits

DEFAULT_OUTPUT_CAP = 64 * 1024
_FORMAT_LIMITS = Limits()  # the task format's defaults: what a task that sets no limit gets


class SandboxError(Exception):
    """A sandbox could not be started or used.

    `permanent=True` means retrying cannot help (bad image name, a Dockerfile
    that does not build, a setup script that fails); `permanent=False` means a
    transient failure (engine unreachable, out of disk, a race) that a retry of
    the whole rollout may fix.
    """

    def __init__(self, message: str, permanent: bool = False):
        super().__init__(message)
        self.message = message
        self.permanent = permanent

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class SandboxSpec:
    """Everything a backend needs to start one sandbox.

    `timeout_s` is the wall limit of a whole rollout; `exec_timeout_s` the
    default limit of one exec when the caller gives none. `cpus` and
    `memory_mb` apply to the whole sandbox (all its processes together),
    `pids` caps the number of live processes, `output_cap` the bytes kept of
    each of stdout and stderr per exec, `workspace_mb` / `tmp_mb` the size of
    the writable /workspace and /tmp.
    """

    image: str | None = None
    dockerfile: str | None = None
    setup: str | None = None
    network: Literal["none", "allowed", "egress"] = "none"
    cpus: float = float(_FORMAT_LIMITS.cpus)
    memory_mb: int = _FORMAT_LIMITS.memory_mb
    timeout_s: float = float(_FORMAT_LIMITS.timeout_s)
    max_steps: int = _FORMAT_LIMITS.max_steps
    exec_timeout_s: float = 120.0
    setup_timeout_s: float = 600.0
    pids: int = 256
    output_cap: int = DEFAULT_OUTPUT_CAP
    workspace_mb: int = 512
    tmp_mb: int = 256
    tools: tuple[str, ...] = DEFAULT_TOOLS
    custom_tools: tuple[dict, ...] = ()
    environment_id: str | None = None

    def __post_init__(self):
        if self.network not in ("none", "allowed", "egress"):
            raise ValueError(f"network must be 'none' or 'allowed'/'egress', not {self.network!r}")
        for name in ("cpus", "memory_mb", "timeout_s", "max_steps", "exec_timeout_s", "pids",
                     "output_cap", "workspace_mb", "tmp_mb"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0 or math.isnan(value):
                raise ValueError(f"{name} must be a positive number, not {value!r}")

    @property
    def network_allowed(self) -> bool:
        # The task schema says "egress"; the CLI and older docs say "allowed".
        return self.network in ("allowed", "egress")

    def with_overrides(self, **changes: Any) -> "SandboxSpec":
        """A copy with some fields replaced (None values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def dockerfile_tag(self) -> str | None:
        """The cache tag of the image built from `dockerfile`: content-addressed."""
        if not self.dockerfile:
            return None
        digest = hashlib.sha256(self.dockerfile.encode()).hexdigest()[:32]
        return f"gymwright-env:{digest}"

    @classmethod
    def from_environment(cls, environment: Any, **overrides: Any) -> "SandboxSpec":
        """Build a spec from a task's `environment` (pydantic model or plain dict).

        Unknown limit keys are ignored here: the task schema (grading.engine)
        is where unknown keys are rejected.
        """
        env = _as_dict(environment)
        limits = _as_dict(env.get("limits") or {})
        values: dict[str, Any] = {
            "image": env.get("image") or None,
            "dockerfile": env.get("dockerfile") or None,
            "setup": env.get("setup") or None,
            "network": env.get("network") or "none",
            "environment_id": env.get("id"),
        }
        limit_keys = {
            "cpus": "cpus", "memory_mb": "memory_mb", "timeout_s": "timeout_s",
            "max_steps": "max_steps", "pids": "pids", "output_cap": "output_cap",
            "output_cap_bytes": "output_cap", "workspace_mb": "workspace_mb",
            "tmp_mb": "tmp_mb", "exec_timeout_s": "exec_timeout_s",
        }
        for key, name in limit_keys.items():
            if limits.get(key) is not None:
                values[name] = limits[key]
        if env.get("tools"):
            values["tools"] = tuple(env["tools"])
        if env.get("custom_tools"):
            values["custom_tools"] = tuple(_as_dict(tool) for tool in env["custom_tools"])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _as_dict(value: Any) -> dict:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "model_dump"):
        return value.model_dump()
    raise TypeError(f"expected a mapping or a pydantic model, got {type(value).__name__}")


@dataclass
class CappedBuffer:
    """Keeps the first `cap` bytes written to it and counts the rest.

    Output past the cap is read and discarded so that a command printing a
    gigabyte costs the worker no more than `cap` bytes of memory.
    """

    cap: int
    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.data)

    def text(self) -> str:
        return bytes(self.data).decode("utf-8", errors="replace")
