"""The sandbox interface, proved on both backends with the same tests."""

from __future__ import annotations

import uuid

import pytest

from grading.engine.sandbox import CheckSandbox
from sandbox.runtime import ExecResult, SandboxError, SandboxSpec


def test_it_reports_exit_code_stdout_and_stderr_separately(sandbox):
    result = sandbox.exec("echo out; echo err >&2; exit 7")
    assert isinstance(result, ExecResult)
    assert (result.exit_code, result.stdout, result.stderr) == (7, "out\n", "err\n")
    assert not (result.timed_out or result.oom_killed or result.stdout_truncated)
    assert result.duration_ms >= 0


def test_it_runs_an_argv_without_a_shell(sandbox):
    result = sandbox.exec(["echo", "$HOME", "a b"])
    assert result.stdout == "$HOME a b\n"


def test_it_reports_a_missing_program_as_exit_127(sandbox):
    assert sandbox.exec("no-such-program-here").exit_code == 127


def test_it_reports_death_by_signal_as_128_plus_signal(sandbox):
    assert sandbox.exec("kill -TERM $$").exit_code == 143


def test_it_feeds_stdin_and_sets_env(sandbox):
    result = sandbox.exec('cat; echo "[$GREETING]"', stdin=b"from stdin\n", env={"GREETING": "hi"})
    assert result.stdout == "from stdin\n[hi]\n"


def test_it_caps_each_stream_and_says_so(sandbox):
    result = sandbox.exec("head -c 100000 /dev/zero | tr '\\0' a; head -c 10 /dev/zero | tr '\\0' b >&2")
    assert result.exit_code == 0
    assert result.stdout == "a" * 4096 and result.stdout_truncated
    assert result.stderr == "b" * 10 and not result.stderr_truncated


def test_it_streams_a_large_stdin_while_output_is_capped(sandbox):
    data = b"x" * (2 * 1024 * 1024)
    result = sandbox.exec("cat; echo done >&2", stdin=data)
    assert result.exit_code == 0 and result.stderr == "done\n"
    assert result.stdout_truncated and len(result.stdout) == 4096


def test_it_runs_commands_in_the_workspace_with_the_task_files(sandbox):
    assert sandbox.workspace_path == "/workspace"
    result = sandbox.exec("pwd; cat hello.txt data/n.csv")
    assert result.stdout == "/workspace\nhello\na,b\n1,2\n"


def test_files_round_trip_through_the_workspace_and_tmp(sandbox):
    sandbox.write_file("out/deep/r.txt", b"one")
    sandbox.write_file("/tmp/scratch.bin", b"\x00\xff")
    assert sandbox.exec("cat out/deep/r.txt /tmp/scratch.bin | od -An -c | tr -s ' '").stdout.split() == [
        "o",
        "n",
        "e",
        "\\0",
        "377",
    ]
    sandbox.exec("echo made > made.txt")
    assert sandbox.read_file("made.txt") == b"made\n"
    assert sandbox.read_file("/workspace/out/deep/r.txt") == b"one"
    assert sandbox.read_file("/tmp/scratch.bin") == b"\x00\xff"
    assert sandbox.list_files() == ["data/n.csv", "hello.txt", "made.txt", "out/deep/r.txt"]


def test_the_sandbox_user_can_overwrite_files_written_in(sandbox):
    sandbox.write_file("notes.txt", b"v1")
    result = sandbox.exec("echo v2 > notes.txt && rm hello.txt")
    assert result.exit_code == 0, result.stderr
    assert sandbox.read_file("notes.txt") == b"v2\n"


def test_reading_a_missing_file_raises_file_not_found(sandbox):
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("nope.txt")


@pytest.mark.parametrize("path", ["../etc/passwd", "/etc/passwd", "/workspace/../root/x", "/env/x"])
def test_it_refuses_to_write_outside_the_workspace_and_tmp(sandbox, path):
    with pytest.raises(SandboxError) as info:
        sandbox.write_file(path, b"x")
    assert info.value.permanent


def test_environment_files_are_under_env_and_read_only(sandbox):
    assert sandbox.read_file("/env/tools/echo.sh").startswith(b"#!/bin/sh")
    result = sandbox.exec("echo piped | /env/tools/echo.sh; echo x > /env/tools/echo.sh")
    assert result.stdout == "piped\n"
    assert result.exit_code != 0
    assert sandbox.read_file("/env/tools/echo.sh") == b"#!/bin/sh\ncat\n"


def test_snapshot_copies_the_workspace(sandbox, tmp_path):
    sandbox.exec("mkdir -p sub/empty && echo r > sub/r.txt")
    dest = sandbox.snapshot(tmp_path / "snap")
    assert (dest / "sub" / "r.txt").read_text() == "r\n"
    assert (dest / "hello.txt").read_text() == "hello\n"
    assert (dest / "sub" / "empty").is_dir()


def test_a_timed_out_exec_is_killed_with_its_children_and_the_next_exec_works(sandbox):
    result = sandbox.exec("(sleep 60; echo late > late.txt) & sleep 60", timeout_s=1)
    # The timeout is reported as such, and what the command started is gone (below), not merely waited out.
    assert result.timed_out and result.exit_code is None and result.stdout == ""
    assert sandbox.exec("echo still here").stdout == "still here\n"
    assert "late.txt" not in sandbox.list_files()
    ps = sandbox.exec("ps -o args 2>/dev/null || ps")
    assert "sleep 60" not in ps.stdout


def test_a_background_child_neither_holds_up_the_exec_nor_outlives_it(sandbox):
    # The child sleeps far longer than the exec may run: an exec that waited for it would come
    # back timed out, so "not timed out" is the proof (no wall-clock assertion on a shared host).
    result = sandbox.exec("sleep 1000 & echo done", timeout_s=60)
    assert (result.exit_code, result.stdout, result.timed_out) == (0, "done\n", False)
    assert "sleep 1000" not in sandbox.exec("ps -o args 2>/dev/null || ps").stdout


def test_output_printed_before_a_timeout_is_kept(sandbox):
    result = sandbox.exec("echo before; sleep 30", timeout_s=1)
    assert result.timed_out and result.stdout == "before\n"


def test_the_setup_script_runs_once_at_start(backend, spec):
    setup_spec = spec.with_overrides(setup="echo ran >> /workspace/setup.log")
    with backend.start(setup_spec) as box:
        box.exec("true")
        assert box.read_file("setup.log") == b"ran\n"


def test_a_failing_setup_script_is_a_permanent_error_and_leaves_nothing_running(backend, spec, monkeypatch):
    from tests.sandbox.runtime.conftest import sandbox_is_gone
    from tests.support.workers import processes_with

    marker = f"gw-setup-{uuid.uuid4().hex[:10]}"
    created, create = [], backend._create
    monkeypatch.setattr(backend, "_create", lambda spec: created.append(create(spec)) or created[-1])  # a spy
    with pytest.raises(SandboxError) as info:
        # the setup script leaves a process behind as it fails
        backend.start(spec.with_overrides(setup=f"sh -c 'sleep 600' {marker} & echo broken >&2; exit 3"))
    assert info.value.permanent
    assert "broken" in str(info.value)
    [box] = created
    assert box.stopped and sandbox_is_gone(backend, box.id)
    assert processes_with(marker) == []


def test_stop_is_idempotent_and_a_stopped_sandbox_refuses_work(backend, spec):
    box = backend.start(spec)
    box.stop()
    box.stop()
    with pytest.raises(SandboxError):
        box.exec("true")


def test_it_is_a_context_manager_and_a_check_sandbox(backend, spec):
    with backend.start(spec) as box:
        assert isinstance(box, CheckSandbox)
        assert box.exec("true").exit_code == 0
    assert box.stopped


def test_python_runs_inside_the_sandbox(python_backend, spec):
    with python_backend.start(spec) as box:
        result = box.exec(["python", "-c", "import sys, json; print(json.dumps(sys.version_info[:2] >= (3, 8)))"])
        assert result.exit_code == 0, result.stderr
        assert result.stdout == "true\n"
        assert box.exec("python3 -c 'print(1+1)'").stdout == "2\n"


def test_the_spec_is_built_from_a_task_environment():
    from grading.engine.models import Environment

    env = Environment(
        image="python:3.12-slim",
        setup="pip install x",
        network="egress",
        limits={"cpus": 2, "memory_mb": 512, "timeout_s": 60, "max_steps": 5},
        custom_tools=[{"name": "ledger", "command": "python /env/l.py"}],
    )
    spec = SandboxSpec.from_environment(env, pids=32)
    assert (spec.image, spec.setup, spec.network_allowed) == ("python:3.12-slim", "pip install x", True)
    assert (spec.cpus, spec.memory_mb, spec.timeout_s, spec.max_steps, spec.pids) == (2, 512, 60, 5, 32)
    assert spec.custom_tools[0]["name"] == "ledger"
    assert spec.tools == ("bash", "read_file", "write_file", "submit")
    assert SandboxSpec.from_environment({}).network_allowed is False


def test_a_dockerfile_spec_has_a_content_addressed_tag():
    one = SandboxSpec(dockerfile="FROM scratch\n").dockerfile_tag()
    assert one == SandboxSpec(dockerfile="FROM scratch\n").dockerfile_tag()
    assert one != SandboxSpec(dockerfile="FROM scratch\nENV A=1\n").dockerfile_tag()
    assert one.startswith("gymwright-env:")


def test_bubblewrap_without_cgroups_falls_back_to_rlimits_and_direct_starts(spec):
    from sandbox.runtime import get_backend
    from tests.support.services import require_bwrap

    require_bwrap()
    backend = get_backend("bubblewrap", use_cgroups=False, use_spawner=False, tmpfs_caps=False)
    with backend.start(spec.with_overrides(memory_mb=64, pids=32, workspace_mb=4)) as box:
        assert not box.cgroups.dirs and not box.workspace_cap_hard
        over = box.exec("for i in 1 2 3; do head -c 2000000 /dev/zero > f$i; done; sleep 1")
        assert over.exit_code != 0 and "size cap" in over.stderr
        box.exec("rm -f f1 f2 f3")
        result = box.exec("echo ok; exit 4")
        assert (result.exit_code, result.stdout) == (4, "ok\n")
        assert box.exec("sleep 30", timeout_s=0.5).timed_out
        hog = box.exec(["python3", "-c", "bytearray(512 * 1024 * 1024)"])
        assert hog.exit_code == 1 and "MemoryError" in hog.stderr
        assert box.exec("cat", stdin=b"x").stdout == "x"
        if box.uid != 0:  # root ignores RLIMIT_NPROC
            forks = box.exec("i=0; while [ $i -lt 300 ]; do sleep 3 & i=$((i+1)); done; echo started")
            assert "fork" in forks.stderr.lower()


def test_without_cgroups_one_sandbox_s_processes_never_keep_another_from_starting(spec):
    """RLIMIT_NPROC counts every process of a uid. When all bubblewrap sandboxes ran as 65534, one rollout
    holding its whole process budget made the next sandbox fail to start (EAGAIN; in CI, beside the fork
    tests): an agent could fail the other rollouts of its group, which raises its own GRPO advantage. Each
    sandbox now has a uid of its own."""
    import threading

    from sandbox.runtime import get_backend
    from tests.support.services import require_bwrap, require_root

    require_bwrap()
    require_root("dropping to a sandbox's own uid")
    backend = get_backend("bubblewrap", use_cgroups=False, use_spawner=False, tmpfs_caps=False)
    small = spec.with_overrides(pids=16)
    with backend.start(small) as hog, backend.start(small) as other:
        assert hog.uid != other.uid and min(hog.uid, other.uid) >= 2_000_000_000
        assert other.exec("id -u").stdout == f"{other.uid}\n"
        holding = threading.Event()
        result = {}

        def fill():
            # Fork until the cap refuses, say so, then hold every process for a while.
            result["hog"] = hog.exec(["python3", "-c", HOG], timeout_s=8)

        thread = threading.Thread(target=fill)
        thread.start()
        try:
            for _ in range(100):
                if len(_pids_of(hog.uid)) >= 15:
                    holding.set()
                    break
                threading.Event().wait(0.05)
            assert holding.is_set(), "the hog never filled its process budget"
            assert other.exec("echo ok").stdout == "ok\n"
        finally:
            thread.join()
        assert result["hog"].timed_out


HOG = """
import os, time
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(20)
        os._exit(0)
print("full", flush=True)
time.sleep(20)
"""


def _pids_of(uid: int) -> list[int]:
    import os

    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
            except FileNotFoundError:
                pass
    return pids


def test_a_killed_bubblewrap_spawner_is_replaced(spec):
    from sandbox.runtime import get_backend
    from tests.support.services import missing, require_bwrap

    require_bwrap()
    with get_backend("bubblewrap").start(spec) as box:
        assert box.exec("true").exit_code == 0
        if box._spawner is None:
            missing(
                "cgroups for sandboxes (so no spawner)",
                "run the worker where it may create cgroups (root, cgroup v1 or v2 mounted read-write), as CI does",
            )
        box._spawner.kill()
        box._spawner.wait()
        assert box.exec("echo again").stdout == "again\n"


def test_reap_removes_bubblewrap_sandboxes_of_dead_workers(spec, tmp_path_factory):
    from sandbox.runtime import get_backend
    from sandbox.runtime.backends.bubblewrap import reap_bubblewrap
    from tests.support.services import require_bwrap

    require_bwrap()
    backend = get_backend("bubblewrap")
    live = backend.start(spec)
    orphan = backend.start(spec)
    try:
        # Pretend its worker died: a pid above pid_max is never alive (the
        # cgroups carry the owner pid in their names).
        (orphan.root / "owner").write_text("4194999\n")
        for controller, path in list(orphan.cgroups.dirs.items()):
            dead = path.with_name(f"gymwright-4194999-{orphan.id}")
            path.rename(dead)
            orphan.cgroups.dirs[controller] = dead
        cgroup_dirs = list(orphan.cgroups.dirs.values())
        assert all(p.exists() for p in cgroup_dirs)
        removed = reap_bubblewrap(backend.work_dir)
        assert orphan.id in removed and live.id not in removed
        assert not orphan.root.exists() and live.root.exists()
        assert not any(path.exists() for path in cgroup_dirs)
        assert live.exec("echo fine").stdout == "fine\n"
    finally:
        live.stop()
        orphan.stop()
    # Stopping a sandbox whose directory is already gone must leave the work dir alone.
    assert backend.work_dir.stat().st_mode & 0o001


def test_bubblewrap_tmpfs_caps_are_hard_and_cleaned_up_even_after_a_crash(spec):
    from sandbox.runtime import get_backend
    from sandbox.runtime.backends.bubblewrap import reap_bubblewrap
    from tests.support.services import require_bwrap, require_root

    require_bwrap()
    require_root("tmpfs caps need a worker that may mount")
    backend = get_backend("bubblewrap", tmpfs_caps=True)
    box = backend.start(spec.with_overrides(workspace_mb=4, tmp_mb=4), files={"a.txt": b"a"})
    try:
        assert box.workspace_cap_hard
        result = box.exec("for i in 1 2 3; do head -c 2000000 /dev/zero > f$i || exit 9; done")
        assert result.exit_code == 9 and "space" in result.stderr
        assert box.read_file("a.txt") == b"a"
        stopped_root = box.root
    finally:
        box.stop()
    assert not stopped_root.exists()
    # A worker that died: its sandbox (mounts included) is removed by the reaper.
    crashed = backend.start(spec.with_overrides(workspace_mb=4, tmp_mb=4))
    (crashed.root / "owner").write_text("4194999\n")
    assert crashed.id in reap_bubblewrap(backend.work_dir)
    assert not crashed.root.exists()
    assert str(crashed.root) not in open("/proc/self/mountinfo").read()
    crashed.mounts = []
    crashed.stop()
