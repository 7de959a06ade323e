"""Reads for previews. Permission goes through the task: whoever may view a task may see its previews."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet
from django.http import Http404

from accounts import permissions
from authoring.models import Task, TaskVersion
from authoring.selectors import approved_versions, task_check_for_user, task_version_check_readable
from grading.engine import calibration, scoring
from grading.engine.text import storable_text
from gymwright.sql import Prepared
from sandbox.models import PreviewRun, Rollout

# Heavy JSON columns a list never needs (the grade's document among them: a list reads its totals).
ROLLOUT_HEAVY_FIELDS = ("trajectory", "workspace_files", "grade__document")


# The pages poll it every second while a run is live: the version's whole document is not read (it is loaded if
# something asks for it), and the task and its environment (the judge calibration's rule) come with the run, not
# from more queries. Compiled once per process.
_preview_run = Prepared(
    lambda preview_run_id: (
        PreviewRun.objects.select_related(
            "task_version", "task_version__task", "task_version__task__environment", "created_by"
        )
        .defer("task_version__spec")
        .filter(pk=preview_run_id)
    ),
    preview_run_id=int,
)


def preview_run_get_for_user(*, preview_run_id: int, user) -> PreviewRun:
    """The preview run, if `user` may view its task; Http404 otherwise."""
    found = _preview_run(preview_run_id=preview_run_id)
    if not found:
        raise Http404(f"No preview {preview_run_id}")
    preview_run = found[0]
    task_check_for_user(task=preview_run.task_version.task, user=user)
    task_version_check_readable(user=user, version=preview_run.task_version, what=f"preview {preview_run_id}")
    return preview_run


# The rollout page, and each rollout opened on a preview page: compiled once per process (gymwright.sql).
_rollout = Prepared(
    lambda rollout_id: Rollout.objects.select_related(
        "preview_run", "preview_run__task_version", "preview_run__task_version__task", "grade"
    ).filter(pk=rollout_id),
    rollout_id=int,
)


def rollout_get_for_user(*, rollout_id: int, user) -> Rollout:
    found = _rollout(rollout_id=rollout_id)
    if not found:
        raise Http404(f"No rollout {rollout_id}")
    rollout = found[0]
    task_check_for_user(task=rollout.preview_run.task_version.task, user=user)
    task_version_check_readable(user=user, version=rollout.preview_run.task_version, what=f"rollout {rollout_id}")
    return rollout


def rollout_list(*, preview_run: PreviewRun) -> QuerySet[Rollout]:
    return preview_run.rollouts.select_related("grade").defer(*ROLLOUT_HEAVY_FIELDS).order_by("index")


ROLLOUT_ROW_FIELDS = (
    "id",
    "index",
    "status",
    "attempts",
    "reward",
    "passed",
    "grade__complete",
    "steps",
    "duration_ms",
    "error",
    "progress",
    "enqueued_at",
)


_rollout_rows = Prepared(
    lambda preview_run_id: (
        Rollout.objects.filter(preview_run_id=preview_run_id).order_by("index").values_list(*ROLLOUT_ROW_FIELDS)
    ),
    preview_run_id=int,
)


def rollout_rows(*, preview_run: PreviewRun) -> list[dict]:
    """The preview page's table: one plain dict per rollout (ROLLOUT_ROW_FIELDS), in order. The page
    polls itself every second while a run is live, so no model objects are built for it, and the query is
    compiled once per process."""
    return [dict(zip(ROLLOUT_ROW_FIELDS, row)) for row in _rollout_rows(preview_run_id=preview_run.pk)]


RECENT_RUNS = 10


def _recent_runs_of(task_id, *, approved_only: bool) -> QuerySet[PreviewRun]:
    queryset = PreviewRun.objects.filter(task_version__task_id=task_id)
    if approved_only:  # a member who reads approved work only (lab)
        queryset = queryset.filter(task_version__in=approved_versions(TaskVersion.objects.filter(task_id=task_id)))
    return queryset.order_by("-created_at", "-id")[:RECENT_RUNS]


# On every task page, and polled while a run is live: compiled once per process (gymwright.sql), for a
# member who reads drafts (False) and one who reads approved work only (True).
_recent_runs = {
    approved_only: Prepared(
        lambda task_id, approved_only=approved_only: (
            _recent_runs_of(task_id, approved_only=approved_only)
            .select_related("task_version", "created_by")
            .defer("task_version__spec")
        ),
        task_id=int,
    )  # the list shows version numbers only
    for approved_only in (False, True)
}
_recent_run_counts = {
    approved_only: Prepared(
        lambda task_id, approved_only=approved_only: (
            Rollout.objects.filter(preview_run__in=_recent_runs_of(task_id, approved_only=approved_only).values("id"))
            .values_list("preview_run_id", "status")
            .annotate(count=Count("id"))
            .order_by()
        ),
        task_id=int,
    )
    for approved_only in (False, True)
}


def preview_run_list_for_task(*, task: Task, user) -> list[PreviewRun]:
    """The task's RECENT_RUNS latest preview runs of versions `user` may read, newest first, with live
    status counts (read beside the runs: a run started between the two reads shows its counts at the
    next poll)."""
    approved_only = not permissions.reads_drafts(user)
    runs = _recent_runs[approved_only](task_id=task.pk)
    counts: dict[int, dict[str, int]] = {}
    for run_id, status, count in _recent_run_counts[approved_only](task_id=task.pk):
        counts.setdefault(run_id, {})[status] = count
    for run in runs:
        run.status_counts = counts.get(run.pk, {})
        run.finished_count = sum(run.status_counts.get(s, 0) for s in Rollout.TERMINAL)
    return runs


def any_unfinished(preview_runs: list[PreviewRun]) -> bool:
    return any(not run.is_finished for run in preview_runs)


def preview_run_summary(*, policy_kind: str, rollouts: list[dict]) -> dict:
    """Counts, mean reward, pass rate (Wilson 95 %), pass@k and the policy's verdict."""
    counts = {status: 0 for status in Rollout.Status.values}
    for rollout in rollouts:
        counts[rollout["status"]] += 1
    graded = [r for r in rollouts if r["status"] == Rollout.Status.DONE and r["reward"] is not None]
    passed = sum(1 for r in graded if r["passed"])
    # The oldest scoring rule among its grades: a summary of rule-1 grades (unscored checks left out of
    # max) is not the rubric's, and pack calibration leaves it out.
    rules = [r.get("grade__scoring_rule") or scoring.SCORING_RULE for r in graded]
    summary: dict[str, Any] = {
        "counts": counts,
        "graded": len(graded),
        "passed": passed,
        "mean_reward": None,
        "pass_rate": None,
        "pass_rate_ci95": None,
        "pass_at_k": {},
        "verdict": None,
        "scoring_rule": min(rules, default=scoring.SCORING_RULE),
    }
    if graded:
        summary["mean_reward"] = sum(r["reward"] for r in graded) / len(graded)
        summary["pass_rate"] = passed / len(graded)
        summary["pass_rate_ci95"] = calibration.wilson_interval(passed, len(graded))
        summary["pass_at_k"] = calibration.pass_at_ks(len(graded), passed)
        summary["verdict"] = calibration.band_verdict(policy_kind, summary["pass_rate"]).to_dict()
        # A reward computed without some checks (no judge configured, the sandbox backend failed) is
        # only the lower bound of the rubric's: say so beside the verdict, never hide it.
        incomplete = sum(1 for r in graded if r.get("grade__complete") is False)
        summary["incomplete"] = incomplete
        if incomplete:
            # Not a miss to act on when the verdict held on what was scored: pages show it without alarm
            # (the gates say whether it decides anything).
            summary["verdict"]["band_ok"] = summary["verdict"]["ok"]
            summary["verdict"]["ok"] = False
            summary["verdict"]["message"] += (
                f"; but {incomplete} of {len(graded)} grades are incomplete "
                "(some checks unscored), so these rewards are lower bounds"
            )
    return summary


def preview_run_progress(*, preview_run: PreviewRun, rollouts: list[Rollout] | list[dict] | None = None) -> dict:
    """Live counts per status, finished fraction, mean reward and pass rate so far (the summary's maths);
    `rollouts`: the run's Rollouts or their `rollout_rows`."""
    if rollouts is None:
        rollouts = rollout_rows(preview_run=preview_run)
    so_far = preview_run_summary(
        policy_kind=preview_run.policy_kind,
        rollouts=[
            {
                "status": r["status"],
                "reward": r["reward"],
                "passed": r["passed"],
                "grade__complete": r.get("grade__complete"),
            }
            if isinstance(r, dict)
            else {
                "status": r.status,
                "reward": r.reward,
                "passed": r.passed,
                "grade__complete": r.grade.complete if r.grade_id and r.grade else None,
            }
            for r in rollouts
        ],
    )
    counts = so_far["counts"]
    total = len(rollouts)
    # queued rollouts whose job the broker did not take (down when they were sent): sent when it answers
    waiting = sum(
        1
        for r in rollouts
        if ((r["status"], r["enqueued_at"]) if isinstance(r, dict) else (r.status, r.enqueued_at))
        == (Rollout.Status.QUEUED, None)
    )
    finished = sum(counts[s] for s in Rollout.TERMINAL)
    return {
        "counts": counts,
        "total": total,
        "finished": finished,
        "percent": round(100 * finished / total) if total else 100,
        "percent_by_status": {s: (100 * counts[s] / total if total else 0) for s in counts},
        "graded": so_far["graded"],
        "passed": so_far["passed"],
        "incomplete": so_far.get("incomplete", 0),  # graded without some checks: their pass is not the rubric's
        "mean_reward": so_far["mean_reward"],
        "pass_rate": so_far["pass_rate"],
        "waiting_for_broker": waiting,
    }


def _pretty(value) -> str:
    import json

    if value is None:
        return ""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in "{[":
            try:
                # JSON text may escape a lone surrogate or a NUL: shown as its escape again, not decoded
                return storable_text(json.dumps(json.loads(stripped), indent=2, ensure_ascii=False))
            except ValueError:
                return value
        return value
    return storable_text(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def _tool_output(value) -> str:
    """A tool result: an exec result dict reads as its streams and exit code; anything else as JSON."""
    if isinstance(value, dict) and ("stdout" in value or "exit_code" in value):
        parts = []
        if value.get("stdout"):
            parts.append(str(value["stdout"]))
        if value.get("stderr"):
            parts.append("[stderr]\n" + str(value["stderr"]))
        flags = [f"exit {value.get('exit_code')}"] + [
            name for name in ("timed_out", "oom_killed", "truncated") if value.get(name)
        ]
        parts.append("[" + ", ".join(flags) + "]")
        return "\n".join(parts)
    return _pretty(value)


def trajectory_steps(trajectory: list) -> list[dict]:
    """The trajectory as the viewer shows it: one entry per message, tool results next to their calls.

    Reads the runtime's step dicts (docs: sandbox/runtime/harness.py): system/user
    messages, assistant turns with `tool_calls` [{id, name, arguments}], and tool
    results {tool_call_id, name, content, is_error, exec}. A tool result whose call
    is known is shown under that call; anything else is shown as its own entry.
    Whatever a step holds is kept in `raw`, so nothing is hidden.
    """
    steps: list[dict] = []
    calls_by_id: dict[str, dict] = {}
    for position, step in enumerate(trajectory or []):
        if not isinstance(step, dict):
            steps.append(
                {
                    "index": position,
                    "role": "other",
                    "title": "",
                    "text": _pretty(step),
                    "output": None,
                    "calls": [],
                    "error": "",
                    "duration_ms": None,
                    "raw": _pretty(step),
                }
            )
            continue
        role = str(step.get("role") or step.get("type") or "step")
        if role == "tool" and step.get("tool_call_id") in calls_by_id:
            call = calls_by_id[step["tool_call_id"]]
            call["output"] = _tool_output(step.get("content", step.get("output")))
            call["is_error"] = bool(step.get("is_error"))
            call["exec"] = step.get("exec")
            call["duration_ms"] = step.get("duration_ms")
            call["raw_result"] = _pretty(step)
            continue
        text = step.get("content")
        if isinstance(text, list):  # content parts
            text = "\n".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in text)
        calls = []
        for call in step.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            entry = {
                "id": call.get("id") or "",
                "name": call.get("name") or function.get("name") or "tool",
                "input": _pretty(call.get("arguments", call.get("input", function.get("arguments")))),
                "output": _tool_output(call["output"]) if "output" in call else None,
                "is_error": False,
                "exec": None,
                "duration_ms": None,
                "raw_result": "",
            }
            calls.append(entry)
            if entry["id"]:
                calls_by_id[entry["id"]] = entry
        output = None
        if role == "tool":
            output, text = _tool_output(step.get("content", step.get("output"))), None
        steps.append(
            {
                "index": step.get("step", ""),
                "role": role,
                "title": ", ".join(call["name"] for call in calls) or step.get("name") or "",
                "text": text if isinstance(text, str) else (_pretty(text) if text is not None else ""),
                "output": output,
                "calls": calls,
                "error": step.get("error") or ("tool error" if step.get("is_error") else ""),
                "duration_ms": step.get("duration_ms"),
                "usage": step.get("usage"),
                "raw": _pretty(step),
            }
        )
    return steps
