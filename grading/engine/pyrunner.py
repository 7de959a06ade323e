"""`python` checks: run the author's function INSIDE the sandbox and read back its result.

The runner is the interpreter's own `-c` program, started as `python3 -I`
(isolated: no PYTHON* variables, no user site-packages, no script directory or
working directory on `sys.path`) from `/`, so every module it and the check
import comes from the interpreter's read-only library directories; a module the
agent planted (`/tmp/json.py`, `sitecustomize.py`, `usercustomize.py`, a
`json.py` in the workspace) is never imported. Nothing is written to the
sandbox: the check's code, the environment's checks module and a JSON payload
arrive on stdin. The runner builds `ctx`, changes into the workspace, calls
`check(ctx)` or the named `module:function`, and prints one line
`<nonce> {"ok": ..., ...}` on its real stdout (the function's own prints go to
stderr). It reads and writes no bytecode (`sys.pycache_prefix` names a path that cannot
exist), so a `.pyc` planted in a workspace `__pycache__` never stands in for a module. The nonce is fresh per call and known only to the engine and the
runner, so output the checked code prints cannot pose as the result, and no
file the agent can write is read back. Python check code is never executed in
the engine's process.

A check that imports the agent's own code on purpose (`sys.path.insert(0,
ctx.workspace)`) trusts that code, as a `command` check running the agent's
tests does.
"""

from __future__ import annotations

import json
import math
import secrets

from .checks import Failed, GradingContext, Outcome, Unscored, process_failure
from .models import PythonCheck

RUNNER_SOURCE = r'''
import sys
# No bytecode is read or written: under this prefix nothing can exist (/dev/null is not a folder), so a .pyc the
# agent planted in a __pycache__ beside a module the check imports (its own code, a grader file) is never run.
sys.dont_write_bytecode = True
sys.pycache_prefix = "/dev/null/gymwright-no-bytecode"
import importlib, json, math, os, traceback, types

def _main():
    payload = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    nonce = payload.pop("nonce")
    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    workspace = payload["workspace"]

    class Context:
        """What a python check sees: answer, text, trajectory, workspace, args, read(path)."""
        def __init__(self):
            self.answer = payload["answer"]
            self.text = payload["text"]
            self.trajectory = payload["trajectory"]
            self.workspace = workspace
            self.args = payload["args"]
        def path(self, relative):
            return os.path.join(workspace, relative)
        def read(self, relative):
            with open(os.path.join(workspace, relative), encoding="utf-8", errors="replace") as handle:
                return handle.read()
        def read_bytes(self, relative):
            with open(os.path.join(workspace, relative), "rb") as handle:
                return handle.read()
        def exists(self, relative):
            return os.path.exists(os.path.join(workspace, relative))
        def __getitem__(self, key):
            return getattr(self, key)

    try:
        if payload.get("checks_module") is not None:
            module = types.ModuleType("checks")
            module.__file__ = "/env/checks.py"
            sys.modules["checks"] = module
            exec(compile(payload["checks_module"], "/env/checks.py", "exec"), module.__dict__)
        if payload.get("code") is not None:
            namespace = {"__name__": "gymwright_check"}
            exec(compile(payload["code"], "<check code>", "exec"), namespace)
            function = namespace["check"]
        else:
            module_name, _, name = payload["function"].partition(":")
            function = getattr(importlib.import_module(module_name), name)
        # Only now, with every import resolved: the working directory is never on sys.path (-I).
        try:
            os.chdir(workspace)
        except OSError:
            pass
        value = function(Context())
        if type(value).__module__ == "numpy" and hasattr(value, "item"):
            value = value.item()
        if isinstance(value, bool) or (isinstance(value, (int, float)) and math.isfinite(value)):
            result = {"ok": True, "value": value}
        else:
            result = {"ok": True, "value": None, "bad": type(value).__name__ + " " + repr(value)[:200]}
    except BaseException as exc:
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        result = {"ok": False, "error": (type(exc).__name__ + ": " + str(exc))[:500], "traceback": "".join(lines)[-2000:]}
    real_stdout.write("\n" + nonce + " " + json.dumps(result) + "\n")
    real_stdout.flush()

_main()
'''

# Started from / (not the agent's workspace), isolated (-I), the program in argv: no file is read
# from anywhere the agent can write. PATH is the sandbox's own (read-only directories only).
_PYTHON = (
    'cd / || exit 126; if command -v python3 >/dev/null 2>&1; then exec python3 -I -c "$0"; '
    'else exec python -I -c "$0"; fi'
)


def parse_result(stdout: str, nonce: str) -> dict | None:
    """The runner's result object, from the last line starting with the nonce; None if absent or malformed."""
    prefix = nonce + " "
    for line in reversed(stdout.splitlines()):
        if line.startswith(prefix):
            try:
                result = json.loads(line[len(prefix) :])
            except ValueError:
                return None
            return result if isinstance(result, dict) and isinstance(result.get("ok"), bool) else None
    return None


def python_check(check: PythonCheck, ctx: GradingContext) -> Outcome:
    """Run a python check in the sandbox. `Failed` when the run does not give a clean result (a timeout,
    a kill, no result line, an exception, a value that is not a score): the checked code is the agent's
    or reads the agent's work, so each of those fails the check. `Unscored` only for the grader's own
    failure: no sandbox, the sandbox backend failing, no checks module in the environment."""
    # The text first: a `stdout:` target runs a command (maybe the agent's code), and the task's files are put
    # back after it, when the sandbox is taken for this check's own run.
    text = ctx.target_text(check.target)
    odd = ctx.odd_text(check.target)
    if odd is not None:
        # The check's code reads `text` as it likes ("kill" not in text): read with replacement characters or spaced
        # by NULs, a file or output could hide what it looks for. Such a text fails the check (a penalty is charged);
        # a check that wants bytes reads the file from the workspace itself.
        what = check.target[5:] if check.target.startswith("file:") else f"the output of {check.target[7:]}"
        raise Failed(f"{what!r} {odd}: a python check reads text, so it counts against the answer")
    sandbox = ctx.require_sandbox()
    payload = {
        "answer": ctx.answer,
        "text": text,
        "trajectory": ctx.trajectory,
        "workspace": sandbox.workspace_path,
        "args": check.args,
        "nonce": "GYMWRIGHT-RESULT-" + secrets.token_hex(12),
    }
    if check.code is not None:
        payload["code"] = check.code
    else:
        payload["function"] = check.function
        if check.function.split(":", 1)[0] == "checks":
            if ctx.checks_module is None:
                raise Unscored(f"calls {check.function!r}, but the environment has no checks module")
            payload["checks_module"] = ctx.checks_module
    try:
        result = sandbox.exec(
            ["/bin/sh", "-c", _PYTHON, RUNNER_SOURCE],
            timeout_s=check.timeout_s,
            stdin=json.dumps(payload).encode("utf-8"),
        )
    except Exception as exc:  # noqa: BLE001
        raise Unscored(f"the sandbox could not run the check: {exc}") from None
    broken = process_failure(result, check.timeout_s, what="the check")
    if broken:
        raise Failed(broken)
    parsed = parse_result(result.stdout, payload["nonce"])
    if parsed is None:
        tail = result.stderr.strip()[-300:]
        flood = "; its output went past the sandbox's output cap" if result.stdout_truncated else ""
        raise Failed(
            f"the check printed no result (exit code {result.exit_code}){flood}" + (f": {tail}" if tail else "")
        )
    if not parsed["ok"]:
        raise Failed(f"the check raised {parsed.get('error', 'an error')}")
    value = parsed.get("value")
    if isinstance(value, bool):
        return Outcome(1.0 if value else 0.0, f"check returned {'true' if value else 'false'}")
    if isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= 1:
        return Outcome(float(value), f"check returned {value:g}")
    shown = parsed.get("bad") or json.dumps(value)
    raise Failed(f"the check returned {shown}; expected true/false or a number in [0, 1]")
