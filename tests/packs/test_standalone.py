"""The pack stands alone: reward.py in a clean virtualenv (no Django, no Gymwright) grades as the
engine does, and every exported Harbor task passes `harbor lint` and grades in its own sandbox."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from grading.engine import JudgeClient, JudgeConfig, content_sha256, grade, parse_task
from packs import archive
from tests.support.harbor_verifier import run_test_sh
from tests.support.openai_server import OpenAIServer
from tests.support.venvs import grader_python, harbor_bin

GRADER_SCRIPT = b"#!/bin/sh\ngrep -q hello out.txt\n"
INPUT = b"some input\n"
BLOBS = {hashlib.sha256(data).hexdigest(): data for data in (GRADER_SCRIPT, INPUT)}


def environment(**extra) -> dict:
    return {
        "id": "shell",
        "version": 1,
        "image": None,
        "dockerfile": None,
        "setup": None,
        "network": "none",
        "limits": {"cpus": 1, "memory_mb": 1024, "timeout_s": 600, "max_steps": 30},
        "tools": ["bash", "submit"],
        "custom_tools": [],
        "files": [],
        "checks_module": None,
        **extra,
    }


TEXT_TASK = {
    "schema": "gymwright.task/v1",
    "id": "six-times-seven",
    "version": 3,
    "title": "Six times seven",
    "prompt": "What is six times seven? Explain.",
    "environment": environment(),
    "files": [],
    "solution": {"script": None, "answer": "42"},
    "rubric": {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 0.5,
        "checks": [
            {"id": "says_42", "kind": "string_match", "points": 2, "mode": "contains", "expected": "42"},
            {"id": "no_shouting", "kind": "regex", "points": -1, "pattern": "[A-Z]{5,}"},
            {"id": "explains", "kind": "llm_judge", "points": 1, "criterion": "Explains how the answer was found."},
        ],
    },
    "tags": ["maths"],
    "metadata": {},
}

FILE_TASK = {
    "schema": "gymwright.task/v1",
    "id": "write-hello",
    "version": 1,
    "title": "Write hello",
    "prompt": "Write hello to out.txt.",
    "environment": environment(),
    "files": [
        {"path": "data/input.txt", "sha256": hashlib.sha256(INPUT).hexdigest()},
        {"path": "grader_check.sh", "sha256": hashlib.sha256(GRADER_SCRIPT).hexdigest(), "role": "grader"},
    ],
    "solution": {"script": "echo hello > out.txt", "answer": "done"},
    "rubric": {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": "has_out", "kind": "file_content", "points": 1, "path": "out.txt", "contains": "hello"},
            {
                "id": "grader_passes",
                "kind": "command",
                "points": 2,
                "run": "sh grader_check.sh",
                "expect_exit": 0,
                "timeout_s": 30,
            },
        ],
    },
    "tags": [],
    "metadata": {},
}


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("pack")
    items = [
        archive.TaskItem(parse_task(doc).to_document() | doc, content_sha256(doc)) for doc in (TEXT_TASK, FILE_TASK)
    ]
    items.sort(key=lambda item: item.document["id"])
    archive.build_pack(
        out=tmp / "pack.tar.gz",
        info=archive.PackInfo(slug="standalone", name="S", version="1.2.0"),
        tasks=items,
        read_blob=BLOBS.__getitem__,
        scratch_dir=tmp / "scratch",
    )
    with tarfile.open(tmp / "pack.tar.gz") as tar:
        tar.extractall(tmp / "out", filter="data")
    return tmp / "out" / "standalone-1.2.0"


def run_reward(pack_dir: Path, calls: list, env: dict | None = None) -> list:
    """Call reward.py's functions in the clean grader virtualenv, isolated from this repository."""
    script = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(pack_dir)!r})\n"
        "import reward\n"
        "assert 'django' not in sys.modules and 'gymwright' not in sys.modules\n"
        "out = []\n"
        "for kind, args in json.loads(sys.stdin.read()):\n"
        "    if kind == 'verl':\n"
        "        out.append(reward.compute_score(*args))\n"
        "    else:\n"
        "        prompts, completions, columns = args\n"
        "        out.append(reward.trl_reward(prompts, completions, **columns))\n"
        "print(json.dumps(out))\n"
        "import os; sys.stdout.flush(); os._exit(0)\n"
    )
    clean_env = {"PATH": "/usr/bin:/bin", "HOME": str(pack_dir), **(env or {})}
    done = subprocess.run(
        [grader_python(), "-I", "-c", script],
        input=json.dumps(calls),
        capture_output=True,
        text=True,
        cwd=pack_dir.parent,
        env=clean_env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def engine_reward(document: dict, answer: str, judge=None) -> dict:
    task = parse_task(document)
    return grade(task.rubric, answer=answer, judge=judge).to_document()


ANSWERS = ["42", "It is 42 because 6*7 = 42", "FORTY-TWO, I AM SURE", "41", ""]


def test_verl_compute_score_without_a_judge_matches_the_engine_and_says_what_is_unscored(pack_dir):
    calls = [("verl", ["gymwright/standalone", answer, "six-times-seven", None]) for answer in ANSWERS]
    results = run_reward(pack_dir, calls)
    for answer, result in zip(ANSWERS, results):
        expected = engine_reward(TEXT_TASK, answer)
        assert result == {
            "score": expected["reward"],
            "score_upper": expected["reward_upper"],
            "passed": int(expected["passed"]),
            "complete": 0,
            "gated": int(expected["gated"]),
            "unscored": 1,
        }  # the judge check, "explains"
    # "42" earns 2 of 3: the unscored judge check stays in the maximum (the reward is a lower bound)
    assert results[0]["score"] == pytest.approx(2 / 3) and results[0]["score_upper"] == 1.0
    assert results[0]["passed"] == 0 and results[3]["score"] == 0.0


def test_verl_and_trl_rewards_with_a_judge_match_the_engine_with_the_same_judge(pack_dir):
    verdict = json.dumps({"met": True, "explanation": "explained"})
    with OpenAIServer(default=verdict) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test", "GYMWRIGHT_JUDGE_MODEL": "judge"}
        calls = [
            ("verl", ["gymwright/standalone", answer, "ignored", {"task_id": "six-times-seven"}]) for answer in ANSWERS
        ]
        calls.append(
            (
                "trl",
                [
                    [[{"role": "user", "content": "q"}]] * 2,
                    [[{"role": "assistant", "content": ANSWERS[1]}], [{"role": "assistant", "content": "41"}]],
                    {
                        "reward_model": [{"style": "rubric", "ground_truth": "six-times-seven"}] * 2,
                        "extra_info": [{"task_id": "six-times-seven"}] * 2,
                    },
                ],
            )
        )
        results = run_reward(pack_dir, calls, env)
        judge = JudgeClient(JudgeConfig(base_url=server.base_url, model="judge", api_key="test"))
        try:
            expected = [engine_reward(TEXT_TASK, answer, judge) for answer in ANSWERS]
        finally:
            judge.close()
    for result, grade_document in zip(results[:-1], expected):
        assert result["score"] == grade_document["reward"] and result["complete"] == 1 and result["unscored"] == 0
    assert results[-1] == [expected[1]["reward"], expected[3]["reward"]]
    assert expected[1]["reward"] == 1.0


def test_trl_reward_is_none_when_nothing_could_be_scored(pack_dir):
    # the file task's checks need a workspace and a sandbox: nothing is scored from text alone
    results = run_reward(pack_dir, [("trl", [["q"], ["hello"], {"reward_model": [{"ground_truth": "write-hello"}]}])])
    assert results == [[None]]


def harbor_python() -> str:
    return str(Path(harbor_bin()).parent / "python")


def test_harbor_passes_the_judge_settings_to_the_verifier_by_name_and_never_their_values(pack_dir):
    """Harbor's own TaskConfig reads the task.toml of a task with judge checks: its verifier gets the
    judge's settings from the host's environment (Harbor's ${VAR} templates, empty when unset) and the
    network, the agent's phase none; a task without judge checks passes nothing."""
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from harbor.models.task.config import TaskConfig\n"
        "from harbor.trial.network_policy import resolve_verifier_phase_policy\n"
        "from harbor.utils.env import resolve_env_vars\n"
        "out = {}\n"
        "for folder in sys.argv[1:]:\n"
        "    config = TaskConfig.model_validate_toml((Path(folder) / 'task.toml').read_text())\n"
        "    verifier = resolve_verifier_phase_policy(config, baseline=config.environment.resolve_baseline())\n"
        "    out[Path(folder).name] = {'env': resolve_env_vars(config.verifier.env),\n"
        "                              'agent_network': config.environment.network_mode.value,\n"
        "                              'verifier_network': verifier.network_mode.value}\n"
        "print(json.dumps(out))\n"
    )
    folders = [str(pack_dir / "tasks" / name) for name in ("six-times-seven", "write-hello")]

    def resolved(env: dict) -> dict:
        done = subprocess.run(
            [harbor_python(), "-c", script, *folders],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "HOME": str(pack_dir), **env},
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    judge = {
        "OPENAI_BASE_URL": "http://judge.example:8000/v1",
        "OPENAI_API_KEY": "sk-never-in-the-pack",
        "GYMWRIGHT_JUDGE_MODEL": "judge-model",
        "GYMWRIGHT_JUDGE_MAX_CHARS": "50000",
    }
    seen = resolved(judge)
    assert seen["six-times-seven"] == {"env": judge, "agent_network": "no-network", "verifier_network": "public"}
    assert seen["write-hello"] == {"env": {}, "agent_network": "no-network", "verifier_network": "no-network"}
    unset = resolved({})
    assert unset["six-times-seven"]["env"] == dict.fromkeys(judge, "")  # no judge: its checks are unscored
    toml = (pack_dir / "tasks" / "six-times-seven" / "task.toml").read_text()
    assert 'OPENAI_API_KEY = "${OPENAI_API_KEY:-}"' in toml


def test_every_exported_harbor_task_passes_harbor_lint(pack_dir):
    tasks = sorted(str(path) for path in (pack_dir / "tasks").iterdir())
    done = subprocess.run([harbor_bin(), "lint", "--json", *tasks], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == []
    # the lint is real: a verifier that shares the agent's sandbox is a finding
    toml = pack_dir / "tasks" / "write-hello" / "task.toml"
    original = toml.read_text()
    try:
        toml.write_text(original.replace('environment_mode = "separate"', 'environment_mode = "shared"'))
        shared = subprocess.run([harbor_bin(), "lint", "--json", str(toml.parent)], capture_output=True, text=True)
        assert shared.returncode != 0 and "shared-verifier" in shared.stdout
    finally:
        toml.write_text(original)


def harbor_verify(task_dir: Path, workspace: Path, logs: Path, *, home: str | None = None) -> tuple[dict, dict]:
    """Run a Harbor task's tests/test.sh as Harbor's verifier would, in a bubblewrap sandbox with `workspace`
    as /workspace and `logs` as /logs: (reward.json, grade.json), reward.json as Harbor parses it."""
    done = run_test_sh(task_dir, workspace, logs, home=home)
    assert done.returncode == 0, done.stderr
    grade_document = json.loads((logs / "verifier" / "grade.json").read_text())
    rewards = json.loads((logs / "verifier" / "reward.json").read_text())
    assert rewards["reward"] == float((logs / "verifier" / "reward.txt").read_text())
    # Harbor's verifier reads reward.json (before reward.txt) as the trial's rewards: numbers only
    parse = (
        "import json, sys; from pathlib import Path; from harbor.models.trial.paths import TrialPaths; "
        "from harbor.verifier.verifier import Verifier; v = Verifier.__new__(Verifier); "
        "v.trial_paths = TrialPaths(trial_dir=Path(sys.argv[1])); print(json.dumps(v._parse_reward_json()))"
    )
    harbor = subprocess.run([harbor_python(), "-c", parse, str(logs)], capture_output=True, text=True, timeout=60)
    assert harbor.returncode == 0, harbor.stderr
    assert json.loads(harbor.stdout) == rewards
    return rewards, grade_document


@pytest.mark.bubblewrap
def test_harbor_test_sh_runs_the_bundled_grader_in_a_sandbox_and_writes_the_reward(pack_dir, tmp_path):
    task_dir = pack_dir / "tasks" / "write-hello"

    def verify(workspace_files: dict[str, bytes]) -> tuple[dict, dict]:
        workspace, logs = tmp_path / f"ws{len(workspace_files)}", tmp_path / f"logs{len(workspace_files)}"
        workspace.mkdir()
        logs.mkdir()
        for name, data in workspace_files.items():
            (workspace / name).write_bytes(data)
        return harbor_verify(task_dir, workspace, logs)

    rewards, document = verify({"out.txt": b"hello world\n"})
    assert rewards == {"reward": 1.0, "reward_upper": 1.0, "passed": 1, "complete": 1, "unscored": 0}
    assert document["complete"] is True
    assert {check["id"]: check["score"] for check in document["checks"]} == {"has_out": 1.0, "grader_passes": 1.0}
    rewards, document = verify({"out.txt": b"bye\n", "other": b""})
    assert rewards == {"reward": 0.0, "reward_upper": 0.0, "passed": 0, "complete": 1, "unscored": 0}


def _harbor_grade_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "harbor_grade_under_test", archive.info.BUNDLE_DIR / "harbor_grade.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_workspace_that_refuses_the_grader_files_fails_the_checks_after_it(tmp_path, monkeypatch):
    """Fault injection: the disk write of the grader's files fails (the agent's code filled the workspace). The
    verifier's checks after it fail, penalties charged: unscored, a penalty would not be charged."""
    import errno

    from grading.engine import grade, parse_task

    monkeypatch.setenv("GYMWRIGHT_WORKSPACE", str(tmp_path))
    module = _harbor_grade_module()

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(module, "restore_grader_files", full)
    rubric = parse_task(
        {
            "schema": "gymwright.task/v1",
            "id": "t",
            "prompt": "p",
            "rubric": {
                "schema": "gymwright.rubric/v1",
                "checks": [
                    {"id": "build", "kind": "command", "points": 1, "run": "true"},
                    {"id": "tampered", "kind": "command", "points": -1, "run": "true"},
                ],
            },
        }
    ).rubric
    document = grade(rubric, answer="", workspace=tmp_path, sandbox=module.ContainerSandbox()).to_document()
    states = {check["id"]: (check["status"], check["score"]) for check in document["checks"]}
    assert states == {"build": ("scored", 1.0), "tampered": ("scored", 1.0)}, document["checks"]
    assert document["complete"] is True and document["reward"] == 0


def test_commands_run_by_the_harbor_verifiers_checks_do_not_see_the_judges_settings(tmp_path, monkeypatch):
    """[verifier.env] gives the verifier the judge's key; the checks' commands (often the agent's own code,
    e.g. its tests) run without it, with the rest of the environment."""
    import importlib.util

    monkeypatch.setenv("GYMWRIGHT_WORKSPACE", str(tmp_path))
    for name, value in {
        "OPENAI_API_KEY": "sk-secret",
        "OPENAI_BASE_URL": "http://judge",
        "GYMWRIGHT_JUDGE_MODEL": "j",
        "SOMETHING_ELSE": "kept",
    }.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location(
        "harbor_grade_under_test", archive.info.BUNDLE_DIR / "harbor_grade.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.ContainerSandbox().exec("env")
    assert result.exit_code == 0 and "SOMETHING_ELSE=kept" in result.stdout
    assert "sk-secret" not in result.stdout and "OPENAI_BASE_URL" not in result.stdout
    assert "GYMWRIGHT_JUDGE_MODEL" not in result.stdout


def test_reward_py_grades_one_answer_from_the_command_line_into_a_pipe(pack_dir):
    """`python reward.py TASK_ID < answer.txt` (reward.py's own usage line) prints the grade, also when its
    output goes to a pipe or a file (it once ended before its buffer was written, printing nothing)."""
    done = subprocess.run(
        [grader_python(), "reward.py", "six-times-seven"],
        input="It is 42",
        capture_output=True,
        text=True,
        cwd=pack_dir,
        env={"PATH": "/usr/bin:/bin", "HOME": str(pack_dir)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    printed, expected = json.loads(done.stdout), engine_reward(TEXT_TASK, "It is 42")
    assert printed["reward"] == expected["reward"] == pytest.approx(2 / 3) and printed["complete"] is False
    assert printed["reward_upper"] == 1.0
    assert [(c["id"], c["status"], c["score"]) for c in printed["checks"]] == [
        (c["id"], c["status"], c["score"]) for c in expected["checks"]
    ]


def test_the_harbor_verifier_ends_only_processes_of_its_own_checks(tmp_path, monkeypatch):
    """After each check's command the verifier ends what the command left running. It ended every process that had
    started on the machine meanwhile: run outside a container of its own (here, beside this test), it stopped and
    killed the host's processes (a PostgreSQL backend of another test: the database restarted). A process started
    beside the check lives on; one the check started, even a daemon that called setsid, does not (the verifier is
    its subreaper), and the verifier reaps it."""
    import threading

    monkeypatch.setenv("GYMWRIGHT_WORKSPACE", str(tmp_path))
    marker = f"300.{os.getpid()}{time.monotonic_ns() % 10**6:06d}"  # this run's daemon, no other's
    script = tmp_path / "verifier.py"
    script.write_text(
        "import importlib.util, os, sys, time\n"
        f"spec = importlib.util.spec_from_file_location('hg', {str(archive.info.BUNDLE_DIR / 'harbor_grade.py')!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "assert module.become_subreaper()\n"
        f"result = module.ContainerSandbox().exec('(setsid sleep {marker} >/dev/null 2>&1 &); sleep 1.5; echo ran')\n"
        "print(result.stdout.strip(), flush=True)\n"
        "def cmdline(pid):\n"
        "    try:\n"
        "        return open(f'/proc/{pid}/cmdline', 'rb').read()\n"
        "    except OSError:\n"
        "        return b''\n"
        f"left = [pid for pid in module._pids() if b'{marker}' in cmdline(pid) and not module._zombie(pid)]\n"
        "print('left', len(left), flush=True)\n"
    )
    neighbours = []
    stop = threading.Event()

    def start_neighbours():
        # processes this test starts while the check runs: not the verifier's
        while not stop.is_set() and len(neighbours) < 40:
            neighbours.append(subprocess.Popen(["sleep", "30"]))
            time.sleep(0.03)

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "GYMWRIGHT_WORKSPACE": str(tmp_path)}
    verifier = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    thread = threading.Thread(target=start_neighbours)
    thread.start()
    try:
        out, _ = verifier.communicate(timeout=120)
    finally:
        stop.set()
        thread.join()
    try:
        assert out.split("\n")[:2] == ["ran", "left 0"], out
        assert neighbours and all(process.poll() is None for process in neighbours), [p.poll() for p in neighbours]
    finally:
        for process in neighbours:
            process.kill()
            process.wait()
