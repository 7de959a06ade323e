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
