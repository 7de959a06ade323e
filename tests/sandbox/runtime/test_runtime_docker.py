"""Docker-only behaviour: hardening, labels, Dockerfile builds cached by content, the reaper."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from sandbox.runtime import SandboxError, SandboxSpec, get_backend, reap_containers


@pytest.fixture
def docker_backend(docker_client, busybox_image):
    return get_backend("docker", client=docker_client, default_image=busybox_image)


def test_the_container_is_locked_down_and_labelled(docker_backend):
    spec = SandboxSpec(memory_mb=128, pids=40, cpus=0.5, timeout_s=100)
    with docker_backend.start(spec) as box:
        box.container.reload()
        attrs = box.container.attrs
        host = attrs["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"]
        assert host["CapAdd"] == ["KILL"]  # for root's killer exec only:
        assert host["ReadonlyRootfs"] is True and host["Binds"] in (None, [])
        assert host["Memory"] == 128 * 1024 * 1024 == host["MemorySwap"]
        assert host["PidsLimit"] == 40 + 3 and host["NanoCpus"] == 500_000_000
        assert set(host["Tmpfs"]) == {"/workspace", "/tmp", "/env", "/logs", "/tests"}
        assert "CapEff:\t0000000000000000" in box.exec("cat /proc/self/status").stdout  # the sandbox user has none
        # The keep-alive and the killer are root's, out of the sandbox user's reach.
        assert attrs["Config"]["User"] == "0:0"
        labels = attrs["Config"]["Labels"]
        assert labels["gymwright.sandbox"] == "1"
        assert labels["gymwright.owner"] == f"{socket.gethostname()}:{os.getpid()}"
        assert float(labels["gymwright.expires"]) > time.time() + 100
        assert box.exec("id -u").stdout == "65534\n"
    import docker.errors

    with pytest.raises(docker.errors.NotFound):
        box.container.reload()  # removed on stop


def test_network_allowed_is_refused_without_an_operator_named_network(docker_backend):
    # No default bridge (it reaches the host): egress only through the operator's network.
    with pytest.raises(SandboxError) as caught:
        docker_backend.start(SandboxSpec(network="allowed"))
    assert caught.value.permanent and "GYMWRIGHT_SANDBOX_DOCKER_NETWORK" in str(caught.value)


def test_a_dockerfile_is_built_once_and_cached_by_content(docker_backend, docker_client, busybox_image, monkeypatch):
    from docker.models.images import ImageCollection

    dockerfile = f"FROM {busybox_image}\nENV GW_BUILT=yes-{time.time_ns()}\n"
    spec = SandboxSpec(dockerfile=dockerfile)
    tag = spec.dockerfile_tag()
    builds = []
    real_build = ImageCollection.build

    def counting_build(self, **kwargs):
        builds.append(kwargs["tag"])
        return real_build(self, **kwargs)

    monkeypatch.setattr(ImageCollection, "build", counting_build)
    try:
        boxes = []
        threads = [threading.Thread(target=lambda: boxes.append(docker_backend.start(spec))) for _ in range(2)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        try:
            assert len(boxes) == 2
            assert all(b.exec("echo $GW_BUILT").stdout.startswith("yes-") for b in boxes)
        finally:
            for b in boxes:
                b.stop()
        assert builds == [tag]
    finally:
        docker_client.images.remove(tag, force=True)


def test_a_dockerfile_that_does_not_build_is_a_permanent_error(docker_backend):
    with pytest.raises(SandboxError) as info:
        docker_backend.start(SandboxSpec(dockerfile="FROM scratch\nRUN /bin/false\n"))
    assert info.value.permanent


def test_a_missing_image_without_pulling_is_a_permanent_error(docker_client):
    backend = get_backend("docker", client=docker_client, pull=False)
    with pytest.raises(SandboxError) as info:
        backend.start(SandboxSpec(image="gymwright-test/does-not-exist:1"))
    assert info.value.permanent


def _leftover(client, image, **labels):
    base = {
        "gymwright.sandbox": "1",
        "gymwright.owner": f"{socket.gethostname()}:{os.getpid()}",
        "gymwright.expires": str(int(time.time()) + 3600),
    }
    base.update(labels)
    return client.containers.run(image, ["sleep", "infinity"], detach=True, labels=base, network_mode="none")


def _gone(client, container) -> bool:
    import docker.errors

    try:
        client.containers.get(container.id)
    except docker.errors.NotFound:
        return True
    return False


def test_the_reaper_removes_expired_and_orphaned_containers_only(docker_client, busybox_image):
    # Any worker's reaper on this engine (another test's, at its start) may sweep the expired and orphaned
    # containers first: a round where they are gone but not in this call's list is tried again, with new ones.
    for _ in range(5):
        expired = _leftover(docker_client, busybox_image, **{"gymwright.expires": str(int(time.time()) - 5)})
        orphan = _leftover(docker_client, busybox_image, **{"gymwright.owner": f"{socket.gethostname()}:4194999"})
        alive = _leftover(docker_client, busybox_image)
        removed = reap_containers(docker_client)
        raced = {c.id for c in (expired, orphan) if c.id not in removed and _gone(docker_client, c)}
        if not raced:
            break
        alive.remove(force=True)
    try:
        assert expired.id in removed and orphan.id in removed and alive.id not in removed
        alive.reload()
        # Only our own containers: other suites may be running sandboxes on this engine.
        me = f"{socket.gethostname()}:{os.getpid()}"
        assert reap_containers(docker_client, older_than=0, owner=me) == [alive.id]
    finally:
        for c in (expired, orphan, alive):
            try:
                c.remove(force=True)
            except Exception:  # noqa: BLE001
                pass


def test_the_reaper_removes_a_sandbox_container_stopped_for_longer_than_the_grace(docker_client, busybox_image):
    from sandbox.runtime.backends.docker import EXITED_GRACE_S

    me = f"{socket.gethostname()}:{os.getpid()}"  # alive: only the stopped rule can apply
    stopped = _leftover(docker_client, busybox_image)
    running = _leftover(docker_client, busybox_image)
    try:
        stopped.stop(timeout=0)
        assert reap_containers(docker_client, owner=me) == []  # just stopped: within the grace
        later = time.time() + EXITED_GRACE_S + 5
        assert reap_containers(docker_client, owner=me, now=later) == [stopped.id]
        running.reload()
        assert running.status == "running"
    finally:
        for c in (stopped, running):
            try:
                c.remove(force=True)
            except Exception:  # noqa: BLE001
                pass


def test_the_sandbox_cannot_kill_our_helper_and_timeouts_still_work(docker_backend):
    with docker_backend.start(SandboxSpec()) as box:
        # The helper is an exec the engine starts asynchronously: on a loaded machine the first exec can run
        # before it shows in ps (the suite's two workers made that happen).
        count = "ps -o user,args | grep 'while read -r req' | grep -v grep"
        deadline = time.monotonic() + 20
        while box.exec(count).stdout.count("\n") != 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert box.exec(count).stdout.split()[0] in ("root", "0")
        tried = box.exec("pkill -9 -f 'while read -r req'; kill -9 -1; echo tried")
        assert "tried" in tried.stdout
        assert box.exec(count).stdout.count("\n") == 1  # root's: the sandbox user cannot signal it
        result = box.exec("sleep 30 & sleep 30", timeout_s=1)
        assert result.timed_out
        assert "sleep 30" not in box.exec("ps -o args").stdout
        assert box.exec("echo ok").stdout == "ok\n"
        # Without the helper (gone some other way), the one-off root sweep does the same.
        box._close_killer()
        box._start_killer = lambda: None
        result = box.exec("sleep 30 & sleep 30", timeout_s=1)
        assert result.timed_out and "sleep 30" not in box.exec("ps -o args").stdout


def test_an_exec_the_engine_has_not_started_yet_is_not_taken_for_ended(docker_backend, monkeypatch):
    """The engine answers an exec's attach before it marks the exec started: on a busy host the first inspect
    says not running, with no exit code. Read as "ended", the backend swept the sandbox user's processes while
    the command began, and an `echo ok` after a timed-out exec printed nothing (CI, under load). Here the engine's
    inspect reports that not-yet-started state for each exec's first 0.4 s, as a busy engine does."""
    with docker_backend.start(SandboxSpec()) as box:
        real = box.api.exec_inspect
        first_seen: dict[str, float] = {}

        def slow_to_start(exec_id):
            info = real(exec_id)
            if time.monotonic() - first_seen.setdefault(exec_id, time.monotonic()) < 0.4:
                return {**info, "Running": False, "ExitCode": None}
            return info

        monkeypatch.setattr(box.api, "exec_inspect", slow_to_start)
        result = box.exec("sleep 0.6; echo ok")
        assert (result.exit_code, result.stdout) == (0, "ok\n")


def test_agent_writable_directories_are_dropped_from_the_image_path(docker_backend, docker_client, busybox_image):
    # An image whose PATH puts the workspace and /tmp first: a program the agent writes there
    # would stand in for `python3` in a check. The sandbox gets the PATH without them.
    dockerfile = f"FROM {busybox_image}\nENV PATH=/workspace:/tmp/bin:.:/usr/bin:/bin\n"
    spec = SandboxSpec(dockerfile=dockerfile)
    try:
        with docker_backend.start(spec) as box:
            assert box.exec('echo "$PATH"').stdout == "/usr/bin:/bin\n"
            box.write_file("gwprobe", b"#!/bin/sh\necho forged\n")
            box.write_file("/tmp/bin/gwprobe", b"#!/bin/sh\necho forged\n")
            box.exec("chmod +x gwprobe /tmp/bin/gwprobe")
            probe = box.exec("gwprobe")
            assert probe.exit_code == 127 and "forged" not in probe.stdout
    finally:
        docker_client.images.remove(spec.dockerfile_tag(), force=True)


def test_a_slow_killer_never_sweeps_beside_the_next_exec(docker_backend, monkeypatch):
    """A killer that answers late (a loaded engine; here: no time at all to answer) is waited for before the next
    exec: its sweep stops and kills every process of the sandbox user, and beside the next exec it killed that exec
    (exit 137, no output) or the next killer's pass."""
    from sandbox.runtime.backends import docker as docker_module

    monkeypatch.setattr(docker_module, "KILLER_REPLY_S", 0.0)
    with docker_backend.start(SandboxSpec()) as box:
        for n in range(6):
            result = box.exec(f"(sleep 5 &) ; echo run{n}")
            assert (result.exit_code, result.stdout) == (0, f"run{n}\n"), result
        box.end_processes()
        assert "sleep 5" not in box.exec("ps -o args").stdout


def test_the_one_off_sweep_waits_for_its_end(docker_backend):
    """Without a killer, the one-off root sweep runs to its end before it answers: its exit code, not a read of an
    exec still running (which always said "not stopped")."""
    with docker_backend.start(SandboxSpec()) as box:
        box._close_killer()
        box._start_killer = lambda: None
        box.exec("(sleep 30 &) ; (sleep 30 &)")
        box.end_processes()
        assert "sleep 30" not in box.exec("ps -o args").stdout
