"""TRL trains on a pack's agentic tasks live: `GRPOTrainer(environment_factory=TaskEnvironment)` from the
pack's env/ runs a real GRPO step on the CPU (tests/packs/trainers/trl_env_step.py, in the trainers
virtualenv, without Gymwright), one sandbox per rollout, on a file-producing task and a coding task. The
policy follows a script that calls the tasks' tools in the chat format TRL parses (a right and a wrong
variant per task, picked by sampling); every reward TRL logged is the grade that rollout's sandbox gave."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.packs.env_support import build_pack_dir
from tests.packs.test_trainers import run
from tests.support.services import require_bwrap

pytestmark = [pytest.mark.bubblewrap]


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory) -> Path:
    require_bwrap()
    return build_pack_dir(tmp_path_factory.mktemp("trl-env"))


def test_trl_grpo_trains_a_step_with_the_pack_environment_owning_the_reward(pack_dir):
    seen = run("trl_env_step.py", pack_dir)
    assert seen["steps"] == 1
    # the tools TRL offered the model: the environment's tool methods, the custom tool included
    assert seen["tools"] == ["bash", "count_rows", "list_files", "read_file", "submit", "write_file"]
    rollouts = seen["rollouts"]
    assert sorted({r["task_id"] for r in rollouts}) == ["fix-add", "sum-sales"] and len(rollouts) == 8
    for rollout in rollouts:
        assert (
            rollout["tools"]
            == {"sum-sales": ["bash", "submit"], "fix-add": ["write_file", "submit"]}[rollout["task_id"]]
        )
        assert rollout["grade"]["complete"] is True
        assert rollout["logged_reward"] == pytest.approx(rollout["grade"]["reward"], abs=1e-6), rollout
    rewards = [r["grade"]["reward"] for r in rollouts]
    # the right and the wrong variants were both sampled, and graded apart (2 of 3 tests; 1 of 5 points)
    assert {round(r, 4) for r in rewards} == {1.0, 0.6667, 0.2}
    logged = seen["log_history"][0]
    assert logged["rewards/TaskEnvironment/mean"] == pytest.approx(sum(rewards) / len(rewards), abs=1e-4)
    assert logged["tools/call_frequency"] > 0 and logged["tools/failure_frequency"] == 0
