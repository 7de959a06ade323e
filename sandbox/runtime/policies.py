"""Policies: who plays the agent in a rollout.

A policy is asked for the next assistant turn given the conversation so far
and the tool definitions. Policies hold no per-episode state (they read the
conversation), so one policy object can drive many rollouts at once.

- `oracle`: runs the task's `solution.script` with the bash tool, then
  submits `solution.answer` (or, when the solution has no answer, the
  script's stdout, stripped);
- `nop`: submits an empty answer at once;
- `probe:TEXT`: submits TEXT at once;
- `model`: an OpenAI-compatible chat-completions endpoint with tools;
- `hack:NAME`: a scripted reward-hacking attempt (see `hacks`).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from .scripts import script_command


class PolicyError(Exception):
    """The policy could not produce a turn (the model API failed). Ends the rollout."""

    def __init__(self, message: str, retryable: bool = False):
        super().__init__(message)
        self.message = message
        self.retryable = retryable


@dataclass
class Turn:
    """One assistant turn: an OpenAI-format assistant message and, for models, token usage."""

    message: dict
    usage: dict | None = None
    model: str | None = None


class Policy(Protocol):
    name: str

    def next_turn(self, messages: list[dict], tools: list[dict], *, timeout_s: float | None = None) -> Turn: ...


def _call(name: str, arguments: dict) -> dict:
    return {
        "id": f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _assistant(*calls: dict, content: str | None = None) -> dict:
    message: dict = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


class SubmitPolicy:
    """Submits a fixed answer on its first turn (`nop` and `probe:TEXT`)."""

    def __init__(self, answer: str, name: str):
        self.answer = answer
        self.name = name

    def next_turn(self, messages, tools, *, timeout_s=None) -> Turn:
        return Turn(_assistant(_call("submit", {"answer": self.answer})))


class OraclePolicy:
    """Runs the reference solution's script as written (its #! line, else bash: `scripts`), with the
    task's solution environment (a Harbor task's [solution.env]), then submits its answer."""

    name = "oracle"

    def __init__(self, script: str | None, answer: str | None, env: dict[str, str] | None = None):
        self.script = script
        self.answer = answer
        self.env = env or {}

    def next_turn(self, messages, tools, *, timeout_s=None) -> Turn:
        turns = sum(1 for m in messages if m.get("role") == "assistant")
        if turns == 0 and self.script:
            command = script_command(self.script, name="solution", env=self.env)
            return Turn(_assistant(_call("bash", {"command": command})))
        answer = self.answer
        if answer is None:
            answer = _stdout_of_last_tool(messages) if self.script else ""
        return Turn(_assistant(_call("submit", {"answer": answer})))


def _stdout_of_last_tool(messages: list[dict]) -> str:
    for message in reversed(messages):
        if message.get("role") == "tool":
            text = message.get("content") or ""
            _, found, rest = text.partition("[stdout]\n")
            if not found:
                return ""
            return rest.split("\n[stderr]\n")[0].removesuffix("\n[truncated]").strip()
    return ""


@dataclass
class ModelConfig:
    """An OpenAI-compatible endpoint. `from_env` fills gaps from OPENAI_BASE_URL,
    OPENAI_API_KEY and GYMWRIGHT_POLICY_MODEL."""

    base_url: str | None = None
    model: str | None = None
    api_key: str = ""
    temperature: float | None = None
    max_tokens: int | None = None
    timeout_s: float = 120.0
    max_retries: int = 2
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_env(
        cls, *, base_url: str | None = None, model: str | None = None, api_key: str | None = None, **kwargs
    ) -> ModelConfig:
        return cls(
            base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
            model=model or os.environ.get("GYMWRIGHT_POLICY_MODEL") or None,
            api_key=api_key or os.environ.get("OPENAI_API_KEY", ""),
            **kwargs,
        )


class ModelPolicy:
    name = "model"

    def __init__(self, config: ModelConfig, client=None):
        if not config.model:
            raise ValueError("the model policy needs a model name (--model or GYMWRIGHT_POLICY_MODEL)")
        self.config = config
        if client is None:
            import openai

            client = openai.OpenAI(
                base_url=config.base_url,
                api_key=config.api_key or "unused",
                timeout=config.timeout_s,
                max_retries=config.max_retries,
            )
        self.client = client

    def next_turn(self, messages, tools, *, timeout_s=None) -> Turn:
        import openai

        params: dict[str, Any] = {"model": self.config.model, "messages": messages}
        if tools:
            params["tools"] = tools
        if self.config.temperature is not None:
            params["temperature"] = self.config.temperature
        if self.config.max_tokens is not None:
            params["max_tokens"] = self.config.max_tokens
        params.update(self.config.extra)
        if timeout_s is not None:
            params["timeout"] = max(1.0, min(timeout_s, self.config.timeout_s))
        try:
            response = self.client.chat.completions.create(**params)
        except openai.APIStatusError as exc:
            raise PolicyError(
                f"model API error: HTTP {exc.status_code}: {_api_message(exc)}",
                retryable=exc.status_code in (408, 409, 429) or exc.status_code >= 500,
            ) from exc
        except openai.APITimeoutError as exc:
            raise PolicyError("model API error: the request timed out", retryable=True) from exc
        except openai.APIConnectionError as exc:
            raise PolicyError(f"model API error: cannot connect: {exc}", retryable=True) from exc
        except openai.OpenAIError as exc:
            raise PolicyError(f"model API error: {exc}") from exc
        if not response.choices:
            raise PolicyError("model API error: the response has no choices", retryable=True)
        message = response.choices[0].message
        # The model's text goes back to the API, into the trajectory and to the database: a lone surrogate or a
        # NUL in it (JSON may carry either) is escaped here, or the next request would fail to encode.
        out: dict = {"role": "assistant", "content": _storable(message.content)}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": _storable(call.id),
                    "type": "function",
                    "function": {
                        "name": _storable(call.function.name),
                        "arguments": _storable(call.function.arguments),
                    },
                }
                for call in message.tool_calls
            ]
        usage = None
        if response.usage is not None:
            usage = {
                "prompt_tokens": response.usage.prompt_tokens,
                "completion_tokens": response.usage.completion_tokens,
                "total_tokens": response.usage.total_tokens,
            }
        return Turn(out, usage, getattr(response, "model", None))


def _storable(text):
    from grading.engine.text import storable_text

    return storable_text(text) if isinstance(text, str) else text


def _api_message(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
    return str(exc)[:500]


def solution_env(metadata) -> dict[str, str]:
    """The environment a Harbor task's reference solution runs with ([solution.env] of its task.toml, kept
    in the task's metadata by the import): literal values only; a `${VAR}` template names a variable of the
    host Harbor runs on, which a sandbox never reads."""
    harbor = metadata.get("harbor") if isinstance(metadata, dict) else None
    config = harbor.get("config") if isinstance(harbor, dict) else None
    section = config.get("solution") if isinstance(config, dict) else None
    env = section.get("env") if isinstance(section, dict) else None
    if not isinstance(env, dict):
        return {}
    return {str(k): str(v) for k, v in env.items() if isinstance(v, (str, int, float)) and "${" not in str(v)}


def make_policy(name: str, *, task=None, model_config: ModelConfig | None = None, client=None) -> Policy:
    """`oracle` | `nop` | `probe:TEXT` | `model` | `hack:NAME` (docs/internals.md)."""
    if name.startswith("hack:"):
        from .hack_probes import HackPolicy

        document = task
        if task is not None and not isinstance(task, dict):
            document = task.model_dump(mode="json", by_alias=True, exclude_none=True)
        return HackPolicy(name[len("hack:") :], task=document)
    if name == "nop":
        return SubmitPolicy("", "nop")
    if name.startswith("probe:"):
        return SubmitPolicy(name[len("probe:") :], "probe")
    if name == "oracle":
        solution = getattr(task, "solution", None) if task is not None else None
        if isinstance(task, dict):
            solution = task.get("solution")
        if isinstance(solution, dict):
            script, answer = solution.get("script"), solution.get("answer")
        elif solution is not None:
            script, answer = solution.script, solution.answer
        else:
            script = answer = None
        if not (script or answer):  # as a preview refuses it (sandbox.services.previews)
            raise ValueError(
                "this task has no reference solution (script or answer), so the oracle policy has nothing "
                "to run; add one, or run another policy"
            )
        metadata = task.get("metadata") if isinstance(task, dict) else getattr(task, "metadata", None)
        return OraclePolicy(script, answer, env=solution_env(metadata))
    if name == "model":
        return ModelPolicy(model_config or ModelConfig.from_env(), client=client)
    raise ValueError(f"unknown policy {name!r} (expected oracle, nop, probe:TEXT, model or hack:NAME)")
