"""The agent loop: ask the policy, run its tool calls in the sandbox, feed the
results back, until it submits, gives a final answer (a turn without tool
calls), runs out of steps or time, fills /workspace or /tmp up to its cap
(`workspace_full`: the rest is graded), is cancelled, or the model API fails.

Everything is recorded in the trajectory, a list of JSON-able step dicts:

    {"role": "system" | "user", "content": str}
    {"role": "assistant", "step": n, "content": str | None,
     "tool_calls": [{"id", "name", "arguments"}], "usage": {...} | None, "duration_ms"}
    {"role": "tool", "step": n, "tool_call_id", "name", "arguments", "content",
     "is_error", "duration_ms", "exec": {exit_code, timed_out, ...} | None}

`arguments` is kept as the raw string the model sent (it may not be JSON).
A step is one assistant turn; `max_steps` bounds the turns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from grading.engine.text import storable_text

from .policies import Policy, PolicyError
from .spec import SandboxSpec
from .tools import ToolRunner

SYSTEM_PROMPT = (
    "You are an agent working in a Linux sandbox. Your working directory is /workspace, "
    "which holds the task's files; /env holds read-only environment files; there is "
    "{network}. Use the tools to inspect and change files and to run commands. When you "
    "are done, call `submit` with your final answer."
)


@dataclass
class Episode:
    trajectory: list[dict] = field(default_factory=list)
    answer: str = ""
    stop_reason: str = ""  # submitted | final_answer | max_steps | timeout | workspace_full | cancelled | error
    error: str | None = None
    error_retryable: bool = False
    steps: int = 0
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    duration_ms: int = 0


def run_episode(
    sandbox,
    *,
    prompt: str,
    spec: SandboxSpec,
    policy: Policy,
    system_prompt: str | None = None,
    deadline: float | None = None,
    on_event: Callable[[dict], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> Episode:
    """Run one episode in a started sandbox. `deadline` is a time.monotonic()
    value (default: now + spec.timeout_s). Never raises for the policy's or the
    tools' failures: they end up in the episode (`error`, `stop_reason`)."""
    started = time.monotonic()
    deadline = deadline if deadline is not None else started + spec.timeout_s
    runner = ToolRunner(sandbox, spec)
    tools = runner.definitions()
    system = system_prompt or SYSTEM_PROMPT.format(
        network="network access" if spec.network_allowed else "no network access"
    )
    messages: list[dict] = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    episode = Episode(trajectory=[dict(m) for m in messages])
    emit = on_event or (lambda event: None)

    def finish(reason: str) -> Episode:
        episode.stop_reason = reason
        episode.duration_ms = int((time.monotonic() - started) * 1000)
        return episode

    for step in range(1, spec.max_steps + 1):
        if should_cancel is not None and should_cancel():
            return finish("cancelled")
        time_left = deadline - time.monotonic()
        if time_left <= 0:
            return finish("timeout")
        turn_started = time.monotonic()
        try:
            turn = policy.next_turn(messages, tools, timeout_s=time_left)
        except PolicyError as exc:
            episode.error, episode.error_retryable = exc.message, exc.retryable
            return finish("error")
        episode.steps = step
        message = turn.message
        calls = message.get("tool_calls") or []
        episode.trajectory.append(
            {
                "role": "assistant",
                "step": step,
                "content": message.get("content"),
                "tool_calls": [
                    {
                        "id": c.get("id"),
                        "name": c.get("function", {}).get("name"),
                        "arguments": c.get("function", {}).get("arguments"),
                    }
                    for c in calls
                ],
                "usage": turn.usage,
                "duration_ms": int((time.monotonic() - turn_started) * 1000),
            }
        )
        if turn.usage:
            for key in episode.usage:
                episode.usage[key] += int(turn.usage.get(key) or 0)
        messages.append(_api_message(message))
        if not calls:
            episode.answer = storable_text(message.get("content") or "")
            emit({"type": "step", "step": step, "tool_calls": 0, "tools": []})
            return finish("final_answer")
        submitted = False
        for call in calls:
            function = call.get("function") or {}
            name, arguments = function.get("name") or "", function.get("arguments")
            if submitted:
                outcome_text, outcome = "error: ignored: the episode already ended with submit", None
            else:
                outcome = runner.run(name, arguments, time_left_s=max(0.1, deadline - time.monotonic()))
                outcome_text = outcome.content
            episode.trajectory.append(
                {
                    "role": "tool",
                    "step": step,
                    "tool_call_id": call.get("id"),
                    "name": name,
                    "arguments": arguments,
                    "content": outcome_text,
                    "is_error": outcome.is_error if outcome else True,
                    "duration_ms": outcome.duration_ms if outcome else 0,
                    "exec": outcome.exec if outcome else None,
                }
            )
            messages.append({"role": "tool", "tool_call_id": call.get("id") or "", "content": outcome_text})
            if outcome is not None and outcome.submitted:
                submitted = True
                episode.answer = outcome.answer or ""
        emit(
            {
                "type": "step",
                "step": step,
                "tool_calls": len(calls),
                "tools": [(c.get("function") or {}).get("name") for c in calls],
            }
        )
        if submitted:
            return finish("submitted")
        if getattr(sandbox, "limit_hit", None):
            # A hard cap stopped the writes; what was written so far is graded.
            episode.trajectory.append(
                {"role": "system", "step": step, "content": f"[gymwright] the episode was stopped: {sandbox.limit_hit}"}
            )
            return finish("workspace_full")
    return finish("max_steps")


def _api_message(message: dict) -> dict:
    out = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out


def trajectory_text(trajectory: list[dict]) -> str:
    """The transcript as plain text (what `target: "trajectory"` checks and judges read)."""
    lines: list[str] = []
    for item in trajectory:
        role = item.get("role")
        if role in ("system", "user"):
            lines.append(f"[{role}]\n{item.get('content') or ''}")
        elif role == "assistant":
            text = f"[assistant]\n{item.get('content') or ''}".rstrip()
            for call in item.get("tool_calls") or []:
                text += f"\n-> {call.get('name')}({call.get('arguments')})"
            lines.append(text)
        elif role == "tool":
            lines.append(f"[tool {item.get('name')}]\n{item.get('content') or ''}")
    return "\n\n".join(lines)
