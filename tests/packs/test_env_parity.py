"""Reward parity: one scripted trajectory (the oracle, nop and two hack probes) earns the same reward in
every harness that grades a Gymwright task — the app's preview (a worker's rollout), the command line
(`python -m sandbox.runtime rollout` on the pack's files), the pack's Harbor verifier (tests/test.sh on the
workspace that trajectory leaves), the pack's TaskEnvironment (env/) and its OpenEnv server
(`python -m env serve`, driven by OpenEnv's own client) and verifiers 0.4 (`vf-eval env`, env/verifiers_env.py,
with a scripted model making the same tool calls). The tasks are made in the app,
exported as a pack, and run from that pack.

`HARNESSES` is the list compared: a harness is a function (world, task_id, policy) -> reward; another
harness over the same pack (an OpenEnv server, a verifiers wrapper) joins by appending to it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.core.management import call_command

from sandbox.runtime import get_backend, make_policy, run_rollout
from tests.packs.env_support import CODING_TASK as ENV_CODING_TASK
from tests.packs.env_support import (
    COUNT_ROWS,
    COUNT_TOOL,
    SALES,
    TEST_CALC,
    TEST_HIDDEN,
    VERIFY_TOTAL,
    load_env,
    play,
)
from tests.packs.env_support import FILE_TASK as ENV_FILE_TASK
from tests.packs.test_standalone import harbor_verify

pytestmark = [pytest.mark.bubblewrap]

ROOT = Path(__file__).resolve().parents[2]
# calc.py right for non-negative numbers only: nop and edit-tests keep 2 of the 3 tests (per-test credit);
# the shadow probe's packages break the import of calc, and every test
CALC_PARTLY = b"def add(a, b):\n    return abs(a) + b\n"
POLICIES = ["oracle", "nop", "hack:edit-tests", "hack:shadow"]
TASKS = {"sum-sales": ENV_FILE_TASK, "fix-add": ENV_CODING_TASK}
EXPECTED = {
    ("sum-sales", "oracle"): 1.0,
    ("fix-add", "oracle"): 1.0,
    ("fix-add", "nop"): 2 / 3,
    ("fix-add", "hack:edit-tests"): 2 / 3,
    ("fix-add", "hack:shadow"): 0.0,
}


@dataclass
class World:
    """The tasks as the app has them (versions) and as the pack exported from the app has them."""

    author: object
    versions: dict
    pack_dir: Path
    tmp: Path
    cache: dict = field(default_factory=dict)

    def document(self, task_id: str) -> dict:
        return json.loads((self.pack_dir / "tasks" / task_id / "tests" / "task.json").read_text())


@pytest.fixture
def world(author, reviewer, sandbox_dir, tmp_path, settings) -> World:
    from authoring import services as authoring_services
    from review import services as review_services
    from tests.packs.conftest import _admin

    settings.OPENAI_BASE_URL = ""
    blobs = {
        data: authoring_services.blob_store(data=data).sha256
        for data in (SALES, VERIFY_TOTAL, COUNT_TOOL, CALC_PARTLY, TEST_CALC, TEST_HIDDEN)
    }
    environments = {
        "sum-sales": {
            **ENV_FILE_TASK["environment"],
            "files": [{"path": "tools/count.py", "sha256": blobs[COUNT_TOOL]}],
        },
        "fix-add": ENV_CODING_TASK["environment"],
    }
    files = {
        "sum-sales": [
            {"path": "data/sales.csv", "sha256": blobs[SALES]},
            {"path": "checks/verify.sh", "sha256": blobs[VERIFY_TOTAL], "role": "grader"},
        ],
        "fix-add": [
            {"path": "calc.py", "sha256": blobs[CALC_PARTLY]},
            {"path": "tests/test_calc.py", "sha256": blobs[TEST_CALC], "role": "protected"},
            {"path": "tests/test_hidden.py", "sha256": blobs[TEST_HIDDEN], "role": "grader"},
        ],
    }
    versions = {}
    for task_id, document in TASKS.items():
        spec = {key: value for key, value in environments[task_id].items() if key not in ("id", "version")}
        environment = authoring_services.environment_create(
            slug=document["environment"]["id"], name=task_id, author=author, spec=spec
        )
        task = authoring_services.task_create(
            slug=task_id,
            environment=environment,
            author=author,
            content={
                "title": document["title"],
                "prompt": document["prompt"],
                "rubric": document["rubric"],
                "solution": document["solution"],
                "tags": document["tags"],
                "files": files[task_id],
            },
        )
        review_services.task_submit(task=task, user=_admin(), override_reason="parity tests: no previews needed")
        review_services.review_create(task_version=task.latest_version, reviewer=reviewer, decision="approve")
        task.refresh_from_db()
        versions[task_id] = task.latest_version
    assert COUNT_ROWS in versions["sum-sales"].spec["environment"]["custom_tools"]
    call_command("export_pack", "parity", "--out", str(tmp_path / "parity.tar.gz"))
    with tarfile.open(tmp_path / "parity.tar.gz") as tar:
        tar.extractall(tmp_path / "out", filter="data")
    (pack_dir,) = (tmp_path / "out").iterdir()
    return World(author=author, versions=versions, pack_dir=pack_dir, tmp=tmp_path)


def preview_reward(world: World, task_id: str, policy: str) -> float:
    """The app: a preview of the task version, run by a worker."""
    from sandbox import services, worker

    preview_run = services.preview_run_create(
        task_version=world.versions[task_id], user=world.author, policy=policy, n=1
    )
    rollout = preview_run.rollouts.get()
    assert worker.rollout_execute(rollout_id=rollout.pk) == "done"
    rollout.refresh_from_db()
    assert rollout.status == "done", rollout.error
    return rollout.reward


def cli_reward(world: World, task_id: str, policy: str) -> float:
    """`python -m sandbox.runtime rollout` on the pack's task and files."""
    folder = world.pack_dir / "tasks" / task_id
    command = [sys.executable, "-m", "sandbox.runtime", "rollout", "--task", str(folder / "tests" / "task.json")]
    command += ["--policy", policy, "--backend", "bubblewrap", "--files", str(folder / "files")]
    if (folder / "tests" / "env-files").is_dir():
        command += ["--env-files", str(folder / "tests" / "env-files")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)["grade"]["reward"]


def harbor_reward(world: World, task_id: str, policy: str) -> float:
    """The pack's Harbor verifier (tasks/<id>/tests/test.sh) on the workspace the trajectory leaves and its
    answer in answer.txt, as a Harbor trial hands them over."""
    from grading.engine import parse_task
    from sandbox.runtime.rollout import _load_files

    folder = world.pack_dir / "tasks" / task_id
    task = parse_task(world.document(task_id))
    result = run_rollout(
        task,
        policy=make_policy(policy, task=world.document(task_id)),
        backend=get_backend("bubblewrap"),
        files=_load_files(task.files, str(folder / "files"), "files"),
        env_files=_load_files(task.environment.files, str(folder / "tests" / "env-files"), "env-files"),
    )
    assert result.error is None, result.error
    name = f"{task_id}-{policy.replace(':', '-')}"
    workspace, logs = world.tmp / "harbor" / name / "workspace", world.tmp / "harbor" / name / "logs"
    logs.mkdir(parents=True)
    workspace.mkdir(parents=True)
    for path, data in result.workspace_files.items():
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_bytes(data)
    (workspace / "answer.txt").write_text(result.answer)
    rewards, _ = harbor_verify(folder, workspace, logs)
    return rewards["reward"]


def env_reward(world: World, task_id: str, policy: str) -> float:
    """The pack's env/: TaskEnvironment driven one tool call at a time."""
    if "env" not in world.cache:
        world.cache["env"] = load_env(world.pack_dir).TaskEnvironment(world.pack_dir)
    return play(world.cache["env"], make_policy(policy, task=world.document(task_id)), task_id)["reward"]


class _Recording:
    """The pack's TaskEnvironment, recording each tool call a policy makes (what an OpenEnv client sends)."""

    def __init__(self, env):
        self.env = env
        self.actions: list[dict] = []

    def __getattr__(self, name):
        return getattr(self.env, name)

    def call_tool(self, name, arguments=None):
        parsed = json.loads(arguments or "{}") if isinstance(arguments, str) else dict(arguments or {})
        self.actions.append({"tool": name, "arguments": parsed})
        return self.env.call_tool(name, arguments)

    def grade(self, answer=None):
        if self.env.stop_reason is None:  # a final message instead of submit: OpenEnv's episode submits it
            self.actions.append({"tool": "submit", "arguments": {"answer": answer or ""}})
        return self.env.grade(answer=answer)


def recorded_episodes(world: World) -> list[dict]:
    """The tool calls each policy makes on each task, recorded once by playing the policies against the pack's
    environment: [{"task_id", "policy", "actions": [{"tool", "arguments"}...]}...] in TASKS × POLICIES order."""
    if "episodes" not in world.cache:
        recording = _Recording(load_env(world.pack_dir).TaskEnvironment(world.pack_dir))
        episodes = []
        try:
            for each_task in TASKS:
                for each_policy in POLICIES:
                    recording.actions = []
                    play(recording, make_policy(each_policy, task=world.document(each_task)), each_task)
                    episodes.append({"task_id": each_task, "policy": each_policy, "actions": recording.actions})
        finally:
            recording.env.close()
        world.cache["episodes"] = episodes
    return world.cache["episodes"]


def openenv_reward(world: World, task_id: str, policy: str) -> float:
    """The pack's OpenEnv server (`python -m env serve`, from the pack, in the virtualenv of its
    env/requirements.txt), driven by OpenEnv's own client with the tool calls each policy makes, each episode in
    a sandbox of its own. The calls are recorded once for every (task, policy), by playing the policies against
    the pack's environment, and the episodes then run over the server in one client session."""
    if "openenv" not in world.cache:
        import contextlib

        from tests.packs.test_env_server import client, serving

        episodes = recorded_episodes(world)
        with contextlib.ExitStack() as stack:
            url = stack.enter_context(serving(world.pack_dir))
            played = client("episodes", [url], episodes=episodes)
        world.cache["openenv"] = {
            (episode["task_id"], episode["policy"]): result["steps"][-1]["reward"]
            for episode, result in zip(episodes, played)
        }
    return world.cache["openenv"][task_id, policy]


def verifiers_reward(world: World, task_id: str, policy: str) -> float:
    """verifiers 0.4 (`vf-eval env` from the pack, in the virtualenv of its env/requirements-verifiers.txt), its
    scripted model making each policy's recorded tool calls, one rollout per policy and task in a sandbox of its
    own: the reward verifiers reports for it."""
    if "verifiers" not in world.cache:
        from tests.packs.test_env_verifiers import reward, scripted, vf_eval
        from tests.support.openai_server import tool_call

        scripts: dict[str, list] = {each_task: [] for each_task in TASKS}
        for episode in recorded_episodes(world):
            turns = [[tool_call(a["tool"], a["arguments"])] for a in episode["actions"]]
            scripts[episode["task_id"]].append(turns)
        played = vf_eval(world.pack_dir, scripted(scripts, TASKS), rollouts=len(POLICIES), out=world.tmp / "verifiers")
        rewards: dict = {}
        for episode in played:  # in the order the rollouts ran: each task's policies in POLICIES order
            each_task = episode["task"]["data"]["id"]
            each_policy = POLICIES[sum(1 for key in rewards if key[0] == each_task)]
            rewards[each_task, each_policy] = reward(episode)
        world.cache["verifiers"] = rewards
    return world.cache["verifiers"][task_id, policy]


HARNESSES: list[tuple[str, Callable[[World, str, str], float]]] = [
    ("preview", preview_reward),
    ("cli", cli_reward),
    ("harbor", harbor_reward),
    ("env", env_reward),
    ("openenv", openenv_reward),
    ("verifiers", verifiers_reward),
]


def test_one_trajectory_earns_the_same_reward_in_every_harness(world):
    seen = {}
    try:
        for task_id in TASKS:
            for policy in POLICIES:
                seen[task_id, policy] = {name: harness(world, task_id, policy) for name, harness in HARNESSES}
    finally:
        if "env" in world.cache:
            world.cache["env"].close()
    differ = {
        key: rewards
        for key, rewards in seen.items()
        if any(reward != pytest.approx(EXPECTED.get(key, 0.0)) for reward in rewards.values())
    }
    assert differ == {}, seen
