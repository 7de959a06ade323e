"""Abuse suite for the pack's graders: the reward functions a trainer calls (reward.py, from verl's thread
pool) and the Harbor verifier (tests/test.sh) are graded as an agent would attack them, and agree with the
engine on the same answer (RUBRIC.md's "same rule everywhere").

- reward.py: any response string gets a float score (the 5 KB / 4,000-line fence that held a worker
  thread for 51 s, lone surrogates, NULs, 1 MB), from 8 threads at once.
- The Harbor verifier reads answer.txt as a file (a link to the task's own files, which hold the
  reference answer, a FIFO: an empty answer), and no bytecode the agent planted in a `__pycache__` beside
  a restored grader file runs in the checks' Python.
- Parity: engine grade == the CLI's == compute_score == Harbor's reward.json on the same answers.
"""

from __future__ import annotations

import hashlib
import json
import os
import py_compile
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from grading.engine import content_sha256, grade, parse_task
from packs import archive
from tests.packs.test_standalone import environment, harbor_verify
from tests.support.venvs import grader_python

CHECKER = b'import sys\nsys.exit(0 if "hello" in open("out.txt").read() else 1)\n'
EVIL = 'open("/logs/pwned", "w").write("planted bytecode ran")\nraise SystemExit(0)\n'
BLOBS = {hashlib.sha256(CHECKER).hexdigest(): CHECKER}

# A text task with ten deterministic checks (the benchmark's rubric too: bench/bench_reward_fn.py).
TEXT_TASK = {
    "schema": "gymwright.task/v1",
    "id": "q3-summary",
    "version": 1,
    "title": "Q3 summary",
    "prompt": "Summarise Q3 as a JSON object: the total, and a sentence as the summary.",
    "environment": environment(),
    "files": [],
    "solution": {
        "script": None,
        "answer": '```json\n{"total": 1234.5, "summary": "Q3 revenue was 1234.5, up 12% on Q2."}\n```',
    },
    "rubric": {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 0.5,
        "checks": [
            {
                "id": "json_total",
                "kind": "json_field",
                "points": 2,
                "pointer": "/total",
                "op": "eq",
                "expected": 1234.5,
            },
            {"id": "says_q3", "kind": "string_match", "points": 1, "mode": "contains", "expected": "Q3 revenue"},
            {"id": "no_apology", "kind": "string_match", "points": -1, "mode": "contains", "expected": "as an AI"},
            {"id": "total", "kind": "number", "points": 1, "expected": 1234.5, "extract": r"revenue was ([\d.,]+)"},
            {"id": "growth", "kind": "regex", "points": 1, "pattern": r"\bup \d+(\.\d+)?%", "flags": "i"},
            {"id": "no_shouting", "kind": "regex", "points": -1, "pattern": "[A-Z]{6,}"},
            {
                "id": "no_placeholder",
                "kind": "regex",
                "points": -1,
                "pattern": r"\b(TODO|TBD|lorem ipsum)\b",
                "flags": "i",
            },
            {"id": "names_quarter", "kind": "regex", "points": 1, "pattern": r"\bQ[1-4]\b", "min_count": 2},
            {"id": "first_number", "kind": "number", "points": 1, "expected": 1234.5, "tolerance": 0.5},
            {
                "id": "close_to_key",
                "kind": "text_similarity",
                "points": 1,
                "metric": "fuzzy",
                "threshold": 0.4,
                "reference": "Q3 revenue was 1234.5, up 12% on Q2.",
            },
        ],
    },
    "tags": [],
    "metadata": {},
}

# An agentic task: a grader file restored into the workspace and run by a command, and an answer check.
AGENT_TASK = {
    "schema": "gymwright.task/v1",
    "id": "write-hello-42",
    "version": 1,
    "title": "Hello and 42",
    "prompt": "Write hello to out.txt and answer 42.",
    "environment": environment(),
    "files": [{"path": "checker.py", "sha256": hashlib.sha256(CHECKER).hexdigest(), "role": "grader"}],
    "solution": {"script": "echo hello > out.txt && echo 42 > answer.txt", "answer": "42"},
    "rubric": {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": "says_42", "kind": "string_match", "points": 1, "mode": "contains", "expected": "42"},
            {
                "id": "checker_passes",
                "kind": "command",
                "points": 1,
                "run": "python3 -m checker",
                "expect_exit": 0,
                "timeout_s": 60,
            },
        ],
    },
    "tags": [],
    "metadata": {},
}

# An agentic task whose commands run the system's Python and read the agent's program's output: the Harbor verifier
# must give them the app's rules (no user site from the agent's HOME, odd output counts against absence checks).
QUIET_TASK = {
    "schema": "gymwright.task/v1",
    "id": "quiet-log",
    "version": 1,
    "title": "Quiet log",
    "prompt": "Write hello to out.txt; never log a kill.",
    "environment": environment(),
    "files": [],
    "solution": {"script": "echo hello > out.txt && echo fine > log.bin", "answer": "done"},
    "rubric": {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {
                "id": "says_hello",
                "kind": "command",
                "points": 1,
                "run": '/usr/bin/python3 -c \'import sys; sys.exit(open("out.txt").read() != "hello\\n")\'',
                "expect_exit": 0,
            },
            {
                "id": "no_kill",
                "kind": "regex",
                "points": 1,
                "target": "stdout:cat log.bin",
                "pattern": "kill the process",
                "must_match": False,
            },
        ],
    },
    "tags": [],
    "metadata": {},
}
FENCE = "```json\n" + "\n" * 4000 + "{" + " " * 1000  # 5 KB, 4,000 lines, never closed
HOSTILE = [
    FENCE,
    "```" + "\n" * 4000 + "```",
    "Q3 revenue \ud800 was 1234.5 \udfff",
    "Q3 revenue\x00 was 1234.5",
    "Q3 " * 350_000,
    "[" * 100_000,
    TEXT_TASK["solution"]["answer"],
]


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("abuse-pack")
    items = sorted(
        (
            archive.TaskItem(parse_task(doc).to_document() | doc, content_sha256(doc))
            for doc in (TEXT_TASK, AGENT_TASK, QUIET_TASK)
        ),
        key=lambda item: item.document["id"],
    )
    archive.build_pack(
        out=tmp / "pack.tar.gz",
        info=archive.PackInfo(slug="abuse", name="A", version="1.0.0", test_ratio=0.0),
        tasks=items,
        read_blob=BLOBS.__getitem__,
        scratch_dir=tmp / "scratch",
    )
    with tarfile.open(tmp / "pack.tar.gz") as tar:
        tar.extractall(tmp / "out", filter="data")
    return tmp / "out" / "abuse-1.0.0"


def in_grader_venv(pack_dir: Path, script: str, payload) -> object:
    """Run `script` in the pack's clean grader virtualenv (no Django, no Gymwright), `payload` on stdin as JSON."""
    done = subprocess.run(
        [grader_python(), "-I", "-c", f"import sys; sys.path.insert(0, {str(pack_dir)!r})\n" + script],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=pack_dir.parent,
        env={"PATH": "/usr/bin:/bin", "HOME": str(pack_dir)},
        timeout=600,
    )  # a hang guard only
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


THREADED = """
import json, os, sys
from concurrent.futures import ThreadPoolExecutor
import reward
answers = json.loads(sys.stdin.read())
with ThreadPoolExecutor(8) as pool:
    scores = list(pool.map(lambda answer: reward.compute_score("gymwright/abuse", answer, "q3-summary"), answers * 2))
    grades = list(pool.map(lambda answer: reward.grade_response("q3-summary", answer), answers))
print(json.dumps({"scores": scores, "grades": grades}))
sys.stdout.flush(); os._exit(0)
"""


def test_any_response_gets_a_float_score_from_a_thread_pool(pack_dir):
    """verl calls compute_score from a thread pool, where no CPU timer can fire: the fence that held a thread
    for 51 s now fails its JSON check at once, and surrogates, NULs and a megabyte each get a score."""
    seen = in_grader_venv(pack_dir, THREADED, HOSTILE)
    assert len(seen["scores"]) == 2 * len(HOSTILE)
    for answer, result in zip(HOSTILE * 2, seen["scores"]):
        assert isinstance(result["score"], float) and 0.0 <= result["score"] <= result["score_upper"] <= 1.0
        # Every check decided, the deep nesting's too: nothing here needs a judge, and an answer that breaks
        # a check fails it (INTEGRITY.md, rule 1); "unscored" would be a reward upper bound it did not earn.
        assert result["complete"] == 1 and result["score"] == result["score_upper"], (answer[:40], result)
    for answer, document in zip(HOSTILE, seen["grades"]):
        json_check = {check["id"]: check for check in document["checks"]}["json_total"]
        assert document["complete"] and all(check["status"] == "scored" for check in document["checks"]), document
        if answer is TEXT_TASK["solution"]["answer"]:
            assert document["reward"] == 1.0 and json_check["score"] == 1.0
        else:
            assert json_check["status"] == "scored" and json_check["score"] == 0.0, json_check
    deep = {c["id"]: c for c in seen["grades"][HOSTILE.index("[" * 100_000)]["checks"]}["json_total"]
    assert "nested deeper than" in deep["explanation"], deep
    assert "not JSON" in {c["id"]: c for c in seen["grades"][0]["checks"]}["json_total"]["explanation"]


LIMITED = """
import json, os, sys
import reward
answer = sys.stdin.read()
first = reward.grade_response("q3-summary", answer)
os.environ["GYMWRIGHT_SIMILARITY_MAX_CHARS"] = "1000000"  # read once, on the first call: not this one
second = reward.grade_response("q3-summary", answer)
print(json.dumps([{c["id"]: c for c in g["checks"]}["close_to_key"] for g in (first, second)]))
sys.stdout.flush(); os._exit(0)
"""


def test_the_reward_function_takes_its_limits_from_the_environment_it_starts_in(pack_dir):
    """The grading limits are read from the trainer's environment once (not on each of its tens of thousands of
    calls): a lab that lowers GYMWRIGHT_SIMILARITY_MAX_CHARS has longer responses fail the check, every call."""
    answer = TEXT_TASK["solution"]["answer"] + " padding" * 40
    done = subprocess.run(
        [grader_python(), "-I", "-c", f"import sys; sys.path.insert(0, {str(pack_dir)!r})\n" + LIMITED],
        input=answer,
        capture_output=True,
        text=True,
        cwd=pack_dir.parent,
        env={"PATH": "/usr/bin:/bin", "HOME": str(pack_dir), "GYMWRIGHT_SIMILARITY_MAX_CHARS": "100"},
        timeout=600,
    )  # a hang guard only
    assert done.returncode == 0, done.stderr[-3000:]
    for check in json.loads(done.stdout):
        assert check["status"] == "scored" and check["score"] == 0.0, check
        assert "over the limit of 100 for text_similarity" in check["explanation"], check


def test_an_agentic_task_is_not_a_parquet_row(pack_dir):
    import pandas as pd

    ids = [row["task_id"] for row in pd.read_parquet(pack_dir / "data" / "train.parquet")["extra_info"]]
    assert ids == ["q3-summary"]
    manifest = json.loads((pack_dir / "manifest.json").read_text())
    assert manifest["counts"]["parquet"] == {"train": 1, "test": 0} and manifest["counts"]["tasks"] == 3
    assert (pack_dir / "tasks" / "write-hello-42" / "tests" / "test.sh").is_file()  # a Harbor task
    assert "`write-hello-42`" in (pack_dir / "README.md").read_text()


def plant_bytecode(workspace: Path, module: str) -> None:
    """An unchecked-hash .pyc (PEP 552: never compared with its source) of EVIL where `module`'s cached bytecode
    would be: Python runs it instead of the restored source unless it reads no workspace bytecode."""
    source = workspace.parent / f"{workspace.name}-evil.py"
    source.write_text(EVIL)
    target = workspace / "__pycache__" / f"{module}.{sys.implementation.cache_tag}.pyc"
    target.parent.mkdir()
    py_compile.compile(
        str(source), cfile=str(target), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH, doraise=True
    )


@pytest.mark.bubblewrap
@pytest.mark.parametrize(
    "answer_file", ["link to the task", "link to a file of its own", "FIFO", "folder", "over a megabyte"]
)
def test_the_harbor_verifier_reads_no_link_and_runs_no_planted_bytecode(pack_dir, tmp_path, answer_file):
    """The agent's workspace: out.txt without hello, a .pyc of "exit 0" planted where the restored grader file
    checker.py caches its bytecode, and answer.txt that is not its own regular file. Before, the verifier read
    the answer through the link (the task's files hold the reference answer) and ran the planted bytecode: 1.0."""
    task_dir = pack_dir / "tasks" / "write-hello-42"
    workspace, logs = tmp_path / "workspace", tmp_path / "logs"
    workspace.mkdir()
    logs.mkdir()
    (workspace / "out.txt").write_text("bye\n")
    plant_bytecode(workspace, "checker")
    answer = workspace / "answer.txt"
    if answer_file == "link to the task":
        answer.symlink_to("/tests/task.json")
    elif answer_file == "link to a file of its own":
        (workspace / "note.txt").write_text("42")
        answer.symlink_to("note.txt")
    elif answer_file == "FIFO":
        os.mkfifo(answer)  # nobody writes to it: a read would block the verifier for ever
    elif answer_file == "folder":
        answer.mkdir()
        (answer / "42").write_text("42")
    else:
        answer.write_text("42 " * 400_000)
    rewards, document = harbor_verify(task_dir, workspace, logs)
    checks = {check["id"]: check for check in document["checks"]}
    assert checks["says_42"]["score"] == 0.0, checks["says_42"]
    assert checks["checker_passes"]["score"] == 0.0, checks["checker_passes"]
    assert rewards["reward"] == 0.0
    assert not (logs / "pwned").exists()


@pytest.mark.bubblewrap
def test_the_harbor_verifier_grades_the_honest_episode_with_the_restored_checker(pack_dir, tmp_path):
    """The control: the same checker, restored from the task, passes the work done (no planted bytecode needed)."""
    workspace, logs = tmp_path / "workspace", tmp_path / "logs"
    workspace.mkdir()
    logs.mkdir()
    (workspace / "out.txt").write_text("hello\n")
    (workspace / "answer.txt").write_text("42\n")
    (workspace / "checker.py").write_text("import sys; sys.exit(1)\n")  # the agent's copy: replaced by the task's
    rewards, document = harbor_verify(pack_dir / "tasks" / "write-hello-42", workspace, logs)
    assert rewards["reward"] == 1.0 and rewards["complete"] == 1, document


@pytest.mark.bubblewrap
@pytest.mark.parametrize("honest", [False, True], ids=["hostile", "honest"])
def test_the_harbor_verifier_runs_no_user_site_and_reads_odd_output_against_the_agent(pack_dir, tmp_path, honest):
    """The agent leaves a usercustomize in its HOME's user site (`os._exit(0)` in every Python a check starts) and
    prints the forbidden phrase in UTF-16. Before, the verifier's commands read the user site (the app's never
    did) and its output was read with replacement characters: both checks passed, reward 1.0 for no work."""
    workspace, logs = tmp_path / "workspace", tmp_path / "logs"
    workspace.mkdir()
    logs.mkdir()
    site = workspace / ".local" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    site.mkdir(parents=True)
    (site / "usercustomize.py").write_text("import os\nos._exit(0)\n")
    (workspace / "out.txt").write_text("hello\n" if honest else "bye\n")
    (workspace / "log.bin").write_bytes(b"fine\n" if honest else "kill the process\n".encode("utf-16"))
    rewards, document = harbor_verify(pack_dir / "tasks" / "quiet-log", workspace, logs, home="/workspace")
    scores = {check["id"]: check["score"] for check in document["checks"]}
    assert scores == ({"says_hello": 1.0, "no_kill": 1.0} if honest else {"says_hello": 0.0, "no_kill": 0.0}), document
    assert rewards["reward"] == (1.0 if honest else 0.0)


PARITY = [
    TEXT_TASK["solution"]["answer"],
    "Q3 revenue was 1234.5, up 12% on Q2.",
    '{"total": 1234.5}',
    "Q3 revenue was 99. AS AN AI I cannot TODO",
    FENCE,
    "Q3 revenue\x00 was 1234.5, UP 3% (Q4 next)",
]


@pytest.mark.bubblewrap
def test_the_engine_the_cli_the_reward_function_and_harbor_agree_on_the_same_answers(pack_dir, tmp_path):
    rubric = parse_task(TEXT_TASK).rubric
    engine = [grade(rubric, answer=answer).to_document() for answer in PARITY]
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps(TEXT_TASK))
    cli = []
    for index, answer in enumerate(PARITY):
        answer_file = tmp_path / f"answer-{index}.txt"
        answer_file.write_bytes(answer.encode("utf-8"))
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "grading.engine",
                "grade",
                "--task",
                str(task_file),
                "--answer-file",
                str(answer_file),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert done.returncode in (0, 1), done.stderr
        cli.append(json.loads(done.stdout))
    scored = in_grader_venv(
        pack_dir,
        "import json, os, sys, reward\n"
        "out = [reward.compute_score('gymwright/abuse', a, 'q3-summary') for a in json.loads(sys.stdin.read())]\n"
        "print(json.dumps(out)); sys.stdout.flush(); os._exit(0)\n",
        PARITY,
    )
    harbor = []
    for index, answer in enumerate(PARITY):
        workspace, logs = tmp_path / f"ws-{index}", tmp_path / f"logs-{index}"
        workspace.mkdir()
        logs.mkdir()
        (workspace / "answer.txt").write_bytes(answer.encode("utf-8"))
        harbor.append(harbor_verify(pack_dir / "tasks" / "q3-summary", workspace, logs))
    for answer, ours, by_cli, by_reward, (rewards, harbor_grade) in zip(PARITY, engine, cli, scored, harbor):
        assert ours["reward"] == by_cli["reward"] == by_reward["score"] == rewards["reward"], answer[:60]
        assert (
            [(c["id"], c["score"]) for c in ours["checks"]]
            == [(c["id"], c["score"]) for c in by_cli["checks"]]
            == [(c["id"], c["score"]) for c in harbor_grade["checks"]]
        ), answer[:60]
    assert engine[0]["reward"] == 1.0 and 0.0 < engine[1]["reward"] < 1.0 and engine[4]["reward"] == 0.0
