"""`make bench` rewrites only its own section of BENCHMARKS.md (bench/run_all.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("run_all", ROOT / "bench" / "run_all.py")
run_all = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_all)


def _result(name, output, status=0):
    return {
        "name": name,
        "command": f".venv/bin/python bench/{name}",
        "status": status,
        "seconds": 1.0,
        "load_before": "0.10 / 0.20 / 0.30",
        "load_after": "0.40 / 0.50 / 0.60",
        "output": output,
    }


def test_the_latest_run_replaces_itself_and_keeps_the_hand_written_sections(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\n## Engine (issue 3)\n\nanalysis kept\n")
    run_all.write(run_all.render([_result("bench_a.py", "p95 12 ms\nratio 0.5x")]), path)
    run_all.write(run_all.render([_result("bench_b.py", "figure 7", status=1)]), path)
    text = path.read_text()
    assert text.count(run_all.BEGIN) == 1 and text.count(run_all.END) == 1
    assert "analysis kept" in text and "## Engine (issue 3)" in text
    assert "bench_a.py" not in text  # the previous run's block is gone
    assert "### bench_b.py" in text and "figure 7" in text and "exit status 1" in text
    assert "load average 0.10 / 0.20 / 0.30 before" in text and "`.venv/bin/python bench/bench_b.py`" in text


def test_a_run_of_some_scripts_keeps_the_other_scripts_blocks(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n")
    run_all.write(run_all.render([_result("bench_a.py", "a first"), _result("bench_b.py", "b first")]), path)
    run_all.write(run_all.render([_result("bench_b.py", "b again")], run_all.kept_blocks(path)), path)
    text = path.read_text()
    assert text.count(run_all.BEGIN) == 1 and text.count(run_all.END) == 1
    assert "a first" in text and "b again" in text and "b first" not in text
    assert text.count("### bench_a.py") == 1 and text.count("### bench_b.py") == 1
    assert text.index("### bench_a.py") < text.index("### bench_b.py")
    assert "the other blocks are kept from earlier runs" in text
    # a block written before blocks were dated is dated by its section's header
    kept_a = text.partition("### bench_a.py")[2].partition("```")[0]
    assert ", finished 2" in kept_a and "UTC, load average" in kept_a


def test_hand_written_sections_inside_the_markers_are_kept_above_them(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n")
    run_all.write(run_all.render([_result("bench_a.py", "a first")]), path)
    text = path.read_text().replace(run_all.BEGIN, run_all.BEGIN + "\n\n## Stray analysis\n\n### kept table\n", 1)
    path.write_text(text)
    assert list(run_all.kept_blocks(path)) == ["bench_a.py"]
    run_all.write(run_all.render([_result("bench_b.py", "b")], run_all.kept_blocks(path)), path)
    text = path.read_text()
    assert text.index("## Stray analysis") < text.index(run_all.BEGIN)
    assert "### kept table" in text and "a first" in text and "### b" in text


def test_a_script_s_own_load_does_not_mark_it_but_other_work_or_a_busy_start_does(tmp_path):
    # bench_load.py's own clients raise the load after it to ~5: quiet all the same when nothing else ran.
    own = {
        **_result("bench_a.py", "a"),
        "load_after": "5.28 / 4.86 / 5.92",
        "load_peak": 5.3,
        "others_cores": 0.03,
        "reference_ms": 41.6,
        "reference_after_ms": 63.2,
    }
    others = {**_result("bench_b.py", "b"), "others_cores": 0.9, "others_heaviest": "pytest: 27.0 s"}
    busy = {**_result("bench_c.py", "c"), "load_before": "2.50 / 1.00 / 1.00", "others_cores": 0.0}
    unknown = _result("bench_d.py", "d")  # no other-work figure: never called quiet
    text = run_all.render([own, others, busy, unknown])
    blocks = {chunk.split("\n", 1)[0]: chunk for chunk in text.split("### ")[1:]}
    assert "not a quiet run" not in blocks["bench_a.py"] and "up to 5.30 during" in blocks["bench_a.py"]
    assert (
        "other work 0.03 cores; machine reference 42 ms before, 63 ms after (bench/other_work.py)."
        in blocks["bench_a.py"]
    )
    for name in ("bench_b.py", "bench_c.py", "bench_d.py"):
        assert "not a quiet run" in blocks[name], name
    assert "other work 0.90 cores (pytest: 27.0 s)." in blocks["bench_b.py"]


other_spec = importlib.util.spec_from_file_location("other_work", ROOT / "bench" / "other_work.py")
other_work = importlib.util.module_from_spec(other_spec)
other_spec.loader.exec_module(other_work)

BURN = "import time\nwhile time.process_time() < 1.2: pass\n"


def test_other_work_counts_processes_outside_the_run_and_not_its_own_or_its_services():
    import subprocess
    import sys
    import time

    # The run: it starts a child that outlives it (as a sandbox's bwrap outlives its spawner), which is then
    # reparented out of the run's tree and must stay the run's own.
    run = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys, time\nprint(subprocess.Popen([sys.executable, '-c', {BURN!r}]).pid, flush=True)\n"
            "time.sleep(0.8)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    with other_work.OtherWork(root=run.pid) as other:
        outliving = int(run.stdout.readline())
        elsewhere = subprocess.Popen([sys.executable, "-c", BURN])  # not under the run: another program's work
        run.wait()
        elsewhere.wait()
        while Path(f"/proc/{outliving}").exists() and b") Z" not in Path(f"/proc/{outliving}/stat").read_bytes():
            time.sleep(0.05)
    assert run.pid not in other.by_pid and outliving not in other.by_pid, other.heaviest(count=10)
    # Seen from its first reading on: all but the work after the last reading (at most INTERVAL_S) is counted.
    assert other.by_pid.get(elsewhere.pid, 0) >= 1.2 - other_work.INTERVAL_S - 0.1
    assert other.names[elsewhere.pid] == Path(sys.executable).name[:15]


def test_the_heaviest_other_work_is_summed_by_program():
    other = other_work.OtherWork()
    other.by_pid = {10: 0.5, 11: 0.5, 12: 0.25, 13: 0.01, 20: 1.5, 30: 0.02}
    other.names = {10: "bwrap", 11: "bwrap", 12: "bwrap", 13: "bwrap", 20: "pytest", 30: "kworker/0:1"}
    assert other.heaviest() == "pytest: 1.5 s, bwrap ×4: 1.3 s"  # a program under 0.05 s is not named


def test_services_and_container_processes_are_the_run_s_own():
    table = {
        10: (1, "bash", 0),  # another program
        20: (1, "postgres", 0),
        21: (20, "postgres", 0),  # a backend
        30: (1, "containerd-shim", 0),
        31: (30, "python3", 0),  # a container's process
        40: (1, "run_all", 0),
        41: (40, "gunicorn", 0),
        42: (41, "gunicorn", 0),
    }
    memo = {}
    assert [pid for pid in table if not other_work._ours(pid, table, 40, memo)] == [10]


def test_each_script_waits_for_the_load_a_previous_one_left_to_settle(monkeypatch):
    readings = iter([8.0, 5.0, 1.5])
    monkeypatch.setattr(run_all.os, "getloadavg", lambda: (next(readings), 0.0, 0.0))
    slept = []
    monkeypatch.setattr(run_all.time, "sleep", slept.append)
    run_all.settle(limit_s=60)
    assert len(slept) == 2  # until the third reading, the first at or under QUIET_LOAD
    monkeypatch.setattr(run_all.os, "getloadavg", lambda: (9.0, 0.0, 0.0))
    assert run_all.settle(limit_s=0.01) >= 0.01  # never waits for ever


def test_the_machine_reference_is_the_best_cpu_time_of_its_rounds(monkeypatch):
    """What lets figures of two days compare: the same fixed work timed in CPU (not wall) time, the best round kept
    (a round slowed by a neighbour's burst is not the machine's speed)."""
    readings = iter([0.0, 0.090, 1.0, 1.045, 2.0, 2.060])
    monkeypatch.setattr(other_work.time, "process_time", lambda: next(readings))
    assert round(other_work.machine_reference_ms(rounds=3), 6) == 45.0


def test_the_process_table_reads_a_name_with_spaces_and_parentheses():
    """Every benchmark reads /proc/<pid>/stat through other_work.proc_stat: the fields after a comm that holds
    ") " (which any program may name itself) are still the right ones."""
    import os

    comm = Path("/proc/self/comm")
    before = comm.read_text().strip()
    comm.write_text("a ) b (c)")
    try:
        name, fields = other_work.proc_stat(os.getpid())
    finally:
        comm.write_text(before)
    assert name == "a ) b (c)" and int(fields[1]) == os.getppid()
    assert other_work.cpu_ticks([os.getpid()])[os.getpid()] > 0 and other_work.proc_stat(2**22 + 1) is None
