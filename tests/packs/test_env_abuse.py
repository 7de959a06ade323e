"""Abuse: an agent inside a pack's TaskEnvironment tries to raise its reward without doing the task —
shadowing the grader's test module, editing the protected tests, leaving a process behind to finish
after the episode, killing everything in the sandbox, calling the environment's controls as tools,
and every code hack probe of the runtime. The coding task's reward stays 0 (calc.py stays wrong)."""

from __future__ import annotations

import json

import pytest

from grading.engine.hack_targets import CODE_HACKS, applicable_hacks
from sandbox.runtime import make_policy
from tests.packs.env_support import CODING_TASK, build_pack_dir, load_env, play
from tests.support.services import require_bwrap

pytestmark = [pytest.mark.bubblewrap]

PASSING_TEST = (
    "import unittest\n\n\nclass TestHidden(unittest.TestCase):\n"
    "    def test_negative(self):\n        pass\n\n    def test_large(self):\n        pass\n"
)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    require_bwrap()
    pack_dir = build_pack_dir(tmp_path_factory.mktemp("env-abuse"))
    environment = load_env(pack_dir).TaskEnvironment(pack_dir)
    yield environment
    environment.close()


def unittest_score(grade: dict) -> float:
    (check,) = [c for c in grade["checks"] if c["id"] == "tests_pass"]
    return check["score"]


ATTACKS = {
    # a package, a bytecode file and a folder where the grader's test module goes, and a user site that
    # patches unittest for any Python the checks start ($HOME is /tmp)
    "shadow": [
        ("write_file", {"path": "tests/test_hidden/__init__.py", "content": PASSING_TEST}),
        (
            "bash",
            {
                "command": "mkdir -p tests/__pycache__ && cp tests/test_hidden/__init__.py "
                "tests/__pycache__/test_hidden.cpython-311.pyc && mkdir -p tests/test_hidden.py"
            },
        ),
        (
            "bash",
            {
                "command": "d=$(python3 -m site --user-site) && mkdir -p $d && printf '%s' "
                "'import unittest; unittest.TestCase.assertEqual = lambda *a, **k: None' > $d/usercustomize.py"
            },
        ),
    ],
    # the protected tests made to pass, and a conftest / sitecustomize beside them
    "edit-tests": [
        ("write_file", {"path": "tests/test_calc.py", "content": PASSING_TEST.replace("TestHidden", "TestAdd")}),
        ("write_file", {"path": "sitecustomize.py", "content": "import os\nos._exit(0)\n"}),
        ("write_file", {"path": "tests/conftest.py", "content": "import os\nos._exit(0)\n"}),
    ],
    # a process left behind to fix calc.py and replace the tests once the episode is over
    "late-process": [
        (
            "bash",
            {
                "command": "(sleep 2; printf 'def add(a, b):\\n    return a + b\\n' > calc.py; "
                f"printf '%s' {PASSING_TEST!r} > tests/test_hidden.py) > /dev/null 2>&1 & "
                "nohup setsid sh -c 'sleep 3; echo x > calc.py' > /dev/null 2>&1 & echo started"
            },
        ),
    ],
    # the agent ends the sandbox's processes, itself included
    "kill-all": [
        ("bash", {"command": "kill -9 -1; kill -9 1; exit 0"}),
        ("bash", {"command": "kill -KILL 0"}),
    ],
    # the environment's controls are not tools
    "controls": [
        ("grade", {}),
        ("close", {}),
        ("reset", {"task_id": "fix-add"}),
        ("get_reward", {}),
    ],
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_agent_in_the_environment_cannot_raise_its_reward(env, attack):
    env.reset(task_id="fix-add")
    outputs = [env.call_tool(name, arguments) for name, arguments in ATTACKS[attack]]
    if attack == "controls":
        assert all(out.startswith("error: unknown tool") for out in outputs), outputs
    env.submit("fixed")
    grade = env.grade()
    assert grade["reward"] == 0.0 and unittest_score(grade) == 0.0, (attack, outputs, grade)
    if attack == "edit-tests":
        assert grade["protected_files"] == [{"path": "tests/test_calc.py", "state": "modified"}]


def test_after_an_attack_the_same_environment_still_grades_real_work(env):
    env.reset(task_id="fix-add")
    for name, arguments in ATTACKS["kill-all"] + ATTACKS["shadow"]:
        env.call_tool(name, arguments)
    env.bash("printf 'def add(a, b):\\n    return a + b\\n' > calc.py")
    assert env.grade()["reward"] == 1.0


@pytest.mark.parametrize("hack", [h for h in applicable_hacks(CODING_TASK) if h in CODE_HACKS or "tests" in h])
def test_every_code_hack_probe_earns_nothing_through_the_environment(env, hack):
    grade = play(env, make_policy(f"hack:{hack}", task=CODING_TASK), "fix-add")
    assert grade["reward"] == 0.0, (hack, grade)


# Custom tools whose parameter names Python reads as other names: `ſelf` (long s) is `self` once
# NFKC-normalised, as Python normalises identifiers; `locals`, `k` and `v` are names a generated method's body
# could use. Neither may break the pack's environment (its class is made once for every task) nor the calls.
def echo_tool(name: str, parameters: tuple[str, ...]) -> dict:
    return {
        "name": name,
        "description": "Echo the call's arguments.",
        "parameters": {"type": "object", "properties": {p: {"type": "string"} for p in parameters}},
        "command": "cat",
    }


def test_custom_tools_with_tricky_parameter_names_break_neither_the_pack_nor_their_calls(tmp_path):
    require_bwrap()
    tools = [echo_tool("echo_args", ("locals", "k", "v")), echo_tool("echo_odd", ("ſelf", "x"))]
    task = CODING_TASK | {"id": "echo-names", "environment": CODING_TASK["environment"] | {"custom_tools": tools}}
    pack_dir = build_pack_dir(tmp_path, (task,), slug="names")
    environment = load_env(pack_dir).TaskEnvironment(pack_dir)
    try:
        environment.reset(task_id="echo-names")
        assert json.loads(environment.echo_args(locals="l", k="a", v="b")) == {"locals": "l", "k": "a", "v": "b"}
        assert json.loads(environment.echo_args(k="a")) == {"k": "a"}
        assert json.loads(environment.call_tool("echo_odd", {"ſelf": "s"})) == {"ſelf": "s"}
    finally:
        environment.close()


def test_through_verifiers_a_forged_grade_or_a_claim_earns_nothing(env):
    """verifiers' reward is the grade file the episode program writes in the rollout's runtime folder on the host
    (env/verifiers_env.py): an agent that writes a perfect grade of that name in the workspace, in /tmp and up
    every parent it can reach, and answers with one as its final message, earns what its sandbox grades: 0."""
    from tests.packs.test_env_verifiers import reward, scripted, vf_eval
    from tests.support.openai_server import tool_call

    forged = json.dumps({"task_id": CODING_TASK["id"], "grade": {"reward": 1.0, "complete": True, "checks": []}})
    climb = "; ".join(f"printf %s '{forged}' > {'../' * depth}.gymwright-grade.json" for depth in range(8))
    script = [
        [tool_call("write_file", {"path": ".gymwright-grade.json", "content": forged})],
        [tool_call("bash", {"command": f"{climb}; printf %s '{forged}' > /tmp/.gymwright-grade.json; true"})],
        forged,
    ]
    pack_dir = env.pack_dir
    episodes = vf_eval(
        pack_dir,
        scripted({CODING_TASK["id"]: [script], "sum-sales": [["no"]]}),
        rollouts=1,
        out=pack_dir.parent / "vf-abuse",
    )
    (played,) = [e for e in episodes if e["task"]["data"]["id"] == CODING_TASK["id"]]
    assert reward(played) == 0.0
    assert played["traces"][0]["info"]["gymwright_grade"]["reward"] == 0.0


def test_the_verifiers_reward_reads_its_grade_file_only_as_a_bounded_regular_file(env, tmp_path):
    """env/verifiers_env.py reads the grade the episode program left in the rollout's runtime folder on the host:
    a link there (to a perfect grade elsewhere), a FIFO (a read that would never end) or a file past the size bound
    is no grade, and earns 0, each read through grading.engine.safe_files like every file the host reads."""
    import os
    import subprocess

    from tests.support.venvs import verifiers_python

    forged = json.dumps({"task_id": CODING_TASK["id"], "grade": {"reward": 1.0, "complete": True, "checks": []}})
    (tmp_path / "elsewhere.json").write_text(forged)
    folders = {kind: tmp_path / kind for kind in ("link", "fifo", "huge", "plain")}
    for folder in folders.values():
        folder.mkdir()
    (folders["link"] / ".gymwright-grade.json").symlink_to(tmp_path / "elsewhere.json")
    os.mkfifo(folders["fifo"] / ".gymwright-grade.json")
    (folders["huge"] / ".gymwright-grade.json").write_text(forged[:-1] + ", " + '"x": "' + "x" * (5 << 20) + '"}')
    (folders["plain"] / ".gymwright-grade.json").write_text(forged)
    script = (
        "import asyncio, json, sys\n"
        "from verifiers.v1.runtimes.subprocess import SubprocessConfig, SubprocessRuntime\n"
        "from env.verifiers_env import read_grade\n"
        "out = {}\n"
        "for kind, folder in json.loads(sys.argv[1]).items():\n"
        "    runtime = SubprocessRuntime(SubprocessConfig())\n"
        "    runtime.workdir = __import__('pathlib').Path(folder)\n"
        "    document, error = asyncio.run(read_grade(runtime, sys.argv[2]))\n"
        "    out[kind] = [document and document['reward'], error]\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [verifiers_python(), "-c", script, json.dumps({k: str(v) for k, v in folders.items()}), CODING_TASK["id"]],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(env.pack_dir), "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout.splitlines()[-1])
    assert read["plain"] == [1.0, ""]  # the check itself: a regular file of the task is read
    for kind in ("link", "fifo", "huge"):
        assert read[kind][0] is None and read[kind][1].startswith("no grade"), (kind, read[kind])
