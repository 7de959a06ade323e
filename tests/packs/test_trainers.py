"""A pack loads straight into verl and TRL, as the README's "Use a pack in verl / TRL" says, in a
virtualenv with verl 0.9.1, TRL 1.16.0 and PyTorch on the CPU (`make trainers-venv`) and without Gymwright:

- TRL: `datasets`' parquet loader reads data/train.parquet and GRPOTrainer runs a real step whose reward
  function is the pack's `reward.trl_reward`; every reward it got is the engine's for that completion.
- verl: verl's own trainer config with the README's overrides gives the RLHFDataset and the reward
  manager verl's reward loop uses, which scores responses with the pack's `compute_score` exactly as
  the engine does, unscored checks named.

The policy is a tiny random model (no weights can be downloaded here): these prove the data and the
reward wiring, not learning.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from grading.engine import content_sha256, grade, parse_task
from packs import archive
from tests.packs.test_standalone import BLOBS, FILE_TASK, TEXT_TASK
from tests.support.venvs import trainers_python

SCRIPTS = Path(__file__).resolve().parent / "trainers"
DOCUMENTS = {doc["id"]: doc for doc in (TEXT_TASK, FILE_TASK)}
VERL_COLUMNS = ["data_source", "prompt", "ability", "reward_model", "extra_info"]


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory) -> Path:
    """Both tasks in the train split (test_ratio 0), so one training step sees both."""
    tmp = tmp_path_factory.mktemp("trainers")
    items = sorted((archive.TaskItem(parse_task(doc).to_document() | doc, content_sha256(doc))
                    for doc in DOCUMENTS.values()), key=lambda item: item.document["id"])
    archive.build_pack(out=tmp / "pack.tar.gz", tasks=items, read_blob=BLOBS.__getitem__, scratch_dir=tmp / "scratch",
                       info=archive.PackInfo(slug="trainers", name="T", version="1.0.0", test_ratio=0.0))
    with tarfile.open(tmp / "pack.tar.gz") as tar:
        tar.extractall(tmp / "out", filter="data")
    return tmp / "out" / "trainers-1.0.0"


def run(script: str, pack_dir: Path, *args: str) -> dict:
    out = pack_dir.parent / f"{script}.json"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(pack_dir.parent), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([trainers_python(), str(SCRIPTS / script), str(pack_dir), str(out), *args],
                          capture_output=True, text=True, cwd=SCRIPTS, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def engine_reward(task_id: str, answer: str) -> dict:
    return grade(parse_task(DOCUMENTS[task_id]).rubric, answer=answer, judge=None).to_document()


def test_trl_grpo_trains_a_step_on_the_pack_with_its_reward_function(pack_dir):
    seen = run("trl_grpo_step.py", pack_dir)
    assert seen["columns"] == VERL_COLUMNS and seen["rows"] == 2 and seen["steps"] == 1
    completions = [(task_id, completion, reward) for call in seen["calls"]
                   for task_id, completion, reward in zip(call["task_ids"], call["completions"], call["rewards"])]
    assert {task_id for task_id, _, _ in completions} == set(DOCUMENTS)  # both tasks were sampled and rewarded
    for task_id, completion, reward in completions:
        expected = engine_reward(task_id, completion)
        scored = any(check["status"] == "scored" for check in expected["checks"])
        assert reward == (expected["reward"] if scored else None), (task_id, completion)


def test_verl_loads_the_pack_with_the_readme_overrides_and_rewards_as_the_engine_does(pack_dir):
    answers = {"six-times-seven": "It is 42, since 6 * 7 = 42", "write-hello": "done"}
    order = sorted(DOCUMENTS)  # the parquet rows are in task-id order
    seen = run("verl_reward_step.py", pack_dir, json.dumps([answers[task_id] for task_id in order]))
    assert seen["manager"].endswith("reward_manager.naive.NaiveRewardManager")
    assert set(VERL_COLUMNS) <= set(seen["columns"]) and seen["task_ids"] == order
    for task_id, result in zip(order, seen["results"]):
        expected = engine_reward(task_id, answers[task_id])
        info = result["reward_extra_info"]
        assert result["reward_score"] == expected["reward"] and info["score"] == expected["reward"]
        assert info["complete"] is expected["complete"] is False  # judge and workspace checks: unscored, said so
        assert info["unscored"] == [c["id"] for c in expected["checks"] if c["status"] != "scored"]
    assert seen["results"][0]["reward_score"] == 1.0  # "42" earns the string check; the judge check is left out
