"""The agent's tools: definitions (OpenAI function calling, MCP) and their execution in a sandbox.

Built-in tools: `bash`, `read_file`, `write_file`, `list_files`, `submit`.
An environment enables a subset (its `tools` list; `submit` is always on) and
may add custom tools: a command run in the sandbox with the call's JSON
arguments on stdin, whose stdout is the result.

A bad call (arguments that are not JSON, a missing argument, an unknown tool)
is never an exception: it becomes an error result fed back to the model, so
the model can correct itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from grading.engine.text import SURROGATE, storable_text

from .results import ExecResult
from .spec import SandboxError, SandboxSpec

BUILTIN_TOOLS: dict[str, dict] = {
    "bash": {
        "description": "Run a shell command (/bin/sh -c) in the sandbox, in /workspace. "
        "Returns the exit code, stdout and stderr (each truncated past a limit). "
        "Processes do not outlive the command.",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The shell command line."},
                "timeout_s": {"type": "number", "description": "Seconds before the command is killed."},
            },
            "required": ["command"],
        },
    },
    "read_file": {
        "description": "Read a text file from the sandbox (a path relative to /workspace, or absolute "
        "under /workspace, /tmp or /env).",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    "write_file": {
        "description": "Write a text file in the sandbox (relative to /workspace, or under /tmp), "
        "creating directories; replaces an existing file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
    "list_files": {
        "description": "List the files in /workspace (paths relative to it).",
        "parameters": {"type": "object", "properties": {}},
    },
    "submit": {
        "description": "Submit your final answer and end the episode. Call it exactly once, when done.",
        "parameters": {
            "type": "object",
            "properties": {"answer": {"type": "string", "description": "The final answer."}},
            "required": ["answer"],
        },
    },
}


@dataclass
class ToolSpec:
    name: str
    description: str
    parameters: dict
    command: str | None = None  # set for custom tools


def enabled_tools(spec: SandboxSpec) -> list[ToolSpec]:
    """The tools of an environment, built-ins first, in a stable order."""
    names = [n for n in spec.tools if n in BUILTIN_TOOLS]
    if "submit" not in names:
        names.append("submit")
    tools = [ToolSpec(n, BUILTIN_TOOLS[n]["description"], BUILTIN_TOOLS[n]["parameters"]) for n in names]
    for custom in spec.custom_tools:
        if custom["name"] in BUILTIN_TOOLS:
            continue
        tools.append(
            ToolSpec(
                custom["name"],
                custom.get("description") or "",
                custom.get("parameters") or {"type": "object", "properties": {}},
                custom["command"],
            )
        )
    return tools


def openai_tool_definitions(tools: Iterable[ToolSpec]) -> list[dict]:
    """Tools in OpenAI chat-completions function-calling format."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def mcp_tool_definitions(tools: Iterable[ToolSpec] | SandboxSpec | None = None) -> list[dict]:
    """Tools as MCP tool definitions (`name`, `description`, `inputSchema`).

    Without an argument: the built-in tools."""
    if tools is None:
        tools = enabled_tools(SandboxSpec(tools=tuple(BUILTIN_TOOLS)))
    elif isinstance(tools, SandboxSpec):
        tools = enabled_tools(tools)
    return [{"name": t.name, "description": t.description, "inputSchema": t.parameters} for t in tools]


@dataclass
class ToolOutcome:
    """What one tool call produced: the text fed back to the model, and facts for the trajectory."""

    content: str
    is_error: bool = False
    submitted: bool = False
    answer: str | None = None
    duration_ms: int = 0
    exec: dict | None = field(default=None)


class ToolRunner:
    """Runs tool calls in one sandbox. `output_cap` bounds each tool message (characters)."""

    def __init__(
        self, sandbox, spec: SandboxSpec, *, tools: list[ToolSpec] | None = None, output_cap: int | None = None
    ):
        self.sandbox = sandbox
        self.spec = spec
        self.tools = {t.name: t for t in (tools if tools is not None else enabled_tools(spec))}
        self.output_cap = output_cap or spec.output_cap

    def definitions(self) -> list[dict]:
        return openai_tool_definitions(self.tools.values())

    def run(self, name: str, arguments: str | Mapping | None, *, time_left_s: float | None = None) -> ToolOutcome:
        started = time.monotonic()
        try:
            outcome = self._run(name, arguments, time_left_s)
        except SandboxError as exc:
            outcome = ToolOutcome(f"error: {exc.message}", is_error=True)
        except UnicodeError:  # a surrogate that reached an encoder another way: the same answer
            outcome = _surrogate_outcome(name)
        # What goes back to the model and into the trajectory: file names and output made storable text.
        outcome.content = storable_text(outcome.content)
        if outcome.answer is not None:
            outcome.answer = storable_text(outcome.answer)
        outcome.duration_ms = int((time.monotonic() - started) * 1000)
        return outcome

    def _run(self, name: str, arguments, time_left_s) -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None:
            return ToolOutcome(f"error: unknown tool {name!r}; available tools: {', '.join(self.tools)}", is_error=True)
        if isinstance(arguments, Mapping):
            args = dict(arguments)
        else:
            try:
                args = json.loads(arguments or "{}")
            except ValueError as exc:
                return ToolOutcome(
                    f"error: the arguments of {name} are not valid JSON ({exc}); send a JSON object", is_error=True
                )
            if not isinstance(args, dict):
                return ToolOutcome(f"error: the arguments of {name} must be a JSON object", is_error=True)
        if name != "submit" and SURROGATE.search(json.dumps(args, ensure_ascii=False, default=str)):
            # The arguments' JSON escaped a lone surrogate ("\\ud800"): not text a command, a path or a file can
            # hold (one backend's encoder would fail, another's replace it). The model is told, as for any bad call.
            # An answer is only text: it is kept with the surrogate escaped (run() below), as a final message is.
            return _surrogate_outcome(name)
        if tool.command is not None:
            return self._custom(tool, args, time_left_s)
        missing = [key for key in tool.parameters.get("required", []) if key not in args]
        if missing:
            return ToolOutcome(f"error: {name} needs {', '.join(missing)}", is_error=True)
        return getattr(self, f"_tool_{name}")(args, time_left_s)

    def _timeout(self, requested, time_left_s) -> float:
        timeout = self.spec.exec_timeout_s
        if isinstance(requested, (int, float)) and requested > 0:
            timeout = min(float(requested), self.spec.exec_timeout_s)
        if time_left_s is not None:
            timeout = max(0.1, min(timeout, time_left_s))
        return timeout

    def _tool_bash(self, args, time_left_s) -> ToolOutcome:
        command = args["command"]
        if not isinstance(command, str) or not command.strip():
            return ToolOutcome("error: command must be a non-empty string", is_error=True)
        if "\x00" in command:
            return ToolOutcome(
                "error: the command holds a NUL character (\\u0000), which no command line can hold", is_error=True
            )
        result = self.sandbox.exec(command, timeout_s=self._timeout(args.get("timeout_s"), time_left_s))
        return ToolOutcome(self._format_exec(result), is_error=result.exit_code != 0, exec=_exec_facts(result))

    def _tool_read_file(self, args, time_left_s) -> ToolOutcome:
        try:
            data = self.sandbox.read_file(str(args["path"]))
        except FileNotFoundError:
            return ToolOutcome(f"error: no such file: {args['path']}", is_error=True)
        text = data.decode("utf-8", errors="replace")
        return ToolOutcome(self._cap(text, len(text)))

    def _tool_write_file(self, args, time_left_s) -> ToolOutcome:
        content = args["content"]
        if not isinstance(content, str):
            content = json.dumps(content)
        data = content.encode("utf-8")
        self.sandbox.write_file(str(args["path"]), data)
        return ToolOutcome(f"wrote {len(data)} bytes to {args['path']}")

    def _tool_list_files(self, args, time_left_s) -> ToolOutcome:
        files = self.sandbox.list_files()
        text = "\n".join(files) if files else "(no files)"
        return ToolOutcome(self._cap(text, len(text)))

    def _tool_submit(self, args, time_left_s) -> ToolOutcome:
        answer = args["answer"]
        if not isinstance(answer, str):
            answer = json.dumps(answer)
        return ToolOutcome("submitted", submitted=True, answer=answer)

    def _custom(self, tool: ToolSpec, args: dict, time_left_s) -> ToolOutcome:
        result = self.sandbox.exec(
            tool.command, timeout_s=self._timeout(None, time_left_s), stdin=json.dumps(args).encode()
        )
        if result.exit_code == 0:
            text = result.stdout
            if result.stdout_truncated:
                text += "\n[output truncated]"
            return ToolOutcome(self._cap(text, len(text)), exec=_exec_facts(result))
        return ToolOutcome(self._format_exec(result), is_error=True, exec=_exec_facts(result))

    def _format_exec(self, result: ExecResult) -> str:
        if result.timed_out:
            head = "timed out (killed)"
        elif result.oom_killed:
            head = f"exit code: {result.exit_code} (killed: out of memory)"
        else:
            head = f"exit code: {result.exit_code}"
        parts = [head]
        for label, text, truncated in (
            ("stdout", result.stdout, result.stdout_truncated),
            ("stderr", result.stderr, result.stderr_truncated),
        ):
            if text or truncated:
                parts.append(f"[{label}]\n{text}" + ("\n[truncated]" if truncated else ""))
        return self._cap("\n".join(parts), None)

    def _cap(self, text: str, total: int | None) -> str:
        if len(text) <= self.output_cap:
            return text
        return text[: self.output_cap] + f"\n[truncated: {total or len(text)} characters in all]"


def _surrogate_outcome(name) -> ToolOutcome:
    return ToolOutcome(
        f"error: the arguments of {storable_text(str(name))} hold a lone surrogate (\\ud800-\\udfff), "
        "which is not Unicode text; send UTF-8 text",
        is_error=True,
    )


def _exec_facts(result: ExecResult) -> dict[str, Any]:
    return {
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "oom_killed": result.oom_killed,
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
        "duration_ms": result.duration_ms,
    }
