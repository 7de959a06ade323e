"""Backends for the sandbox tests: the same suite runs on bubblewrap and docker.

Docker tests use images built locally (tests/support/images.py); nothing is
pulled. The `docker_client` fixture (tests/conftest.py) removes every container
of the test process at the end of the session, even one a test forgot to stop.
"""

from __future__ import annotations

import pytest

from sandbox.runtime import SandboxSpec, get_backend
from tests.support.services import require_bwrap

BACKENDS = ["bubblewrap", "docker"]


def sandbox_is_gone(backend, sandbox_id: str) -> bool:
    """No container (docker) or sandbox folder (bubblewrap) of `sandbox_id` is left."""
    if backend.name == "docker":
        return not backend.client.containers.list(all=True, filters={"label": f"gymwright.sandbox_id={sandbox_id}"})
    return not any(entry.name.startswith(f"gw-{sandbox_id}-") for entry in backend.work_dir.iterdir())


def make_backend(name: str, request):
    if name == "bubblewrap":
        require_bwrap()
        return get_backend("bubblewrap")
    client = request.getfixturevalue("docker_client")
    image = request.getfixturevalue("busybox_image")
    return get_backend("docker", client=client, default_image=image)


@pytest.fixture(params=BACKENDS)
def backend(request):
    return make_backend(request.param, request)


@pytest.fixture
def python_backend(request, backend):
    """A backend whose sandboxes have `python` (docker: the python test image)."""
    if backend.name == "docker":
        backend.default_image = request.getfixturevalue("python_image")
    return backend


@pytest.fixture
def spec():
    return SandboxSpec(memory_mb=256, pids=64, exec_timeout_s=30, output_cap=4096, workspace_mb=32, tmp_mb=32)


@pytest.fixture
def sandbox(backend, spec):
    box = backend.start(
        spec,
        files={"hello.txt": b"hello\n", "data/n.csv": b"a,b\n1,2\n"},
        env_files={"tools/echo.sh": b"#!/bin/sh\ncat\n"},
    )
    yield box
    box.stop()
