"""A `tests` check through a pack's Harbor verifier (tests/test.sh, the bundled grader, in a bubblewrap box as
Harbor's verifier container): the same runner, so the attacks on the demo coding task earn nothing there too."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from authoring.demo import FIZZBUZZ_STUB, FIZZBUZZ_TESTS
from grading.engine import content_sha256, parse_task
from packs import archive
from tests.support.harbor_verifier import run_test_sh

STUB, TESTS = FIZZBUZZ_STUB.encode(), FIZZBUZZ_TESTS.encode()
BLOBS = {hashlib.sha256(data).hexdigest(): data for data in (STUB, TESTS)}
TASK = {
    "schema": "gymwright.task/v1",
    "id": "fizz-tests",
    "version": 1,
    "title": "Fizzbuzz",
    "prompt": "Implement fizzbuzz(n) in fizzbuzz.py.",
    "environment": {"id": "py", "version": 1, "network": "none", "tools": ["bash", "submit"]},
    "files": [
        {"path": "fizzbuzz.py", "sha256": hashlib.sha256(STUB).hexdigest()},
        {"path": "test_fizzbuzz.py", "sha256": hashlib.sha256(TESTS).hexdigest(), "role": "protected"},
    ],
    "solution": {"script": "true", "answer": None},
    "rubric": {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 1.0,
        "checks": [{"id": "tests_pass", "kind": "tests", "points": 1, "files": ["test_fizzbuzz.py"], "timeout_s": 30}],
    },
    "tags": [],
    "metadata": {},
}

GOOD = (
    b'def fizzbuzz(n):\n    return "FizzBuzz" if n % 15 == 0 else "Fizz" if n % 3 == 0 else '
    b'"Buzz" if n % 5 == 0 else str(n)\n'
)
ATTACKS = {
    "os._exit(0) at import": {"fizzbuzz.py": b"import os\nos._exit(0)\n"},
    "a str subclass whose __eq__ is always true": {
        "fizzbuzz.py": (
            b"class A(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
            b"def fizzbuzz(n):\n    return A('?')\n"
        )
    },
    "a unittest package": {"fizzbuzz.py": GOOD, "unittest/__init__.py": b"class TestCase:\n    pass\n"},
    "assertEqual patched at import": {
        "fizzbuzz.py": (
            b"import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\ndef fizzbuzz(n):\n    return ''\n"
        )
    },
    "the test file edited": {
        "fizzbuzz.py": STUB,
        "test_fizzbuzz.py": b"import unittest\nclass FizzBuzzTest("
        b"unittest.TestCase):\n    def test_numbers(self):\n        pass\n",
    },
}


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    return _task_dir(tmp_path_factory.mktemp("pack"), TASK)


def _task_dir(tmp: Path, task: dict) -> Path:
    item = archive.TaskItem(parse_task(task).to_document() | task, content_sha256(task))
    archive.build_pack(
        out=tmp / "pack.tar.gz",
        info=archive.PackInfo(slug="fizz", name="F", version="1.0.0"),
        tasks=[item],
        read_blob=BLOBS.__getitem__,
        scratch_dir=tmp / "scratch",
    )
    with tarfile.open(tmp / "pack.tar.gz") as tar:
        tar.extractall(tmp / "out", filter="data")
    return tmp / "out" / "fizz-1.0.0" / "tasks" / task["id"]


def _verify(task_dir: Path, tmp_path: Path, files: dict[str, bytes]) -> dict:
    workspace, logs = tmp_path / "ws", tmp_path / "logs"
    workspace.mkdir()
    logs.mkdir()
    for name, data in {"test_fizzbuzz.py": TESTS, **files}.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_bytes(data)
    done = run_test_sh(task_dir, workspace, logs, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads((logs / "verifier" / "grade.json").read_text())


def test_the_honest_solution_passes_through_the_harbor_verifier(task_dir, tmp_path):
    document = _verify(task_dir, tmp_path, {"fizzbuzz.py": GOOD})
    assert document["reward"] == 1.0, document["checks"][0]["explanation"]
    assert [test["outcome"] for test in document["checks"][0]["tests"]] == ["passed", "passed"]


@pytest.mark.parametrize("attack", list(ATTACKS), ids=list(ATTACKS))
def test_an_attack_on_a_tests_check_earns_nothing_through_the_harbor_verifier(task_dir, tmp_path, attack):
    document = _verify(task_dir, tmp_path, ATTACKS[attack])
    check = document["checks"][0]
    assert check["status"] == "scored" and check["score"] == 0.0 and document["reward"] == 0.0, check["explanation"]


# A grader's helper and the script a check runs with it; the agent's build script, run by a check before it, leaves
# a process behind that keeps writing a helper of its own there, to outlast the helper's restoration.
HELPER, CHECKER = b"VALUE = False\n", b"import sys, helper\nsys.exit(0 if helper.VALUE is True else 1)\n"
BLOBS.update({hashlib.sha256(data).hexdigest(): data for data in (HELPER, CHECKER)})
LINGERING_WRITER = (
    b"echo 'VALUE = True' > /tmp/helper.py\n"
    b"(while true; do cp /tmp/helper.py helper.py 2>/dev/null; done) >/dev/null 2>&1 &\n"
    b"sleep 0.2\n"
)


def test_a_process_the_agents_build_leaves_running_does_not_outlive_its_check(tmp_path):
    """Harbor's verifier runs every check in one container: what a check's command starts in the background is
    ended when the command is, as in Gymwright's own sandboxes, so it cannot rewrite a grader file after it is put
    back for a later check."""
    task = {
        **TASK,
        "id": "helper-build",
        "files": [
            {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "role": "grader"}
            for path, data in (("helper.py", HELPER), ("checker.py", CHECKER))
        ],
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": "build", "kind": "command", "points": 1, "run": "sh build.sh"},
                *[{"id": f"checker{n}", "kind": "command", "points": 1, "run": "python3 checker.py"} for n in range(3)],
            ],
        },
    }
    (tmp_path / "pack").mkdir()
    task_dir = _task_dir(tmp_path / "pack", task)
    document = _verify(task_dir, tmp_path, {"build.sh": LINGERING_WRITER})
    scores = {check["id"]: check["score"] for check in document["checks"]}
    assert scores == {"build": 1.0, "checker0": 0.0, "checker1": 0.0, "checker2": 0.0}, [
        check["explanation"] for check in document["checks"]
    ]
