"""Checks that run in the sandbox: command (python and tests checks are `pyrunner` and `testsuite`)."""

from __future__ import annotations

from ..models import (
    CommandCheck,
)
from .context import (
    Failed,
    GradingContext,
    Outcome,
    _binary,
    process_failure,
)


def command(check: CommandCheck, ctx: GradingContext) -> Outcome:
    result = ctx.run(check.run, timeout_s=check.timeout_s)
    broken = process_failure(result, check.timeout_s, what="the command")
    if broken:
        raise Failed(broken)
    if result.stdout_truncated or result.stderr_truncated:
        raise Failed("the command flooded its output past the sandbox's output cap")
    met = result.exit_code == check.expect_exit
    tail = (result.stderr or result.stdout).strip()[-300:]
    detail = f"; output ends: {tail}" if tail and not met else ""
    return _binary(met, f"exit code {result.exit_code}, expected {check.expect_exit}{detail}")
