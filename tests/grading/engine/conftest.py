"""Fixtures for the pure engine's tests: no database, a local OpenAI-protocol server, a subprocess sandbox double."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from grading.engine import ExecResult, JudgeClient, JudgeConfig
from tests.support.openai_server import OpenAIServer, openai_server  # noqa: F401 - the fixture


class LocalProcessSandbox:
    """TEST DOUBLE ONLY: implements CheckSandbox with plain subprocesses in a temp folder.

    No isolation at all — it exists so the engine's command/python plumbing can be
    tested without Docker or bubblewrap. The real sandboxes live in sandbox.runtime.
    """

    def __init__(self, workspace: Path):
        self.workspace = Path(workspace)
        self.workspace_path = str(self.workspace.resolve())
        self.tmp_written: list[Path] = []
        self.execs: list = []

    def exec(self, command, *, timeout_s=None, stdin=None, env=None) -> ExecResult:
        self.execs.append(command)
        started = time.perf_counter()
        process = subprocess.Popen(
            command,
            shell=isinstance(command, str),
            cwd=self.workspace,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        try:
            out, err = process.communicate(stdin or b"", timeout=timeout_s)
            timed_out, code = False, process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            timed_out, code = True, None
        return ExecResult(
            exit_code=code,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            stdout_truncated=False,
            stderr_truncated=False,
            timed_out=timed_out,
            oom_killed=False,
            duration_ms=int((time.perf_counter() - started) * 1000),
        )

    def _path(self, path: str) -> Path:
        if path.startswith("/tmp/"):
            return Path(path)
        return self.workspace / path

    def write_file(self, path: str, data: bytes) -> None:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if path.startswith("/tmp/"):
            self.tmp_written.append(target)

    def read_file(self, path: str, *, max_bytes: int = 1 << 30, follow_links: bool = True) -> bytes:
        from grading.engine.safe_files import read_regular

        target = self._path(path)
        if follow_links:
            return read_regular(target.resolve(), max_bytes=max_bytes)
        return read_regular(str(target.relative_to("/")), max_bytes=max_bytes, root="/")

    def close(self) -> None:
        for path in self.tmp_written:
            path.unlink(missing_ok=True)
            top = Path("/tmp") / path.relative_to("/tmp").parts[0]
            if top.name.startswith(".gw-runner-"):  # a tests check's runner folder, with what the run made
                shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def workspace(tmp_path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


@pytest.fixture
def local_sandbox(workspace):
    sandbox = LocalProcessSandbox(workspace)
    yield sandbox
    sandbox.close()


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
