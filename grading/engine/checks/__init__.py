"""Evaluation of single checks: what each kind reads and when it is met.

Every evaluator returns an `Outcome` (a score in [0, 1] and an explanation) or
raises one of three reasons not to:

* `Missing`: what the check reads does not exist (a file the agent did not write):
  the check scores 0 (a penalty is not charged: the bad thing is not there).
* `Failed`: the graded work broke the check: a command or python check that timed
  out, was killed, flooded its output or raised; a file that is too large, not a
  regular file, reached through a link, left out of the snapshot, unparsable or
  nested too deep. The check fails closed: goodness 0 (a penalty is charged).
* `Unscored`: only the grader's own failure, which the graded work cannot cause (no
  sandbox or workspace given, the sandbox backend failing, no judge).

`evaluate()` turns `Missing` and `Failed` into outcomes; `Unscored` goes up to the
scorer (RUBRIC.md, "Scoring").

The evaluators live by family: `context` (what they share), `text_kinds`, `file_kinds` and
`sandbox_kinds`; this module dispatches (`evaluate`) and re-exports their names, so
`from grading.engine.checks import X` keeps working.
"""

from __future__ import annotations

from typing import Any

from ..models import check_model, flat_checks
from .context import (
    MAX_FILE_BYTES,
    STDOUT_TIMEOUT_S,
    Failed,
    GradingContext,
    Missing,
    Outcome,
    Unscored,
    _binary,
    failed_outcome,
    process_failure,
    sandbox_refused,
)
from .file_kinds import file_content, file_exists, read_table, table_cell
from .sandbox_kinds import command
from .text_kinds import (
    MAX_JSON_CHARS,
    MAX_JSON_DEPTH,
    find_number,
    json_bounded,
    json_equal,
    json_field,
    match_lowers_reward,
    number,
    parse_json,
    regex,
    resolve_pointer,
    string_match,
    text_similarity,
)

__all__ = [
    "Failed",
    "GradingContext",
    "MAX_FILE_BYTES",
    "MAX_JSON_CHARS",
    "MAX_JSON_DEPTH",
    "Missing",
    "Outcome",
    "STDOUT_TIMEOUT_S",
    "Unscored",
    "command",
    "episode_checks",
    "evaluate",
    "failed_outcome",
    "file_content",
    "file_exists",
    "find_number",
    "json_bounded",
    "json_equal",
    "json_field",
    "match_lowers_reward",
    "number",
    "parse_json",
    "process_failure",
    "read_table",
    "regex",
    "resolve_pointer",
    "sandbox_refused",
    "string_match",
    "table_cell",
    "text_similarity",
]


def evaluate(check, ctx: GradingContext) -> Outcome:
    """Run one non-group, non-judge check. Raises only `Unscored` (the grader's own failure): what the
    graded work broke (`Failed`) or left out (`Missing`) is an outcome, and so is any other error
    while the check reads agent input (it fails the check, with the error as its reason)."""
    if check.kind == "python":
        from ..pyrunner import python_check

        handler = python_check
    elif check.kind == "tests":
        from ..testsuite import tests_check

        handler = tests_check
    else:
        handler = _HANDLERS.get(check.kind)
        if handler is None:
            raise Unscored(f"kind {check.kind!r} is not evaluated here")
    try:
        return handler(check, ctx)
    except Missing as exc:
        return _binary(False, str(exc))
    except Failed as exc:
        return failed_outcome(check, str(exc))
    except Unscored:
        raise
    except RecursionError:
        return failed_outcome(check, "error while checking: the input is nested too deeply to read")
    except Exception as exc:  # noqa: BLE001 - agent input that breaks a reader fails the check, closed
        return failed_outcome(check, f"error while checking: {type(exc).__name__}: {exc}"[:500])


_HANDLERS = {
    "string_match": string_match,
    "regex": regex,
    "number": number,
    "json_field": json_field,
    "file_exists": file_exists,
    "file_content": file_content,
    "table_cell": table_cell,
    "text_similarity": text_similarity,
    "command": command,
}


def episode_checks(rubric: Any) -> list[str]:
    """Ids of a rubric document's checks, at any depth, that need the episode rather than the response text:
    the agent's workspace files, its sandbox (commands, python checks) or its trajectory (a kind that
    `reads_episode`, or a target other than the answer). Graded from a response alone (a trainer's reward
    function, `grade` without a workspace or sandbox), they are unscored. Groups are not listed themselves,
    only their children that need the episode."""
    return [
        str(check.get("id"))
        for check, _, _, _ in flat_checks(rubric.get("checks") if isinstance(rubric, dict) else None)
        if check.get("kind") != "group"
        and (getattr(check_model(check), "reads_episode", False) or (check.get("target") or "answer") != "answer")
    ]
