"""The pack loads straight into Inspect: `inspect eval inspect_task.py --model openai-api/gw/M` runs every task
against an OpenAI-compatible model (the local test server) and scores each answer with the pack's own rubric grader."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from grading.engine import JudgeClient, JudgeConfig
from tests.packs.test_standalone import FILE_TASK, TEXT_TASK, engine_reward, pack_dir  # noqa: F401 (fixture)
from tests.support.openai_server import OpenAIServer
from tests.support.venvs import inspect_bin

ANSWERS = {TEXT_TASK["prompt"]: "Six times seven is 42: 6*7 = 42.", FILE_TASK["prompt"]: "I wrote it."}
VERDICT = json.dumps({"met": True, "explanation": "it explains 6*7"})


def policy_and_judge(body: dict) -> str:
    if body.get("model") == "judge":
        return VERDICT
    asked = next(m["content"] for m in body["messages"] if m["role"] == "user")
    text = asked if isinstance(asked, str) else " ".join(part.get("text", "") for part in asked)
    return ANSWERS[text.strip()]


def inspect_eval(pack_dir: Path, tmp_path: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    """`inspect eval inspect_task.py` in the unpacked pack, as its card says, with only `env` added to a bare
    environment; its log (JSON) under tmp_path/logs."""
    return subprocess.run(
        [
            inspect_bin(),
            "eval",
            "inspect_task.py",
            "--model",
            "openai-api/gw/policy",
            "--log-format",
            "json",
            "--log-dir",
            str(tmp_path / "logs"),
            "--display",
            "none",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=pack_dir,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GW_API_KEY": "test", **env},
    )


def run_inspect(pack_dir: Path, tmp_path: Path, env: dict, *args: str) -> dict:
    done = inspect_eval(
        pack_dir, tmp_path, {"OPENAI_API_KEY": "test", "GW_BASE_URL": env["OPENAI_BASE_URL"], **env}, *args
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (log,) = (tmp_path / "logs").glob("*.json")
    return json.loads(log.read_text())


def refused(pack_dir: Path, tmp_path: Path, task_ids: str) -> str:
    """What `inspect eval` says when it refuses `task_ids` (it must end with an error); no model is reachable."""
    done = inspect_eval(pack_dir, tmp_path, {"GW_BASE_URL": "http://127.0.0.1:9/v1"}, "-T", f"task_ids={task_ids}")
    assert done.returncode != 0
    return done.stdout + done.stderr


def test_every_task_a_response_grades_is_a_sample_scored_by_the_packs_rubric(pack_dir, tmp_path):
    with OpenAIServer(handler=policy_and_judge) as server:
        log = run_inspect(pack_dir, tmp_path, {"OPENAI_BASE_URL": server.base_url}, "-T", "split=all")
        policy_calls = [body for body in server.requests if body.get("model") == "policy"]
    assert log["status"] == "success"
    scores = {sample["id"]: sample["scores"]["gymwright_rubric"] for sample in log["samples"]}
    # The file task's checks need the agent's workspace: not a sample (a Harbor task), never graded from a sentence.
    assert set(scores) == {"six-times-seven"} and len(policy_calls) == 1
    # No judge configured: the judge check is unscored, as the engine does.
    expected = engine_reward(TEXT_TASK, ANSWERS[TEXT_TASK["prompt"]])
    assert scores["six-times-seven"]["value"] == expected["reward"] == pytest.approx(2 / 3)  # a lower bound
    assert scores["six-times-seven"]["metadata"]["reward_upper"] == expected["reward_upper"] == 1.0
    assert scores["six-times-seven"]["metadata"]["complete"] is False
    assert scores["six-times-seven"]["metadata"]["unscored"] == ["explains"]


def test_a_task_that_needs_its_episode_is_refused_by_name_pointing_to_its_harbor_task(pack_dir, tmp_path):
    said = refused(pack_dir, tmp_path, f"six-times-seven,{FILE_TASK['id']}")
    assert (
        "write-hello: not graded from a response (checks has_out, grader_passes need the agent's workspace, "
        "sandbox or trajectory); run it as a Harbor task: tasks/write-hello/"
    ) in said


def test_with_a_judge_the_judge_checks_count_and_a_wrong_answer_scores_low(pack_dir, tmp_path):
    ANSWERS[TEXT_TASK["prompt"]] = "It is 41."
    try:
        with OpenAIServer(handler=policy_and_judge) as server:
            log = run_inspect(
                pack_dir,
                tmp_path,
                {"OPENAI_BASE_URL": server.base_url, "GYMWRIGHT_JUDGE_MODEL": "judge"},
                "-T",
                "task_ids=six-times-seven",
            )
            judge = JudgeClient(JudgeConfig(base_url=server.base_url, model="judge", api_key="test"))
            try:
                expected = engine_reward(TEXT_TASK, "It is 41.", judge=judge)
            finally:
                judge.close()
    finally:
        ANSWERS[TEXT_TASK["prompt"]] = "Six times seven is 42: 6*7 = 42."
    (sample,) = log["samples"]
    score = sample["scores"]["gymwright_rubric"]
    assert score["metadata"]["complete"] is True and score["metadata"]["unscored"] == []
    assert score["value"] == expected["reward"] and 0 < score["value"] < 1


def test_an_unknown_task_id_is_refused_with_its_name(pack_dir, tmp_path):
    assert "not in this pack: no-such-task" in refused(pack_dir, tmp_path, "no-such-task")


def test_an_empty_split_is_refused_saying_which_split_to_run(tmp_path):
    """A one-task pack whose task hashes into train: its test split (Inspect's default) is empty, and an
    evaluation of nothing would look like a run. The dataset card says so too."""
    import tarfile

    from grading.engine import content_sha256, parse_task
    from packs import archive

    item = archive.TaskItem(parse_task(TEXT_TASK).to_document() | TEXT_TASK, content_sha256(TEXT_TASK))
    archive.build_pack(
        out=tmp_path / "pack.tar.gz",
        info=archive.PackInfo(slug="one", name="One", version="1.0.0"),
        tasks=[item],
        read_blob={}.__getitem__,
        scratch_dir=tmp_path / "scratch",
    )
    with tarfile.open(tmp_path / "pack.tar.gz") as tar:
        tar.extractall(tmp_path / "out", filter="data")
    pack = tmp_path / "out" / "one-1.0.0"
    done = subprocess.run(
        [
            inspect_bin(),
            "eval",
            "inspect_task.py",
            "--model",
            "openai-api/gw/policy",
            "--display",
            "none",
            "--log-dir",
            str(tmp_path / "logs"),
        ],
        capture_output=True,
        text=True,
        cwd=pack,
        timeout=300,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "GW_API_KEY": "test",
            "GW_BASE_URL": "http://127.0.0.1:9/v1",
        },
    )
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "the test split of this pack is empty (1 task, test ratio 0.1)" in said
    assert "-T split=train" in said
    card = (pack / "README.md").read_text()
    assert "**The test split is empty**" in card and "`-T split=train`" in card
