"""A pack loads straight into verl and TRL, as the pack's README ("Use it") says, in a virtualenv with
verl 0.9.1, TRL 1.16.0, `datasets` and PyTorch on the CPU (`make trainers-venv`) and without Gymwright:

- `datasets.load_dataset(<unpacked pack>)` gives the pack's splits, named by the card's YAML header.
- TRL: `load_dataset(".")` in the pack, and GRPOTrainer runs a real step whose reward function is the
  pack's `reward.trl_reward`; every reward it got is the engine's for that completion, and the share
  of incomplete grades it logged reaches the trainer's log.
- verl: verl's own trainer config with the README's overrides gives the RLHFDataset and the reward
  manager verl's reward loop uses, which scores responses with the pack's `compute_score` exactly as
  the engine does; a batch whose responses leave different numbers of checks unscored then goes
  through verl's own stacking into arrays, its validation (`_validate`, `process_validation_metrics`),
  its training step's reward extraction and its dumps of generations.

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
# A text task with only judge checks: without a judge nothing of it is scored (TRL's None), and it leaves
# two checks unscored where six-times-seven leaves one (a ragged batch, had verl kept them as lists).
JUDGED_TASK = {
    **TEXT_TASK,
    "id": "write-haiku",
    "title": "Write a haiku",
    "prompt": "Write a haiku about rain.",
    "solution": {"script": None, "answer": "Rain on the tin roof"},
    "rubric": {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 0.5,
        "checks": [
            {"id": "is_haiku", "kind": "llm_judge", "points": 1, "criterion": "Is a haiku."},
            {"id": "about_rain", "kind": "llm_judge", "points": 1, "criterion": "Is about rain."},
        ],
    },
}
DOCUMENTS = {doc["id"]: doc for doc in (TEXT_TASK, JUDGED_TASK)}  # the parquet rows: graded from a response
PACKED = {**DOCUMENTS, FILE_TASK["id"]: FILE_TASK}  # the pack: write-hello needs its episode (Harbor only)
VERL_COLUMNS = ["data_source", "prompt", "ability", "reward_model", "extra_info"]


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory) -> Path:
    """Every task in the train split (test_ratio 0), so one training step sees both text tasks."""
    tmp = tmp_path_factory.mktemp("trainers")
    items = sorted(
        (archive.TaskItem(parse_task(doc).to_document() | doc, content_sha256(doc)) for doc in PACKED.values()),
        key=lambda item: item.document["id"],
    )
    archive.build_pack(
        out=tmp / "pack.tar.gz",
        tasks=items,
        read_blob=BLOBS.__getitem__,
        scratch_dir=tmp / "scratch",
        info=archive.PackInfo(slug="trainers", name="T", version="1.0.0", test_ratio=0.0),
    )
    with tarfile.open(tmp / "pack.tar.gz") as tar:
        tar.extractall(tmp / "out", filter="data")
    return tmp / "out" / "trainers-1.0.0"


def run(script: str, pack_dir: Path, *args: str) -> dict:
    out = pack_dir.parent / f"{script}.json"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(pack_dir.parent),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "RAY_USAGE_STATS_ENABLED": "0",
        "TOKENIZERS_PARALLELISM": "false",
    }
    done = subprocess.run(
        [trainers_python(), str(SCRIPTS / script), str(pack_dir), str(out), *args],
        capture_output=True,
        text=True,
        cwd=SCRIPTS,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def engine_reward(task_id: str, answer: str) -> dict:
    return grade(parse_task(DOCUMENTS[task_id]).rubric, answer=answer, judge=None).to_document()


def test_trl_grpo_trains_a_step_on_the_pack_with_its_reward_function(pack_dir):
    seen = run("trl_grpo_step.py", pack_dir)
    assert seen["columns"] == VERL_COLUMNS and seen["rows"] == 2 and seen["steps"] == 1
    completions = [
        (task_id, completion, reward)
        for call in seen["calls"]
        for task_id, completion, reward in zip(call["task_ids"], call["completions"], call["rewards"])
    ]
    assert {task_id for task_id, _, _ in completions} == set(DOCUMENTS)  # both tasks were sampled and rewarded
    for task_id, completion, reward in completions:
        expected = engine_reward(task_id, completion)
        scored = any(check["status"] == "scored" for check in expected["checks"])
        assert reward == (expected["reward"] if scored else None), (task_id, completion)
    # what the reward function logged through TRL's log_metric reached the trainer's log
    logged = seen["log_history"][0]
    assert logged["gymwright/incomplete"] == 1.0  # no judge here: every grade has an unscored check
    unscorable = [reward is None for _, _, reward in completions]
    assert logged["gymwright/unscorable"] == pytest.approx(sum(unscorable) / len(unscorable))


def test_verl_loads_the_pack_with_the_readme_overrides_and_its_trainer_reduces_the_rewards(pack_dir):
    answers = {"six-times-seven": "It is 42, since 6 * 7 = 42", "write-haiku": "done"}
    order = sorted(DOCUMENTS)  # the parquet rows are in task-id order
    seen = run("verl_reward_step.py", pack_dir, json.dumps(answers))
    assert seen["manager"].endswith("reward_manager.naive.NaiveRewardManager")
    assert set(VERL_COLUMNS) <= set(seen["columns"]) and seen["task_ids"] == order
    expected = {task_id: engine_reward(task_id, answers[task_id]) for task_id in order}
    unscored = {task_id: sum(c["status"] != "scored" for c in expected[task_id]["checks"]) for task_id in order}
    assert unscored == {"six-times-seven": 1, "write-haiku": 2}  # a ragged batch, had they been lists
    for task_id, result in zip(order, seen["results"]):
        info = result["reward_extra_info"]
        assert result["reward_score"] == expected[task_id]["reward"] == info["score"]
        assert info == {
            "score": expected[task_id]["reward"],
            "score_upper": expected[task_id]["reward_upper"],
            "passed": int(expected[task_id]["passed"]),
            "complete": 0,
            "gated": 0,
            "unscored": unscored[task_id],
        }
    # "42" earns the string check, 2 of 3: the unscored judge check stays in the maximum
    assert seen["results"][0]["reward_score"] == pytest.approx(2 / 3)
    # verl's arrays over the training batch, and its validation metrics over them
    assert seen["batch_arrays"] == {
        key: [r["reward_extra_info"][key] for r in seen["results"]]
        for key in ("score", "score_upper", "passed", "complete", "gated", "unscored")
    }
    prefix = "val-aux/gymwright/trainers"
    assert seen["validation"]["val-core/gymwright/trainers/reward/mean@1"] == pytest.approx(1 / 3)
    assert seen["validation"][f"{prefix}/unscored/mean@1"] == 1.5
    assert seen["validation"][f"{prefix}/passed/mean@1"] == 0.0  # an incomplete grade never passes
    assert seen["validation"][f"{prefix}/complete/mean@1"] == 0.0
    assert seen["validation_v1"]["gymwright/trainers/unscored/mean@1"] == 1.5
    # the dumps of generations carry every key, one number per response
    for dump in (seen["validation_dump"], seen["rollout_dump"]):
        assert [(line["gts"], line["unscored"], line["passed"]) for line in dump] == [
            (task_id, unscored[task_id], int(expected[task_id]["passed"])) for task_id in order
        ]


def test_datasets_loads_an_unpacked_pack_with_both_splits_from_its_card(tmp_path):
    from tests.packs.test_archive import items

    folders = []
    for name, count, ratio in (("both", 20, 0.3), ("no-test", 2, 0.0)):
        archive.build_pack(
            out=tmp_path / f"{name}.tar.gz",
            tasks=items(count),
            read_blob=lambda sha: b"",
            scratch_dir=tmp_path / f"s-{name}",
            info=archive.PackInfo(slug=name, name=name, version="1.0.0", test_ratio=ratio),
        )
        with tarfile.open(tmp_path / f"{name}.tar.gz") as tar:
            tar.extractall(tmp_path / "out", filter="data")
        folders.append(tmp_path / "out" / f"{name}-1.0.0")
    out = tmp_path / "datasets.json"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(
        [trainers_python(), str(SCRIPTS / "datasets_load.py"), str(out), *map(str, folders)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(out.read_text())
    both = seen[str(folders[0])]
    expected = {
        split: [f"task-{i:03d}" for i in range(20) if archive.split_of(f"task-{i:03d}", 0.3) == split]
        for split in ("train", "test")
    }
    assert expected["train"] and expected["test"]
    assert {split: both[split]["task_ids"] for split in both} == expected
    assert both["train"]["columns"] == VERL_COLUMNS
    # an empty split is left out of the card's configs: `datasets` refuses a split with no rows
    assert list(seen[str(folders[1])]) == ["train"] and len(seen[str(folders[1])]["train"]["task_ids"]) == 2
