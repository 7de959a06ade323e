"""The result of one exec. The dataclass belongs to grading.engine (the check
sandbox protocol); it is re-exported here so callers need one import."""

from __future__ import annotations

from dataclasses import asdict

from grading.engine.sandbox import CheckSandbox, ExecResult


def exec_result_dict(result: ExecResult) -> dict:
    """JSON form used by the CLI: the dataclass plus an overall `truncated`."""
    data = asdict(result)
    data.pop("stdout_odd")  # the engine's, not the CLI contract's (RUBRIC.md)
    data["truncated"] = bool(result.stdout_truncated or result.stderr_truncated)
    return data


__all__ = ["CheckSandbox", "ExecResult", "exec_result_dict"]
