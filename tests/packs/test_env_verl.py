"""verl 0.9.1's multi-turn agent loop on a pack's env/ (env/verl_loop.py), loaded by verl itself in the trainers'
virtualenv (`make trainers-venv`): verl's registry reads the agent loop entry `python -m env verl` writes, its
RLHFDataset reads the agentic rows, and each trajectory of a scripted policy (hermes tool calls, no GPU) runs in
the task's sandbox and earns the grade the pack's TaskEnvironment gives the same tool calls."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.packs.env_support import CALC_FIXED, CODING_TASK, FILE_TASK, build_pack_dir, load_env
from tests.support.services import require_bwrap
from tests.support.venvs import trainers_python

pytestmark = [pytest.mark.bubblewrap]

SCRIPT = Path(__file__).resolve().parent / "trainers" / "verl_agent_loop.py"


def call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory) -> Path:
    require_bwrap()
    return build_pack_dir(tmp_path_factory.mktemp("verl"))


def test_verls_agent_loop_plays_the_task_in_its_sandbox_and_trains_on_its_grade(pack_dir):
    turns = {
        FILE_TASK["id"]: [call("bash", command=FILE_TASK["solution"]["script"]), call("submit", answer="60")],
        # never submits: the last assistant message is the answer, the workspace as the model left it
        CODING_TASK["id"]: [call("write_file", path="tests/test_calc.py", content="import unittest\n"), "done"],
    }
    out = pack_dir.parent / "verl-loop.json"
    done = subprocess.run(
        [trainers_python(), str(SCRIPT), str(pack_dir), str(out), json.dumps(turns)],
        capture_output=True,
        text=True,
        cwd=SCRIPT.parent,
        timeout=900,
        env={"PATH": "/usr/bin:/bin", "HOME": str(pack_dir.parent), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(out.read_text())
    assert set(seen) == set(turns)

    env = load_env(pack_dir).TaskEnvironment(pack_dir)
    try:
        env.reset(task_id=FILE_TASK["id"])
        env.bash(FILE_TASK["solution"]["script"])
        env.submit("60")
        file_grade = env.grade()
        env.reset(task_id=CODING_TASK["id"])
        env.write_file("tests/test_calc.py", "import unittest\n")
        coding_grade = env.grade(answer="done")
    finally:
        env.close()

    sales, coding = seen[FILE_TASK["id"]], seen[CODING_TASK["id"]]
    assert sales["agent_name"] == "gymwright_agent" and sales["loop_class"] == "GymwrightAgentLoop"
    assert "count_rows" in sales["tools"] and "count_rows" not in coding["tools"]  # each task's own tools
    assert sales["generate_calls"] == 2  # submit ended the episode: no third turn was asked for
    assert "exit code: 0" in sales["response"] and "submitted" in sales["response"]  # the sandbox's answers
    assert sales["reward_score"] == file_grade["reward"] == 1.0
    assert coding["reward_score"] == coding_grade["reward"] == 0.0  # the protected tests were put back
    assert [(c["id"], c["score"]) for c in coding["grade"]["checks"]] == [
        (c["id"], c["score"]) for c in coding_grade["checks"]
    ]
    assert CALC_FIXED not in coding["response"]
