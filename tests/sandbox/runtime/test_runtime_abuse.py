"""Hostile commands, on both backends: each is contained, reported through the
result's flags, and leaves the sandbox (and the next one) working."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sandbox.runtime import SandboxError, SandboxSpec

SECRET = "gw-secret-value-7f3a91"


@pytest.fixture
def abuse_spec():
    return SandboxSpec(memory_mb=96, pids=48, cpus=1, exec_timeout_s=20, output_cap=65536, workspace_mb=8, tmp_mb=8)


@pytest.fixture
def box(python_backend, abuse_spec, monkeypatch):
    # The worker's environment holds a secret the sandbox must never see.
    monkeypatch.setenv("GYMWRIGHT_TEST_SECRET", SECRET)
    sandbox = python_backend.start(abuse_spec, files={"keep.txt": b"keep\n"})
    yield sandbox
    sandbox.stop()


def assert_still_works(sandbox):
    result = sandbox.exec("echo alive; cat keep.txt")
    assert result.exit_code == 0 and result.stdout == "alive\nkeep\n", result


def test_a_fork_bomb_hits_the_process_limit_and_is_killed(box, python_backend, abuse_spec):
    bomb = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
    result = box.exec(["python", "-c", bomb], timeout_s=3)
    assert result.timed_out and result.exit_code is None
    assert_still_works(box)
    # Nothing of the bomb survives: the process table is back to normal.
    count = box.exec("ps -o comm | grep -c '^python' || true")
    assert int(count.stdout.strip() or 0) == 0, count
    with python_backend.start(abuse_spec) as other:
        assert other.exec("echo next").stdout == "next\n"


def test_shell_forks_past_the_pids_limit_fail(box):
    result = box.exec("i=0; while [ $i -lt 200 ]; do sleep 5 & i=$((i+1)); done; echo started", timeout_s=10)
    assert "fork" in result.stderr.lower() or "resource" in result.stderr.lower(), result
    assert_still_works(box)


def test_a_memory_bomb_is_oom_killed_and_reported(box):
    bomb = "a = []\nwhile True:\n    a.append(bytearray(8 * 1024 * 1024))\n"
    result = box.exec(["python", "-c", bomb], timeout_s=20)
    assert not result.timed_out
    assert result.exit_code == 137 and result.oom_killed, result
    assert_still_works(box)
    assert box.exec("true").oom_killed is False


def test_a_gigabyte_of_output_is_capped_and_counted_as_truncated(box):
    result = box.exec("head -c 1000000000 /dev/zero; echo tail >&2", timeout_s=120)
    assert result.exit_code == 0 and not result.timed_out
    assert len(result.stdout) == 65536 and result.stdout_truncated
    assert result.stderr == "tail\n" and not result.stderr_truncated
    assert_still_works(box)


def test_sleeping_forever_times_out(box):
    result = box.exec("sleep 100000", timeout_s=1)
    assert result.timed_out and result.exit_code is None
    assert "sleep 100000" not in box.exec("ps").stdout
    assert_still_works(box)


def test_there_is_no_network(box):
    net = box.exec("cat /proc/net/dev")
    interfaces = [line.split(":")[0].strip() for line in net.stdout.splitlines() if ":" in line]
    assert interfaces == ["lo"], net.stdout
    probe = (
        "import socket\ns = socket.socket()\ns.settimeout(3)\n"
        "try:\n    s.connect(('1.1.1.1', 80)); print('connected')\n"
        "except OSError as e:\n    print('blocked', e.errno)\n"
    )
    result = box.exec(["python", "-c", probe])
    assert result.stdout.startswith("blocked"), result


def test_writes_outside_the_workspace_and_tmp_fail(box):
    for target in ("/etc/gw-x", "/usr/gw-x", "/gw-x", "/env/gw-x", "/bin/gw-x"):
        result = box.exec(f"echo x > {target}")
        assert result.exit_code != 0, target
    assert not any(os.path.exists(p) for p in ("/etc/gw-x", "/usr/gw-x", "/gw-x", "/bin/gw-x"))
    assert_still_works(box)


def test_the_workers_environment_and_files_are_invisible(box):
    env = box.exec("env; cat /proc/self/environ /proc/1/environ 2>/dev/null")
    assert SECRET not in env.stdout and SECRET not in env.stderr
    assert "GYMWRIGHT_TEST_SECRET" not in env.stdout
    listing = box.exec("ls /").stdout.split()
    assert not {"root", "work", "home"} & set(listing), listing
    for path in ("/root", "/work", "/home", "/var/run/docker.sock", "/run/docker.sock"):
        result = box.exec(f"ls -A {path} 2>/dev/null | head -5")
        assert result.stdout.strip() == "", (path, result.stdout)
    repo_file = Path(__file__).resolve()
    result = box.exec(f"cat {repo_file} /work/main/pyproject.toml /etc/shadow 2>&1")
    assert "def test_the_workers_environment_and_files_are_invisible" not in result.stdout
    assert "djangorestframework" not in result.stdout
    assert result.exit_code != 0


def test_symlinks_planted_in_the_workspace_never_leak_worker_files(box, tmp_path):
    box.exec("ln -s /etc/hostname leak; ln -s / rootdir; ln -s /root/.bashrc rc")
    host_hostname = Path("/etc/hostname").read_bytes() if Path("/etc/hostname").exists() else None
    for path in ("leak", "rootdir/etc/hostname", "rc"):
        try:
            data = box.read_file(path)
        except (SandboxError, FileNotFoundError):
            continue
        # Docker resolves links inside the container: the container's file, not ours.
        assert box.exec(f"cat {path}").stdout.encode() == data
        if host_hostname is not None and "docker" not in type(box).__name__.lower():
            assert data != host_hostname
    snap = box.snapshot(tmp_path / "snap")
    assert not any(p.is_symlink() for p in snap.rglob("*"))
    assert sorted(p.name for p in snap.iterdir()) == ["keep.txt"]


def test_filling_the_workspace_is_stopped_at_its_cap(box):
    # One file past the cap: refused outright on both backends (docker: the
    # tmpfs is full; bubblewrap: RLIMIT_FSIZE).
    one_file = box.exec("head -c 20000000 /dev/zero > big.bin")
    assert one_file.exit_code != 0
    assert int(box.exec("du -sk . | cut -f1").stdout.split()[0]) <= 8 * 1024 + 64
    box.exec("rm -f big.bin")
    # Many files: a tmpfs cap (docker; bubblewrap when the worker may mount)
    # refuses the write that crosses it; otherwise bubblewrap watches the cap
    # (every 0.5 s and after each exec), kills the exec and says so, possibly
    # after writing past the cap for a moment.
    many = box.exec("for i in 1 2 3 4 5 6 7 8; do head -c 2000000 /dev/zero > f$i.bin || exit 9; done; sleep 2")
    assert many.exit_code != 0 and not many.timed_out
    if box.workspace_cap_hard:
        assert many.exit_code == 9
        assert int(box.exec("du -sk . | cut -f1").stdout.split()[0]) <= 8 * 1024 + 64
    else:
        assert "size cap" in many.stderr
    box.exec("rm -f f*.bin")
    assert_still_works(box)


def test_a_cpu_spinner_is_stopped_by_the_timeout(box):
    result = box.exec("while :; do :; done", timeout_s=1)
    assert result.timed_out and result.exit_code is None
    assert_still_works(box)
    assert "while :" not in box.exec("ps -o args 2>/dev/null || ps").stdout  # the spinner was killed


# -- §2 the host disk: sparse files ----------------------------------------------------------


def _allocated(root: Path) -> int:
    return sum(p.lstat().st_blocks * 512 for p in root.rglob("*"))


def test_sparse_files_do_not_fill_the_host_disk_and_what_is_left_out_is_reported(python_backend, tmp_path):
    spec = SandboxSpec(memory_mb=256, pids=48, exec_timeout_s=20, workspace_mb=600, tmp_mb=8)
    with python_backend.start(spec, files={"notes.txt": b"kept\n"}) as sandbox:
        made = sandbox.exec(
            "truncate -s 500M big1.bin big2.bin big3.bin && truncate -s 100M holey.bin && printf end >> holey.bin"
        )
        assert made.exit_code == 0, made
        snap = sandbox.snapshot(tmp_path / "snap")
        left_out = {entry["path"]: entry for entry in sandbox.snapshot_left_out}
    # 1.6 GB of apparent size, yet the host copy takes next to nothing.
    assert _allocated(snap) < 2 * 1024 * 1024
    assert (snap / "notes.txt").read_bytes() == b"kept\n"
    holey = snap / "holey.bin"
    assert holey.stat().st_size == 100 * 1024 * 1024 + 3 and holey.stat().st_blocks * 512 < 1024 * 1024
    with holey.open("rb") as fh:
        fh.seek(-3, 2)
        assert fh.read() == b"end"
    # The default budget (256 MB of apparent size) admits holey.bin, then no 500 MB file fits.
    assert sorted(left_out) == ["big1.bin", "big2.bin", "big3.bin"]
    assert all(e["size"] == 500 * 1024 * 1024 and "snapshot size limit" in e["reason"] for e in left_out.values())
    assert not (snap / "big1.bin").exists()


def test_a_snapshot_is_bounded_by_file_count(backend, tmp_path):
    from sandbox.runtime.backends.base import HostLimits

    backend.limits = HostLimits(snapshot_max_files=5)
    with backend.start(SandboxSpec(workspace_mb=8, tmp_mb=8)) as sandbox:
        assert sandbox.exec("for i in 0 1 2 3 4 5 6 7 8 9 10 11; do echo $i > f$i.txt; done").exit_code == 0
        snap = sandbox.snapshot(tmp_path / "snap")
        left_out = sandbox.snapshot_left_out
    assert len([p for p in snap.rglob("*") if p.is_file()]) == 5
    assert len(left_out) == 7 and all("more than 5 files" in e["reason"] for e in left_out)


# -- §4 FIFOs and other files that are not regular -------------------------------------------


def test_read_file_on_a_fifo_is_a_clear_error_and_never_blocks(box, tmp_path):
    from sandbox.runtime.tools import ToolRunner

    # Opening a FIFO with no writer would block for ever (pytest-timeout's 300 s): each call must refuse it
    # for what it is, before opening it.
    assert box.exec("mkfifo pipe /tmp/pipe2 && ln -s pipe linked").exit_code == 0
    for path in ("pipe", "/tmp/pipe2", "linked"):
        with pytest.raises(SandboxError) as caught:
            box.read_file(path)
        assert "not a regular file" in str(caught.value), path
    outcome = ToolRunner(box, box.spec).run("read_file", {"path": "pipe"})
    assert outcome.is_error and "not a regular file" in outcome.content
    # Writing to it would wait for a reader just the same.
    with pytest.raises(SandboxError, match="not a regular file"):
        box.write_file("pipe", b"x")
    outcome = ToolRunner(box, box.spec).run("write_file", {"path": "/tmp/pipe2", "content": "x"})
    assert outcome.is_error and "not a regular file" in outcome.content
    # Snapshots and listings skip it too, without waiting for a writer.
    snap = box.snapshot(tmp_path / "snap")
    assert sorted(p.name for p in snap.iterdir()) == ["keep.txt"]
    assert "pipe" not in box.list_files()
    assert_still_works(box)


# -- §5 a python check's result cannot be forged ---------------------------------------------

# A planted module that loads the real json and makes every result "true".
FORCE_TRUE = """
import sys
def _force():
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and not p.startswith(("/tmp", "/workspace"))]
    sys.modules.pop("json", None)
    import json as real
    sys.path[:] = saved
    original = real.dumps
    def dumps(obj, *args, **kwargs):
        if isinstance(obj, dict) and obj.get("ok") is True and "value" in obj:
            obj = dict(obj, value=True)
        return original(obj, *args, **kwargs)
    real.dumps = dumps
    sys.modules["json"] = real
_force()
"""
# A planted interpreter that reads the payload (with its nonce) and answers "true".
FAKE_PYTHON = (
    "#!/bin/sh\nnonce=$(cat | tr ',' '\\n' | grep nonce | cut -d'\"' -f4)\n"
    'echo "$nonce {\\"ok\\": true, \\"value\\": true}"\n'
)


def test_modules_and_programs_planted_by_the_agent_cannot_forge_a_python_check(box):
    from grading.engine import grade, parse_rubric

    planted = {}
    for directory in ("/tmp", "/workspace"):
        for name in ("json.py", "sitecustomize.py", "usercustomize.py", "importlib.py", "traceback.py"):
            planted[f"{directory}/{name}"] = FORCE_TRUE.encode()
    planted["/tmp/.local/lib/python3.11/site-packages/usercustomize.py"] = FORCE_TRUE.encode()
    for name in ("python3", "python", "sh"):
        planted[f"/workspace/{name}"] = FAKE_PYTHON.encode()
        planted[f"/tmp/{name}"] = FAKE_PYTHON.encode()
    for path, data in planted.items():
        box.write_file(path, data)
    assert (
        box.exec(
            "chmod +x /workspace/python3 /workspace/python /workspace/sh /tmp/python3 /tmp/python /tmp/sh"
            ' && cd /tmp && python3 -c \'import json; print(json.dumps({"ok": True, "value": False}))\''
        ).stdout.strip()
        == '{"ok": true, "value": true}'
    )  # the plant works where it is imported
    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": "code", "kind": "python", "points": 1, "code": "def check(ctx):\n    return False\n"},
                {"id": "module", "kind": "python", "points": 1, "function": "checks:never"},
                {
                    "id": "half",
                    "kind": "python",
                    "points": 1,
                    "code": "import json\ndef check(ctx):\n    return 0.25\n",
                },
            ],
        }
    )
    result = grade(rubric, answer="", sandbox=box, checks_module="def never(ctx):\n    return False\n")
    by_id = {check.id: check for check in result.checks}
    assert by_id["code"].status == "scored" and by_id["code"].score == 0.0, by_id["code"].explanation
    assert by_id["module"].status == "scored" and by_id["module"].score == 0.0, by_id["module"].explanation
    assert by_id["half"].status == "scored" and by_id["half"].score == 0.25, by_id["half"].explanation
    assert result.passed is False


PLANT_BYTECODE = (
    "import importlib.util, py_compile\n"
    "py_compile.compile('helper.py', cfile=importlib.util.cache_from_source('helper.py'), doraise=True,\n"
    "                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n"
)


def test_bytecode_planted_beside_a_module_a_python_check_imports_never_runs(box):
    """pyrunner's bytecode rule (`sys.pycache_prefix` under /dev/null): an unchecked-hash .pyc in the
    workspace's `__pycache__` is what Python would run for `helper`, whatever helper.py says; the check's
    Python reads the source."""
    from grading.engine import grade, parse_rubric

    box.write_file("helper.py", b"VALUE = True\n")
    assert box.exec(["python", "-c", PLANT_BYTECODE]).exit_code == 0
    box.write_file("helper.py", b"VALUE = False\n")  # the module the check imports, as restored
    planted = box.exec(
        ["python", "-I", "-c", "import sys; sys.path.insert(0, '.'); import helper; print(helper.VALUE)"]
    )
    assert planted.stdout.strip() == "True", planted  # without the rule, the planted bytecode runs
    code = "def check(ctx):\n    import sys\n    sys.path.insert(0, ctx.workspace)\n    import helper\n    return helper.VALUE\n"
    rubric = parse_rubric(
        {"schema": "gymwright.rubric/v1", "checks": [{"id": "helper", "kind": "python", "points": 1, "code": code}]}
    )
    checked = grade(rubric, answer="", sandbox=box).checks[0]
    assert checked.status == "scored" and checked.score == 0.0, checked.explanation


# -- §2 hard caps on /workspace and /tmp, reported; §4 cancelling a running command -----------


def test_the_workspace_cap_is_hard_and_hitting_it_is_reported(box):
    assert box.workspace_cap_hard  # bubblewrap: tmpfs mounts by default (the tests run as root)
    assert box.limit_hit is None
    # A file deleted while still open is invisible to any walk of the tree; the cap still stops it.
    hidden = (
        "import os\nf = open('hidden.bin', 'wb')\nos.unlink('hidden.bin')\n"
        "block = b'x' * 65536\nwritten = 0\n"
        "try:\n    while written < 64 * 1024 * 1024:\n        f.write(block); f.flush(); written += len(block)\n"
        "except OSError as exc:\n    print('stopped', exc.errno, written, flush=True)\n"
        "    import time; time.sleep(3)  # holding the deleted file\n    raise SystemExit(3)\n"
    )
    result = box.exec(["python", "-c", hidden], timeout_s=20)
    assert result.exit_code == 3 and result.stdout.startswith("stopped 28"), result  # ENOSPC
    assert int(result.stdout.split()[2]) <= 8 * 1024 * 1024
    assert "/workspace is full" in result.stderr and "size cap of 8 MB" in result.stderr
    assert box.limit_hit and "/workspace is full" in box.limit_hit
    # The write_file tool says so too, instead of failing the rollout.
    assert box.exec("head -c 7000000 /dev/zero > most.bin").exit_code == 0
    with pytest.raises(SandboxError, match="/workspace is full"):
        box.write_file("more.bin", b"y" * 3_000_000)
    box.exec("rm -f most.bin more.bin")
    # The file went with its process: the space is back.
    assert int(box.exec("du -sk . | cut -f1").stdout.split()[0]) < 1024
    assert_still_works(box)


def test_filling_tmp_is_reported_the_same_way(box):
    result = box.exec("head -c 20000000 /dev/zero > /tmp/fill.bin || exit 4", timeout_s=20)
    assert result.exit_code == 4
    assert box.limit_hit and "/tmp is full" in box.limit_hit and "/tmp is full" in result.stderr


def test_an_interrupt_kills_the_running_command(box):
    started = time.monotonic()
    box.interrupt = lambda: time.monotonic() - started > 1
    result = box.exec("sleep 100; echo finished", timeout_s=60)
    assert result.exit_code is None and not result.timed_out
    assert "cancelled" in result.stderr and "finished" not in result.stdout
    box.interrupt = None
    assert "sleep 100" not in box.exec("ps").stdout
    assert_still_works(box)


def test_python_planted_in_the_user_site_cannot_fake_a_command_check(python_backend):
    """The agent's $HOME is /tmp: a usercustomize.py there would run in every python3 a command
    check starts. Checks run with PYTHONNOUSERSITE=1 (and a fresh bytecode cache)."""
    from sandbox.runtime import run_rollout
    from tests.sandbox.runtime.test_runtime_roles import ScriptPolicy

    plant = (
        "d=$(python3 -c 'import site; print(site.getusersitepackages())') && mkdir -p \"$d\" && "
        "echo 'import os; os._exit(0)' > \"$d/usercustomize.py\"; python3 -c 'import sys; sys.exit(1)'; "
        'echo "exit=$?"'
    )
    task = {
        "schema": "gymwright.task/v1",
        "id": "planted",
        "prompt": "Make the check pass.",
        "environment": {"limits": {"max_steps": 3}},
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "honest", "kind": "command", "points": 1, "run": "python3 -c 'import sys; sys.exit(1)'"}],
        },
    }
    result = run_rollout(task, policy=ScriptPolicy(plant), backend=python_backend)
    assert result.error is None, result.error
    if python_backend.name == "bubblewrap":
        # HOME=/tmp there, so the plant works for the agent's own python3 (under docker the
        # user site is under an unwritable HOME and the plant fails already).
        assert result.answer.strip() == "exit=0"
    assert result.grade.checks[0].score == 0.0 and result.grade.reward == 0
