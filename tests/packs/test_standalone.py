"""The pack stands alone: reward.py in a clean virtualenv (no Django, no Gymwright) grades as the
engine does, and every exported Harbor task passes `harbor lint` and grades in its own sandbox."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from grading.engine import JudgeClient, JudgeConfig, content_sha256, grade, parse_task
from packs import archive
from tests.support.openai_server import OpenAIServer
from tests.support.services import require_bwrap
from tests.support.venvs import grader_python, harbor_bin

GRADER_SCRIPT = b"#!/bin/sh\ngrep -q hello out.txt\n"
INPUT = b"some input\n"
BLOBS = {hashlib.sha256(data).hexdigest(): data for data in (GRADER_SCRIPT, INPUT)}


def environment(**extra) -> dict:
    return {"id": "shell", "version": 1, "image": None, "dockerfile": None, "setup": None, "network": "none",
            "limits": {"cpus": 1, "memory_mb": 1024, "timeout_s": 600, "max_steps": 30},
            "tools": ["bash", "submit"], "custom_tools": [], "files": [], "checks_module": None, **extra}


TEXT_TASK = {
    "schema": "gymwright.task/v1", "id": "six-times-seven", "version": 3, "title": "Six times seven",
    "prompt": "What is six times seven? Explain.", "environment": environment(), "files": [],
    "solution": {"script": None, "answer": "42"},
    "rubric": {"schema": "gymwright.rubric/v1", "pass_threshold": 0.5, "checks": [
        {"id": "says_42", "kind": "string_match", "points": 2, "mode": "contains", "expected": "42"},
        {"id": "no_shouting", "kind": "regex", "points": -1, "pattern": "[A-Z]{5,}"},
        {"id": "explains", "kind": "llm_judge", "points": 1, "criterion": "Explains how the answer was found."}]},
    "tags": ["maths"], "metadata": {}}

FILE_TASK = {
    "schema": "gymwright.task/v1", "id": "write-hello", "version": 1, "title": "Write hello",
    "prompt": "Write hello to out.txt.", "environment": environment(),
    "files": [{"path": "data/input.txt", "sha256": hashlib.sha256(INPUT).hexdigest()},
              {"path": "grader_check.sh", "sha256": hashlib.sha256(GRADER_SCRIPT).hexdigest(), "role": "grader"}],
    "solution": {"script": "echo hello > out.txt", "answer": "done"},
    "rubric": {"schema": "gymwright.rubric/v1", "checks": [
        {"id": "has_out", "kind": "file_content", "points": 1, "path": "out.txt", "contains": "hello"},
        {"id": "grader_passes", "kind": "command", "points": 2, "run": "sh grader_check.sh", "expect_exit": 0,
         "timeout_s": 30}]},
    "tags": [], "metadata": {}}


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("pack")
    items = [archive.TaskItem(parse_task(doc).to_document() | doc, content_sha256(doc)) for doc in (TEXT_TASK, FILE_TASK)]
    items.sort(key=lambda item: item.document["id"])
    archive.build_pack(out=tmp / "pack.tar.gz", info=archive.PackInfo(slug="standalone", name="S", version="1.2.0"),
                       tasks=items, read_blob=BLOBS.__getitem__, scratch_dir=tmp / "scratch")
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
        "import os; sys.stdout.flush(); os._exit(0)\n")
    clean_env = {"PATH": "/usr/bin:/bin", "HOME": str(pack_dir), **(env or {})}
    done = subprocess.run([grader_python(), "-I", "-c", script], input=json.dumps(calls), capture_output=True,
                          text=True, cwd=pack_dir.parent, env=clean_env, timeout=120)
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
        assert result["score"] == expected["reward"]
        assert result["complete"] is False and result["unscored"] == ["explains"]
    assert results[0]["score"] == 1.0 and results[3]["score"] == 0.0


def test_verl_and_trl_rewards_with_a_judge_match_the_engine_with_the_same_judge(pack_dir):
    verdict = json.dumps({"met": True, "explanation": "explained"})
    with OpenAIServer(default=verdict) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test", "GYMWRIGHT_JUDGE_MODEL": "judge"}
        calls = [("verl", ["gymwright/standalone", answer, "ignored", {"task_id": "six-times-seven"}])
                 for answer in ANSWERS]
        calls.append(("trl", [[[{"role": "user", "content": "q"}]] * 2,
                              [[{"role": "assistant", "content": ANSWERS[1]}], [{"role": "assistant", "content": "41"}]],
                              {"reward_model": [{"style": "rubric", "ground_truth": "six-times-seven"}] * 2,
                               "extra_info": [{"task_id": "six-times-seven"}] * 2}]))
        results = run_reward(pack_dir, calls, env)
        judge = JudgeClient(JudgeConfig(base_url=server.base_url, model="judge", api_key="test"))
        try:
            expected = [engine_reward(TEXT_TASK, answer, judge) for answer in ANSWERS]
        finally:
            judge.close()
    for result, grade_document in zip(results[:-1], expected):
        assert result["score"] == grade_document["reward"] and result["complete"] is True
    assert results[-1] == [expected[1]["reward"], expected[3]["reward"]]
    assert expected[1]["reward"] == 1.0


def test_trl_reward_is_none_when_nothing_could_be_scored(pack_dir):
    # the file task's checks need a workspace and a sandbox: nothing is scored from text alone
    results = run_reward(pack_dir, [("trl", [["q"], ["hello"], {"reward_model": [{"ground_truth": "write-hello"}]}])])
    assert results == [[None]]


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


@pytest.mark.bubblewrap
def test_harbor_test_sh_runs_the_bundled_grader_in_a_sandbox_and_writes_the_reward(pack_dir, tmp_path):
    bwrap = require_bwrap()
    task_dir = pack_dir / "tasks" / "write-hello"
    venv = Path(grader_python()).parent.parent
    base_python = Path(os.path.realpath(grader_python())).parents[1]

    def verify(workspace_files: dict[str, bytes]) -> tuple[str, dict]:
        workspace, logs = tmp_path / f"ws{len(workspace_files)}", tmp_path / f"logs{len(workspace_files)}"
        workspace.mkdir()
        logs.mkdir()
        for name, data in workspace_files.items():
            (workspace / name).write_bytes(data)
        # /tmp first: a checkout under /tmp (a CI clone) has its venv there, and a later tmpfs would hide it.
        command = [bwrap, "--unshare-all", "--die-with-parent", "--tmpfs", "/tmp",
                   "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
                   "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--ro-bind-try", "/lib64", "/lib64",
                   "--ro-bind", str(base_python), str(base_python), "--ro-bind", str(venv), str(venv),
                   "--ro-bind", str(task_dir / "tests"), "/tests", "--bind", str(workspace), "/workspace",
                   "--bind", str(logs), "/logs", "--proc", "/proc", "--dev", "/dev",
                   "--setenv", "PATH", f"{venv}/bin:/usr/bin:/bin", "--chdir", "/workspace", "/tests/test.sh"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        grade_document = json.loads((logs / "verifier" / "grade.json").read_text())
        return (logs / "verifier" / "reward.txt").read_text().strip(), grade_document

    reward, document = verify({"out.txt": b"hello world\n"})
    assert reward == "1.0" and document["complete"] is True
    assert {check["id"]: check["score"] for check in document["checks"]} == {"has_out": 1.0, "grader_passes": 1.0}
    reward, document = verify({"out.txt": b"bye\n", "other": b""})
    assert reward == "0.0"
