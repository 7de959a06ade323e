"""`make mutate`: mutation testing of the cores with cosmic-ray, on a fixed, documented subset.

Each target names the modules to mutate and the tests that must kill their mutants (docs/testing.md,
"Mutation testing"). The run works on a copy of the repository's tracked files under var/mutate/ (cosmic-ray
rewrites the module on disk for each mutant; an interrupted run must never leave a mutant in the work tree),
one mutant at a time, under `nice -n 19`, with each mutant's tests bounded by `--timeout` seconds.

    python tools/mutate.py [TARGET ...] [--whole] [--survivors] [--timeout S] [--tests-timeout S]
    python tools/mutate.py --list

Operators: comparisons to their boundary and their negation, + - * / swapped pairwise, `not` added,
True/False, and/or, break/continue, numbers, exceptions, loops run zero times, decorators removed. The
operators that make mostly noise here (bitwise and shift operators, pow, mod, every comparison to
every other, variable insertion) are filtered out, so that each survivor is worth reading.
A line marked `# pragma: no mutate` is not mutated: each such mark says in its comment why its mutants
are equivalent.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "var" / "mutate"

# The pure cores' tests need neither Django nor the suite's conftest files: without them (LEAN) a run starts in
# about a quarter of the time, which is most of a mutant's cost.
LEAN = ["--noconftest", "-o", "addopts=", "-p", "no:django"]


@dataclasses.dataclass(frozen=True)
class Target:
    modules: list[str]  # what is mutated
    tests: list[str]  # pytest arguments: the tests that must kill the mutants
    functions: tuple[str, ...] = ()  # the subset run by default: mutants inside these functions only
    lean: bool = False  # the tests run without Django and the conftest files (see LEAN)


TARGETS: dict[str, Target] = {
    "scoring": Target(
        ["grading/engine/scoring.py"],
        ["tests/grading/engine/test_engine_scoring.py", "tests/grading/engine/test_engine_gates.py"],
        ("_totals", "clipped", "grade_totals", "reward_range", "aggregate", "_scored", "_number", "_field"),
        lean=True,
    ),
    "tools": Target(
        ["sandbox/runtime/tools.py"],
        ["tests/sandbox/runtime/test_runtime_tools.py", "tests/sandbox/runtime/test_runtime_harness.py"],
        ("__init__", "_cap", "_tool_read_file", "_tool_list_files", "_custom", "_format_exec", "_timeout"),
        lean=True,
    ),
    "rollout": Target(
        ["sandbox/runtime/rollout.py"],
        ["tests/sandbox/runtime/test_runtime_rollout.py", "-k", "capture or too_large"],
        ("_capture",),
        lean=True,
    ),
    "review-services": Target(
        ["review/services.py"],
        ["tests/review/test_services.py", "tests/review/test_api.py"],
        ("task_submit",),
    ),
    "pack-verify": Target(
        ["packs/archive/manifest.py", "packs/archive/verify.py"],
        ["tests/packs/test_archive.py", "-k", "verify or manifest"],
        ("manifest_digest", "verify_pack"),
        lean=True,
    ),
}

KEEP_BINARY = "Add_Sub|Sub_Add|Mul_Div|Div_Mul|FloorDiv_Div"
KEEP_COMPARISON = (
    "Eq_NotEq|NotEq_Eq|Lt_LtE|Lt_GtE|LtE_Lt|LtE_Gt|Gt_GtE|Gt_LtE|GtE_Gt|GtE_Lt|Is_IsNot|IsNot_Is|In_NotIn|NotIn_In"
)
EXCLUDE_OPERATORS = [
    rf"core/ReplaceBinaryOperator_(?!({KEEP_BINARY})$)",
    rf"core/ReplaceComparisonOperator_(?!({KEEP_COMPARISON})$)",
    r"core/ReplaceUnaryOperator_(?!(USub_UAdd|Delete_Not|Delete_USub)$)",
    r"core/VariableReplacer",
    r"core/VariableInserter",
]


def tracked_copy(tree: Path) -> None:
    """The repository's tracked files as they are in the work tree (uncommitted test changes included)."""
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            target = tree / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def config_text(target: Target, *, timeout: float, tests_timeout: int) -> str:
    python = Path(sys.executable)
    # -p no:xdist: one process, the machine's other work goes on; --reuse-db: the test database is made once.
    command = [
        "nice",
        "-n",
        "19",
        str(python),
        "-m",
        "pytest",
        "-p",
        "no:xdist",
        "-p",
        "no:cacheprovider",
        "-x",
        "-q",
        f"--timeout={tests_timeout}",
        *(LEAN if target.lean else ["--reuse-db"]),
        *target.tests,
    ]
    quoted = " ".join(f"'{part}'" if " " in part else part for part in command)
    return "\n".join(
        [
            "[cosmic-ray]",
            f"module-path = {json.dumps(target.modules)}",
            f"timeout = {timeout}",
            "excluded-modules = []",
            f"test-command = {json.dumps(quoted)}",
            "",
            "[cosmic-ray.distributor]",
            'name = "local"',
            "",
            "[cosmic-ray.filters.operators-filter]",
            f"exclude-operators = {json.dumps(EXCLUDE_OPERATORS)}",
            "",
        ]
    )


def bin_of(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def skip_outside(session: Path, functions: tuple[str, ...]) -> None:
    """Mark every mutant outside `functions` skipped (cosmic-ray knows each mutant's enclosing definition)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as work_db:
        for item in list(work_db.pending_work_items):
            if not any(mutation.definition_name in functions for mutation in item.mutations):
                work_db.set_result(
                    item.job_id, WorkResult(output="outside the subset", worker_outcome=WorkerOutcome.SKIPPED)
                )


def run_target(name: str, tree: Path, *, timeout: float, tests_timeout: int, whole: bool, survivors: bool) -> dict:
    target = TARGETS[name]
    config = WORK / f"{name}.toml"
    session = WORK / f"{name}.sqlite"
    config.write_text(config_text(target, timeout=timeout, tests_timeout=tests_timeout))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    run = lambda *args: subprocess.run(args, cwd=tree, env=env, check=True)  # noqa: E731
    if survivors:
        # The last session's survivors only, against today's tests: the mutants a new test should kill. (Adding
        # tests cannot let a killed mutant live, so the session's figure is then today's.)
        if not session.exists():
            sys.exit(f"{name}: no earlier session in {session}; run it whole first")
        with sqlite3.connect(session) as db:
            db.execute("DELETE FROM work_results WHERE lower(test_outcome) = 'survived'")
    else:
        session.unlink(missing_ok=True)
        run(bin_of("cosmic-ray"), "init", str(config), str(session))
        run(bin_of("cr-filter-operators"), str(session), str(config))
        run(bin_of("cr-filter-pragma"), str(session))
        if target.functions and not whole:
            skip_outside(session, target.functions)
    baseline = subprocess.run([bin_of("cosmic-ray"), "baseline", str(config)], cwd=tree, env=env)
    if baseline.returncode != 0:
        sys.exit(f"{name}: the tests fail without any mutation; fix them first")
    run(bin_of("cosmic-ray"), "exec", str(config), str(session))
    return summary(name, session)


def summary(name: str, session: Path) -> dict:
    with sqlite3.connect(session) as db:
        rows = db.execute(
            "SELECT r.worker_outcome, r.test_outcome, m.module_path, m.operator_name, m.start_pos_row "
            "FROM work_results r JOIN mutation_specs m ON m.job_id = r.job_id"
        ).fetchall()
    tested = [row for row in rows if str(row[0]).lower() == "normal"]  # stored as the enum names
    survived = [row for row in tested if str(row[1]).lower() == "survived"]
    killed = len(tested) - len(survived)
    return {
        "target": name,
        "mutants": len(tested),
        "killed": killed,
        "survived": [
            f"{path}:{line} {operator}" for _, _, path, operator, line in sorted(survived, key=lambda r: r[2:])
        ],
        "skipped": len(rows) - len(tested),
        "rate": round(100 * killed / len(tested), 1) if tested else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", help=f"any of {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one mutant's tests may take")
    parser.add_argument("--tests-timeout", type=int, default=120, help="pytest-timeout for each test")
    parser.add_argument("--whole", action="store_true", help="every function of the modules, not the subset")
    parser.add_argument(
        "--survivors", action="store_true", help="run only the last session's surviving mutants again (after new tests)"
    )
    parser.add_argument("--list", action="store_true", help="print the targets and their tests, and stop")
    args = parser.parse_args()
    if args.list:
        for name, target in TARGETS.items():
            print(f"{name}: {' '.join(target.modules)} [{', '.join(target.functions) or 'all'}]")
            print(f"    killed by: pytest {' '.join(target.tests)}")
        return
    unknown = sorted(set(args.targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; --list shows them")
    WORK.mkdir(parents=True, exist_ok=True)
    tree = WORK / "tree"
    tracked_copy(tree)
    results = [
        run_target(
            name,
            tree,
            timeout=args.timeout,
            tests_timeout=args.tests_timeout,
            whole=args.whole,
            survivors=args.survivors,
        )
        for name in args.targets or TARGETS
    ]
    report = {"date": datetime.now(UTC).strftime("%Y-%m-%d"), "results": results}
    (WORK / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    for result in results:
        print(
            f"{result['target']}: {result['killed']} of {result['mutants']} mutants killed ({result['rate']} %), "
            f"{result['skipped']} filtered"
        )
        for survivor in result["survived"]:
            print(f"  survived: {survivor}")


if __name__ == "__main__":
    main()
