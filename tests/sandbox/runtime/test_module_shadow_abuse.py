"""A grader's module put back into the workspace is the module the checks import (issue 27, "a package that shadows
the tests"), on both backends.

CPython's path finder prefers, in one folder, a package folder `helper/` and an extension module
`helper.cpython-311-x86_64-linux-gnu.so` to `helper.py`, whatever the bytecode rule says. The agent leaves such a
shadow beside the task's grader file `helper.py`; every kind of check that imports `helper` from the workspace (a
python check, a `command` check running `python3 -m checker` there, a `tests` check whose tests import it) must
then see the grader's bytes: the restoration removes the shadows (safe_files.remove_module_shadows) before it
writes the files. A `sitecustomize.py`/`.pth` in the workspace is never read by the checks' Python at all.
Each attack is first shown to work on a plain interpreter, so the test fails if the attack stops being one.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from sandbox.runtime import run_rollout
from tests.sandbox.runtime.test_runtime_roles import ScriptPolicy
from tests.support.services import missing

HELPER = "VALUE = False\n"  # the grader's helper: the answer is wrong
SHADOW_C = r"""
#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "helper", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_helper(void) {
    PyObject *m = PyModule_Create(&def);
    if (m) PyModule_AddObject(m, "VALUE", Py_NewRef(Py_True));
    return m;
}
"""


@pytest.fixture(scope="session")
def shadow_so(tmp_path_factory) -> bytes:
    """A real extension module `helper` with VALUE = True, for the sandboxes' /usr/bin/python3.11."""
    include = Path("/usr/include/python3.11")
    if not shutil.which("gcc") or not (include / "Python.h").is_file():
        missing("gcc and the python3.11 headers", "apt-get install gcc python3.11-dev")
    folder = tmp_path_factory.mktemp("shadow")
    (folder / "helper.c").write_text(SHADOW_C)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", f"-I{include}", "-o", str(folder / "helper.so"), str(folder / "helper.c")],
        check=True,
        capture_output=True,
    )
    return (folder / "helper.so").read_bytes()


EXT = sysconfig.get_config_var("EXT_SUFFIX") or ".cpython-311-x86_64-linux-gnu.so"


PLANTS = ("extension", "abi3", "package", "sourceless-package")
GRADER_FILES = {
    "helper.py": HELPER.encode(),
    "checker.py": b"import sys, helper\nsys.exit(0 if helper.VALUE is True else 1)\n",
    "tests/test_helper.py": b"import unittest\nimport helper\n\n\nclass T(unittest.TestCase):\n"
    b"    def test_value(self):\n        self.assertIs(helper.VALUE, True)\n",
}


def _write(path: str, data: bytes) -> str:
    """A shell line that writes `data` at `path` in the workspace, as the agent would."""
    folder = path.rpartition("/")[0]
    encoded = base64.b64encode(data).decode()
    return (
        (f"mkdir -p {folder} && " if folder else "")
        + f"python3 -c 'import base64, sys; open(sys.argv[1], \"wb\").write(base64.b64decode(sys.argv[2]))' "
        f"{path} {encoded}"
    )


SHOW = "python3 -c 'import helper; print(\"shadow\", helper.VALUE)'"


def _plant_script(plant: str, shadow_so: bytes) -> str:
    """Plant the shadow and print what a plain `python3` in the workspace imports as `helper`: first alone, then
    beside a helper.py as the grader restores it. Both must say True: the attack works on an unprotected import."""
    if plant == "extension":
        lines = [_write(f"helper{EXT}", shadow_so)]
    elif plant == "abi3":
        lines = [_write("helper.abi3.so", shadow_so)]
    elif plant == "package":
        lines = [_write("helper/__init__.py", b"VALUE = True\n")]
    else:
        lines = [
            _write("/tmp/s.py", b"VALUE = True\n"),
            'mkdir -p helper && python3 -c "import py_compile; '
            "py_compile.compile('/tmp/s.py', cfile='helper/__init__.pyc', doraise=True)\"",
        ]
    return "\n".join([*lines, SHOW, _write("helper.py", HELPER.encode()), SHOW])


def _task(checks: list[dict], files: dict[str, bytes] | None = None) -> tuple[dict, dict[str, bytes]]:
    files = GRADER_FILES if files is None else files
    task = {
        "schema": "gymwright.task/v1",
        "id": "shadow",
        "prompt": "Make the checks pass.",
        "environment": {"limits": {"max_steps": 3}},
        "files": [
            {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "role": "grader"} for path, data in files.items()
        ],
        "rubric": {"schema": "gymwright.rubric/v1", "checks": checks},
    }
    return task, files


def _rollout(checks, script, backend, files=None):
    task, files = _task(checks, files)
    result = run_rollout(task, policy=ScriptPolicy(script), backend=backend, files=files)
    assert result.error is None, result.error
    return result


def _scores(result) -> dict:
    return {check.id: (check.status, check.score) for check in result.grade.checks}


CHECKS = [
    {
        "id": "python",
        "kind": "python",
        "points": 1,
        "code": "def check(ctx):\n    import sys\n    sys.path.insert(0, ctx.workspace)\n    import helper\n"
        "    return helper.VALUE is True\n",
    },
    {"id": "command", "kind": "command", "points": 1, "run": "python3 -m checker"},
    {"id": "script", "kind": "command", "points": 1, "run": "python3 checker.py"},
    {"id": "tests", "kind": "tests", "points": 1, "files": ["tests/test_helper.py"], "runner": "unittest"},
]


ALL_ZERO = {check["id"]: ("scored", 0.0) for check in CHECKS}


@pytest.mark.parametrize("plant", PLANTS)
def test_a_module_shadowing_a_grader_file_never_passes_a_check(python_backend, shadow_so, plant):
    result = _rollout(CHECKS, _plant_script(plant, shadow_so), python_backend)
    assert result.answer.count("shadow True") == 2, result.answer  # the attack works on a plain interpreter
    assert _scores(result) == ALL_ZERO, [(check.id, check.explanation) for check in result.grade.checks]
    assert result.grade.reward == 0


def test_the_checks_see_the_grader_helper_when_nothing_shadows_it(python_backend):
    """The same task with a true helper passes every check: the zeros above are the shadows' removal at work."""
    files = {**GRADER_FILES, "helper.py": b"VALUE = True\n"}
    result = _rollout(CHECKS, "echo honest", python_backend, files=files)
    assert _scores(result) == {check["id"]: ("scored", 1.0) for check in CHECKS}, [
        (check.id, check.explanation) for check in result.grade.checks
    ]


def test_a_link_named_like_a_grader_module_is_removed_not_followed(python_backend):
    """`helper` -> a package folder inside the workspace (a link neutralise_links keeps): removed itself, its
    target left as it is."""
    script = "\n".join(
        [_write("inside/__init__.py", b"VALUE = True\n"), "ln -s inside helper", SHOW, "cat inside/__init__.py"]
    )
    result = _rollout(CHECKS, script, python_backend)
    assert "shadow True" in result.answer, result.answer
    assert _scores(result) == ALL_ZERO, [(check.id, check.explanation) for check in result.grade.checks]
    assert result.workspace_files  # the agent's tree was captured before the restoration


def test_sitecustomize_and_pth_in_the_workspace_are_never_run_by_a_check(python_backend):
    """The checks' Python imports `site` before the working directory is on sys.path (command checks), or runs
    without it (-I, -S: python and tests checks): a `sitecustomize.py`, `usercustomize.py` or `.pth` the agent
    writes in the workspace never runs. Each would end the process with exit code 0."""
    hook = b"import os; os._exit(0)\n"
    script = "\n".join(
        [
            _write("sitecustomize.py", hook),
            _write("usercustomize.py", hook),
            _write("zz-gymwright.pth", hook),
            _write("tests/sitecustomize.py", hook),
            "PYTHONPATH=. python3 -c 'import sys; sys.exit(1)'; echo planted $?",
        ]
    )
    result = _rollout(CHECKS, script, python_backend)
    assert "planted 0" in result.answer, result.answer  # the hook works where the workspace is on the path at start
    assert _scores(result) == ALL_ZERO, [(check.id, check.explanation) for check in result.grade.checks]


def test_the_agents_own_compiled_module_is_still_imported(python_backend, shadow_so):
    """Only what shadows a grader module goes: the agent's own extension module (no grader file of that name) is
    what a check importing the agent's code gets, so a compiled solution still passes."""
    checks = [CHECKS[0]]
    script = "\n".join([_write(f"helper{EXT}", shadow_so), SHOW])
    result = _rollout(checks, script, python_backend, files={"other.py": b"X = 1\n"})
    assert "shadow True" in result.answer, result.answer
    assert _scores(result) == {"python": ("scored", 1.0)}, result.grade.checks[0].explanation


def test_a_check_that_runs_the_agents_code_cannot_plant_for_the_checks_after_it(python_backend):
    """The first check runs the agent's own build script (as a coding task's `make` would): the script rewrites the
    grader's helper.py and plants a package beside it. Every later check runs with the grader's files put back
    and the shadow gone, so none of them passes; the build check itself passes (its script exits 0)."""
    plant = "\n".join([_write("helper/__init__.py", b"VALUE = True\n"), _write("helper.py", b"VALUE = True\n")])
    script = "\n".join(
        [_write("build.sh", plant.encode()), "sh build.sh", SHOW, "rm -r helper", _write("helper.py", HELPER.encode())]
    )
    build = {"id": "build", "kind": "command", "points": 1, "run": "sh build.sh"}
    result = _rollout([build, *CHECKS], script, python_backend)
    assert "shadow True" in result.answer, result.answer  # the script's plant works on a plain interpreter
    assert _scores(result) == {"build": ("scored", 1.0), **ALL_ZERO}, [
        (check.id, check.explanation) for check in result.grade.checks
    ]


def test_a_check_that_fills_the_workspace_cannot_leave_a_later_penalty_unscored(python_backend):
    """The agent's build script (run by the first check) fills the workspace and deletes the grader's helper, so
    the files cannot be put back before the next run. An unscored penalty is not charged (RUBRIC.md, "Scoring"):
    what the agent's code did to the sandbox fails the checks after it instead, penalties charged."""
    fill = b"rm -f helper.py checker.py\ncat /dev/zero > filler 2>/dev/null\ntrue\n"
    script = "\n".join([_write("build.sh", fill), "echo ready"])
    checks = [
        {"id": "build", "kind": "command", "points": 1, "run": "sh build.sh"},
        {"id": "tampered", "kind": "command", "points": -1, "run": "true"},  # met: charged
        CHECKS[1],
    ]
    task, files = _task(checks)
    task["environment"]["limits"] = {"max_steps": 3, "workspace_mb": 8}
    result = run_rollout(task, policy=ScriptPolicy(script), backend=python_backend, files=files)
    assert result.error is None, result.error
    states = {check.id: (check.status, check.score) for check in result.grade.checks}
    assert states["tampered"] == ("scored", 1.0), result.grade.checks[1].explanation
    assert states["command"] == ("scored", 0.0), result.grade.checks[2].explanation
    assert result.grade.complete is True and result.grade.reward == 0
