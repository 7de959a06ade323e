"""Fixtures for the pure engine's tests: no database, a local OpenAI-protocol server, a real bubblewrap sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from grading.engine import JudgeClient, JudgeConfig
from sandbox.runtime import SandboxSpec, get_backend
from sandbox.runtime.roles import GradingSandbox
from tests.support.openai_server import OpenAIServer, openai_server  # noqa: F401 - the fixture
from tests.support.services import require_bwrap


@pytest.fixture
def workspace(tmp_path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


@pytest.fixture
def check_sandbox():
    """A real bubblewrap sandbox, as the checks of a rollout see it (`GradingSandbox`): the engine's command, python
    and tests checks are tested where they run, not in a second implementation of the sandbox."""
    require_bwrap()
    box = get_backend("bubblewrap").start(
        SandboxSpec(memory_mb=512, pids=128, exec_timeout_s=60, output_cap=65536, workspace_mb=32, tmp_mb=32)
    )
    yield GradingSandbox(box)
    box.stop()


@pytest.fixture
def make_judge():
    """make_judge(server, **config overrides) -> a JudgeClient with fast test timeouts and backoff."""

    def make(server: OpenAIServer, **overrides) -> JudgeClient:
        options = {
            "base_url": server.base_url,
            "model": "judge-model",
            "api_key": "test",
            "timeout_s": 2,
            "max_retries": 2,
            "backoff_s": 0.01,
            "backoff_max_s": 0.05,
        }
        options.update(overrides)
        return JudgeClient(JudgeConfig(**options))

    return make
