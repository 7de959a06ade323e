"""verifiers 0.4 on a pack's env/ (env/verifiers_env.py), loaded by verifiers itself: `vf-eval env` from inside the
unpacked pack, in the virtualenv a lab makes from the pack's env/requirements-verifiers.txt (`make verifiers-venv`),
runs each rollout through verifiers' interception server and the Gymwright harness against a scripted model (the
local OpenAI-protocol server, no GPU), each episode in a sandbox of its own; the reward verifiers reports is the
grade the pack's TaskEnvironment gives the same tool calls."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from tests.packs.env_support import CODING_TASK, FILE_TASK, build_pack_dir, load_env
from tests.support.openai_server import OpenAIServer, Reply, tool_call
from tests.support.services import require_bwrap
from tests.support.venvs import verifiers_python

pytestmark = [pytest.mark.bubblewrap]

TASKS = {FILE_TASK["id"]: FILE_TASK, CODING_TASK["id"]: CODING_TASK}


def scripted(scripts: dict[str, list[list]], tasks: dict[str, dict] | None = None):
    """An OpenAI-server handler playing, for each task (known by its prompt, among `tasks`' documents), one script
    per episode in turn: a script is the list of assistant replies (tool calls or text) of one episode. A request
    whose conversation has no assistant message yet opens that task's next episode (vf-eval runs them one at a
    time: -c 1)."""
    prompts = {document["prompt"]: task_id for task_id, document in (tasks or TASKS).items()}
    lock = threading.Lock()
    episodes: dict[str, int] = {}

    def handler(body: dict) -> Reply:
        messages = body.get("messages") or []
        prompt = next(m.get("content") for m in messages if m.get("role") == "user")
        task_id = prompts[prompt]
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        with lock:
            if turn == 0:
                episodes[task_id] = episodes.get(task_id, -1) + 1
            script = scripts[task_id][episodes[task_id]]
        reply = script[turn] if turn < len(script) else "done"
        return Reply(content=reply) if isinstance(reply, str) else Reply(tool_calls=reply)

    return handler


def vf_eval(pack_dir: Path, handler, *, rollouts: int, out: Path) -> list[dict]:
    """`vf-eval env` from the pack's folder against a scripted model, every agentic task of the pack `rollouts`
    times: the episodes it wrote (traces.jsonl)."""
    python = verifiers_python()
    with OpenAIServer(handler=handler) as server:
        command = [str(Path(python).parent / "vf-eval"), "env", "-m", "scripted", "--client.base-url"]
        command += [server.base_url, "--no-push", "--no-rich", "-o", str(out), "-c", "1", "-r", str(rollouts)]
        done = subprocess.run(
            command,
            cwd=pack_dir,
            capture_output=True,
            text=True,
            timeout=600,
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(out.parent),
                "PYTHONPATH": str(pack_dir),
                "OPENAI_API_KEY": "scripted",
            },
        )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    (traces,) = out.glob("*/traces.jsonl")
    return [json.loads(line) for line in traces.read_text().splitlines() if line.strip()]


def reward(episode: dict) -> float:
    """The reward verifiers gives the episode's one trace: its weighted rewards' sum (`Trace.reward`)."""
    (trace,) = episode["traces"]
    assert trace["ok"], trace["errors"]
    return sum(r["score"] * r["weight"] for r in trace["rewards"].values() if r is not None)


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory) -> Path:
    require_bwrap()
    return build_pack_dir(tmp_path_factory.mktemp("verifiers"))


def test_vf_eval_plays_each_rollout_in_its_own_sandbox_and_reports_its_grade(pack_dir):
    assert "verifiers==0.4.0" in (pack_dir / "env" / "requirements-verifiers.txt").read_text().splitlines()
    sales = [
        [[tool_call("bash", {"command": FILE_TASK["solution"]["script"]})], [tool_call("submit", {"answer": "60"})]],
        # the second rollout of the task does half of it and answers in text without submitting
        [[tool_call("write_file", {"path": "total.txt", "content": "61\n"})], "the total is 61"],
    ]
    # the protected tests are put back before the grading: rewriting them earns nothing
    coding = [[[tool_call("write_file", {"path": "tests/test_calc.py", "content": "import unittest\n"})], "done"]] * 2
    scripts = {FILE_TASK["id"]: sales, CODING_TASK["id"]: coding}
    episodes = vf_eval(
        pack_dir,
        scripted(scripts),
        rollouts=2,
        out=pack_dir.parent / "vf-out",
    )

    env = load_env(pack_dir).TaskEnvironment(pack_dir)
    expected = {}
    try:
        env.reset(task_id=FILE_TASK["id"])
        env.bash(FILE_TASK["solution"]["script"])
        env.submit("60")
        expected[FILE_TASK["id"], 0] = env.grade()
        env.reset(task_id=FILE_TASK["id"])
        env.write_file("total.txt", "61\n")
        expected[FILE_TASK["id"], 1] = env.grade(answer="the total is 61")
        env.reset(task_id=CODING_TASK["id"])
        env.write_file("tests/test_calc.py", "import unittest\n")
        expected[CODING_TASK["id"], 0] = expected[CODING_TASK["id"], 1] = env.grade(answer="done")
    finally:
        env.close()

    seen: dict[tuple, dict] = {}
    for episode in episodes:
        task_id = episode["task"]["data"]["id"]
        seen[task_id, sum(1 for key in seen if key[0] == task_id)] = episode
    assert set(seen) == set(expected)
    assert [expected[key]["reward"] for key in sorted(expected)] == [0.0, 0.0, 1.0, 0.2]
    for key, episode in seen.items():
        assert reward(episode) == pytest.approx(expected[key]["reward"]), key
        grade = episode["traces"][0]["info"]["gymwright_grade"]
        assert [(c["id"], c["score"]) for c in grade["checks"]] == [
            (c["id"], c["score"]) for c in expected[key]["checks"]
        ]
        assert episode["traces"][0]["agent"]["runtime"]["type"] == "subprocess"


def test_the_verifiers_virtualenv_installs_the_requirements_a_pack_ships(pack_dir):
    """`make verifiers-requirements` (what `make verifiers-venv` installs, --no-deps) is the pack's
    env/requirements-verifiers.txt: verifiers 0.4.0 with openai 2 (verifiers' pin), the grader's other pins."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "verifiers-requirements"], cwd=root, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    shipped = (pack_dir / "env" / "requirements-verifiers.txt").read_text()
    assert done.stdout == shipped
    pins = shipped.splitlines()
    assert "verifiers==0.4.0" in pins and "openai==2.54.0" in pins and not any("openenv" in pin for pin in pins)
    env_pins = (pack_dir / "env" / "requirements.txt").read_text().splitlines()
    assert {pin for pin in env_pins if not pin.startswith(("openai==", "openenv-core=="))} <= set(pins)
    assert len({pin.split("==")[0] for pin in pins}) == len(pins)  # one pin per distribution
