"""A pack's env/: the TaskEnvironment a trainer drives live, over the pack's own sandbox runtime and
grader (docs/environments.md). Built into a real pack, imported from the unpacked folder, run on real
bubblewrap (and docker) sandboxes."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from packs import archive
from packs.archive.envdir import RUNTIME_DIR
from sandbox.runtime import make_policy
from tests.packs.env_support import CALC_FIXED, CODING_TASK, FILE_TASK, build_pack_dir, load_env, play
from tests.packs.test_standalone import TEXT_TASK
from tests.support.services import require_bwrap

pytestmark = [pytest.mark.bubblewrap]


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory) -> Path:
    require_bwrap()
    return build_pack_dir(tmp_path_factory.mktemp("env"))


@pytest.fixture(scope="module")
def env_module(pack_dir):
    return load_env(pack_dir)


@pytest.fixture
def env(env_module, pack_dir):
    environment = env_module.TaskEnvironment(pack_dir)
    yield environment
    environment.close()


def test_a_pack_with_agentic_tasks_bundles_env_with_the_runtime_byte_for_byte_and_verifies(pack_dir, tmp_path):
    manifest = json.loads((pack_dir / "manifest.json").read_text())
    env_paths = sorted(path for path in manifest["files"] if path.startswith("env/"))
    assert {"env/__init__.py", "env/environment.py", "env/requirements.txt", "env/runtime/rollout.py"} <= set(env_paths)
    for path in RUNTIME_DIR.rglob("*.py"):
        if "__pycache__" not in path.parts:
            relative = path.relative_to(RUNTIME_DIR).as_posix()
            assert (pack_dir / "env" / "runtime" / relative).read_bytes() == path.read_bytes(), relative
    requirements = (pack_dir / "env" / "requirements.txt").read_text().splitlines()
    assert set((pack_dir / "grader" / "requirements.txt").read_text().splitlines()) <= set(requirements)
    assert any(line.startswith("docker==") for line in requirements)  # the docker backend's client
    assert archive.verify_pack(pack_dir.parent.parent / "envs.tar.gz").ok
    # a pack whose every task a response grades has no env/
    text_only = build_pack_dir(tmp_path, (TEXT_TASK,), slug="text")
    assert not (text_only / "env").exists()
    assert not any(p.startswith("env/") for p in json.loads((text_only / "manifest.json").read_text())["files"])


def test_the_tools_are_exactly_the_public_functions_trl_collects(env_module, env, pack_dir):
    assert env.tasks() == ["fix-add", "sum-sales"] == env_module.agentic_task_ids(pack_dir)  # not the text task
    # TRL 1.16 offers a model every public function of the environment's class but reset and get_reward
    collected = {name for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)}
    tools = {name for name in collected if not name.startswith("_")} - {"reset", "get_reward"}
    assert tools == {"bash", "read_file", "write_file", "list_files", "submit", "count_rows"}
    count_rows = inspect.signature(type(env).count_rows)
    assert str(count_rows) == "(self, path: str, skip_header: bool | None = None) -> str"
    assert "Args:\n    path: The file, relative to /workspace." in type(env).count_rows.__doc__
    for name in tools - {"count_rows"}:
        assert "Args:" in getattr(type(env), name).__doc__ and "Returns:" in getattr(type(env), name).__doc__
    # the controls work on the instance and are not functions of the class
    assert type(env).__name__ == "TaskEnvironment" and callable(env.grade) and callable(env.close)


def test_oracle_and_nop_through_the_environment_earn_the_grades_of_the_work(env, env_module):
    for task in (FILE_TASK, CODING_TASK):
        grade = play(env, make_policy("oracle", task=task), task["id"])
        assert grade["reward"] == 1.0 and grade["complete"] is True, grade
        assert env.reward == 1.0 == env.get_reward() and env.grade() == grade  # graded once
        grade = play(env, make_policy("nop"), task["id"])
        assert grade["reward"] == 0.0 and grade["complete"] is True, grade
    assert [c["id"] for c in grade["checks"]] == ["tests_pass"]


def test_the_typed_methods_work_the_sandbox_and_the_episode_ends_with_its_limits(env):
    assert env.reset(task_id="sum-sales") == FILE_TASK["prompt"]
    assert env.list_files() == "data/sales.csv" and env.list_files("data") == "data/sales.csv"
    assert env.list_files("nowhere") == "(no files under nowhere)"
    assert env.read_file("data/sales.csv").startswith("region,amount")
    assert env.count_rows(path="data/sales.csv", skip_header=True).strip() == "3"
    assert env.write_file("total.txt", "60\n") == "wrote 3 bytes to total.txt"
    assert env.bash("cat total.txt") == "exit code: 0\n[stdout]\n60\n"
    assert env.call_tool("no_such_tool", {}).startswith("error: unknown tool 'no_such_tool'")
    flood = env.bash("head -c 300000 /dev/zero | tr '\\0' x")
    assert len(flood) < 70_000 and "[truncated" in flood  # the runtime's output cap
    assert env.submit("60") == "submitted" and env.stop_reason == "submitted"
    assert env.bash("echo more") == "error: the episode has ended (submitted); no more tool calls"
    assert env.grade()["reward"] == 1.0
    # max_steps: every call is a step
    env.reset(task_id="sum-sales")
    for _ in range(FILE_TASK["environment"]["limits"]["max_steps"]):
        env.bash("true")
    assert env.bash("echo 60 > total.txt") == "error: the episode has ended (max_steps); no more tool calls"
    assert env.grade()["reward"] == 0.0


def test_reset_picks_tasks_by_id_or_seed_and_refuses_an_unknown_one(env_module, env, pack_dir):
    with pytest.raises(ValueError, match="'six-times-seven' is not an agentic task of the pack"):
        env.reset(task_id="six-times-seven")
    with pytest.raises(ValueError, match="not an agentic task"):
        env_module.TaskEnvironment(pack_dir, task_id="nope")
    with pytest.raises(ValueError, match="unknown backend 'qemu'"):
        env_module.TaskEnvironment(pack_dir, backend="qemu")
    seen = {env.reset(seed=seed) for seed in range(8)}
    assert seen == {FILE_TASK["prompt"], CODING_TASK["prompt"]}
    assert env.reset(seed=3) == env.reset(seed=3)
    with pytest.raises(RuntimeError, match="call reset"):
        env_module.TaskEnvironment(pack_dir).bash("ls")


def test_grader_files_are_out_of_reach_and_protected_ones_restored(env):
    env.reset(task_id="fix-add")
    listing = env.list_files()
    assert "tests/test_calc.py" in listing and "test_hidden" not in listing
    assert env.read_file("tests/test_hidden.py").startswith("error: no such file")
    assert env.bash("find / -name 'test_hidden*' 2>/dev/null | head -5; echo end") == "exit code: 0\n[stdout]\nend\n"
    # the agent makes its copy of the protected test trivially pass, and fixes nothing
    env.write_file(
        "tests/test_calc.py",
        "import unittest\nclass TestAdd(unittest.TestCase):\n    def test_small(self):\n        pass\n",
    )
    grade = env.grade()
    assert grade["reward"] == 0.0 and grade["protected_files"] == [{"path": "tests/test_calc.py", "state": "modified"}]
    # the same edit beside a real fix changes nothing either
    env.reset(task_id="fix-add")
    env.write_file("calc.py", CALC_FIXED)
    env.write_file("tests/test_calc.py", "")
    assert env.grade()["reward"] == 1.0


@pytest.mark.docker
def test_the_docker_backend_runs_the_same_episode(env_module, pack_dir):
    from tests.support.images import python_image
    from tests.support.services import require_docker

    image = python_image(require_docker())
    with env_module.TaskEnvironment(pack_dir, backend="docker", image=image) as env:
        grade = play(env, make_policy("oracle", task=CODING_TASK), "fix-add")
        assert grade["reward"] == 1.0, grade
        assert play(env, make_policy("nop"), "fix-add")["reward"] == 0.0
