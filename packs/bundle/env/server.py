"""`python -m env serve`: the pack's agentic tasks as an OpenEnv server (openenv-core's `HTTPEnvServer`).

OpenEnv's endpoints, as its own client (`openenv.GenericEnvClient`, `EnvClient`) speaks them:

- `WebSocket /ws` — a session: its own `TaskEnvironment`, so its own sandbox, for as long as the connection
  lasts. `reset` with `{"task_id": ...}` (or a `seed`, which draws one) starts a fresh sandbox and answers the
  task's prompt as the first observation (with the task's tools as OpenAI function definitions); `step` with
  `{"tool": "bash", "arguments": {"command": "ls"}}` runs one tool call there and answers its text; once the
  episode ends (`submit`, the task's `max_steps` or `timeout_s`, a full workspace) the episode is graded in its
  sandbox by the pack's grader and the observation is `done` with the grade's `reward` and the grade itself.
  `state` answers the episode's facts. At most `max_concurrent_envs` sessions live at once (one more is
  refused with OpenEnv's `CAPACITY_REACHED`); a session idle for `session_timeout` seconds is closed and its
  sandbox stopped; a closed connection stops its sandbox at once.
- `POST /reset`, `POST /step`, `GET /state` — OpenEnv's stateless HTTP calls (each on a new environment that
  is closed when it answers): `/reset` answers a task's first observation without starting a sandbox, `/step`
  explains that an episode is played over `/ws`.
- `GET /health`, `GET /schema` (action, observation and state JSON Schemas), `GET /metadata`, and
  `GET /capacity` (active and maximum sessions, for a load balancer's checks).

A network faces this server, so nothing from a request reaches the host outside a sandbox: a request body or
WebSocket message past `max_message_bytes` is refused (413, or WebSocket close 1009), connections are capped,
a task id must be one of the pack's, and the MCP routes openenv-core adds (`/mcp`, and `mcp` messages on
`/ws`, whose `openenv/session/close` can name another client's session) are not served: tools are step actions.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, ConcurrencyConfig, EnvironmentMetadata, Observation, State
from pydantic import Field

from .environment import BACKENDS, PACK_DIR, TaskEnvironment, _pack_tasks
from .runtime.backends import get_backend

MIB = 1024 * 1024


@dataclass(frozen=True)
class ServeConfig:
    """How a server runs; each bound has a safe default and says, when hit, which it was."""

    pack_dir: Path = PACK_DIR
    backend: str = "bubblewrap"
    image: str | None = None  # docker: one image for every task instead of each task's
    max_concurrent_envs: int = 8
    session_timeout_s: float = 900.0  # idle seconds before a session is closed; above any one tool call's time
    max_message_bytes: int = 4 * MIB  # a request body or WebSocket message
    max_connections: int | None = None  # default: 2 × max_concurrent_envs + 16

    @property
    def connection_limit(self) -> int:
        return self.max_connections or 2 * self.max_concurrent_envs + 16


class ToolCall(Action):
    """One tool call of the agent: a tool of the task (built-in or custom) and its arguments."""

    tool: str = Field(
        ..., min_length=1, max_length=64, description="bash, read_file, write_file, list_files, submit or a custom tool"
    )
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments (its JSON Schema)")


class TaskObservation(Observation):
    """What the agent sees: the prompt after reset, a tool's text after a step; the grade once `done`."""

    task_id: str | None = None
    content: str = Field("", description="the task's prompt after reset; the tool's output after a step")
    system_prompt: str | None = Field(None, description="after reset: the system message Gymwright's harness uses")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="after reset: OpenAI function definitions")
    stop_reason: str | None = Field(None, description="why the episode ended: submitted, max_steps, timeout, ...")
    grade: dict[str, Any] | None = Field(None, description="once done: the gymwright.grade/v1 document")


class TaskState(State):
    task_id: str | None = None
    stop_reason: str | None = None
    done: bool = False
    reward: float | None = None


class RequestError(ValueError):
    """A request the server refuses, with the reason (HTTP 400; over /ws, OpenEnv's error message)."""


class EpisodeEnvironment(Environment[ToolCall, TaskObservation, TaskState]):
    """One OpenEnv session over one `TaskEnvironment`. A WebSocket session (`session=True`, set by the server)
    starts a sandbox at each reset; OpenEnv's stateless HTTP calls (`session=False`) never start one."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, config: ServeConfig, backend):
        super().__init__()
        self.config = config
        self.session = False
        self._backend = backend
        self._env: TaskEnvironment | None = None
        self._closed = False
        self._episode_id: str | None = None
        self._grade: dict | None = None

    # -- OpenEnv's interface -----------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None
    ) -> TaskObservation:
        if task_id is not None and (not isinstance(task_id, str) or task_id not in self._tasks()):
            raise RequestError(self._unknown(task_id))
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise RequestError("seed must be an integer")
        if not self.session:
            return self._first_observation_only(seed, task_id)
        self._check_open()
        if self._env is None:
            self._env = TaskEnvironment(self.config.pack_dir, backend=self._backend, image=self.config.image)
        self._grade = None
        self._episode_id = str(episode_id)[:255] if episode_id is not None else None
        prompt = self._env.reset(task_id=task_id, seed=seed)
        return TaskObservation(
            task_id=self._env.task_id,
            content=prompt,
            system_prompt=self._env.system_prompt,
            tools=self._env.tool_schemas(),
        )

    def step(self, action: ToolCall, timeout_s: float | None = None, **kwargs: Any) -> TaskObservation:
        if not self.session:
            raise RequestError(
                "HTTP /step is stateless in OpenEnv (a new environment per request): play an episode over the "
                "/ws WebSocket (openenv's EnvClient), which keeps its sandbox between steps"
            )
        self._check_open()
        env = self._env
        if env is None or env.task_id is None:
            raise RequestError("no episode: send reset first")
        if self._grade is not None:
            return self._ended("error: the episode has ended; send reset for a new one")
        content = env.call_tool(action.tool, action.arguments)
        if env.stop_reason is None:
            return TaskObservation(task_id=env.task_id, content=content)
        return self._ended(content)

    @property
    def state(self) -> TaskState:
        env = self._env
        task_id = env.task_id if env is not None else None
        return TaskState(
            episode_id=self._episode_id,
            step_count=env.steps if env is not None and task_id is not None else 0,
            task_id=task_id,
            stop_reason=env.stop_reason if env is not None and task_id is not None else None,
            done=self._grade is not None,
            reward=float(self._grade["reward"]) if self._grade is not None else None,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        manifest = _manifest(self.config.pack_dir)
        return EnvironmentMetadata(
            name=str(manifest.get("name") or self.config.pack_dir.name),
            description=f"Gymwright pack {manifest.get('name', '?')}: {len(self._tasks())} agentic task(s), "
            f"graded by the pack's grader in a {self.config.backend} sandbox",
            version=str(manifest.get("version") or "0"),
        )

    def close(self) -> None:
        self._closed = True
        env, self._env = self._env, None
        if env is not None:
            env.close()

    # -- internals -----------------------------------------------------------------------------------------------

    def _ended(self, content: str) -> TaskObservation:
        env = self._env
        if self._grade is None:
            self._grade = env.grade()
        return TaskObservation(
            task_id=env.task_id,
            content=content,
            stop_reason=env.stop_reason,
            grade=self._grade,
            done=True,
            reward=float(self._grade["reward"]),
        )

    def _first_observation_only(self, seed: int | None, task_id: str | None) -> TaskObservation:
        ids = sorted(self._tasks())
        if task_id is None:
            if not ids:
                raise RequestError(f"the pack in {self.config.pack_dir} has no agentic task")
            import random

            task_id = ids[random.Random(seed).randrange(len(ids))]
        document = self._tasks()[task_id]
        probe = TaskEnvironment(self.config.pack_dir, backend=self._backend, image=self.config.image)
        return TaskObservation(
            task_id=task_id,
            content=str(document.get("prompt") or ""),
            system_prompt=probe.system_prompt,
            tools=probe.tool_schemas(task_id),
        )

    def _tasks(self) -> dict[str, dict]:
        return _pack_tasks(str(Path(self.config.pack_dir).resolve()))

    def _check_open(self) -> None:
        if self._closed:
            raise RequestError(
                "this session was closed (idle past the server's session timeout, or shut down): reconnect"
            )

    def _unknown(self, task_id: Any) -> str:
        ids = sorted(self._tasks())
        shown = ", ".join(ids[:10]) + (f" (and {len(ids) - 10} more)" if len(ids) > 10 else "")
        return f"task_id {str(task_id)[:80]!r} is not an agentic task of this pack (its tasks: {shown or 'none'})"


def _manifest(pack_dir: Path) -> dict:
    try:
        with open(Path(pack_dir) / "manifest.json", encoding="utf-8") as handle:
            manifest = json.load(handle)
        return manifest if isinstance(manifest, dict) else {}
    except (OSError, ValueError):
        return {}


class SessionServer(HTTPEnvServer):
    """openenv-core's server, whose WebSocket sessions (and only those) start sandboxes."""

    async def _create_session(self):
        session_id, env = await super()._create_session()
        env.session = True
        return session_id, env


# -- bounds on what a request can send -------------------------------------------------------------------------


class _Bounds:
    """ASGI middleware: a request body past the limit is refused with 413 before any handler reads it (by its
    Content-Length, else as it streams); `mcp` messages on /ws are answered as an unknown type (not served)."""

    MCP_REFUSED = "mcp (not served here: call the task's tools with step actions)"

    def __init__(self, app, *, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            return await self._http(scope, receive, send)
        if scope["type"] == "websocket":
            return await self.app(scope, self._websocket_receive(receive), send)
        return await self.app(scope, receive, send)

    async def _http(self, scope, receive, send):
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    return await self._too_large(send, "an invalid Content-Length")
                if length > self.max_bytes:
                    return await self._too_large(send, f"{length} bytes")
        seen = 0
        started = refused = False

        async def bounded_receive():
            # A body without a Content-Length (chunked) is counted as it arrives: past the limit the client gets
            # the 413 at once and the app is told the client left (it then reads no more and sends nothing).
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    if not started:
                        refused = True
                        await self._too_large(send, f"more than {self.max_bytes} bytes")
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message):
            nonlocal started
            if refused:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, bounded_receive, tracking_send)

    async def _too_large(self, send, what: str):
        body = json.dumps(
            {
                "detail": f"request body too large ({what}); the server's limit is {self.max_bytes} bytes "
                "(python -m env serve --max-message-bytes)"
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _websocket_receive(self, receive):
        async def filtered():
            message = await receive()
            if message["type"] == "websocket.receive":
                text = message.get("text")
                if text is None and message.get("bytes") is not None:
                    text = message["bytes"].decode("utf-8", errors="replace")
                if text is not None:
                    # Parsed, not searched: JSON can spell the type in escapes ("\\u006dcp") that read as "mcp".
                    try:
                        parsed = json.loads(text)
                    except (ValueError, RecursionError):
                        parsed = None
                    if isinstance(parsed, dict) and parsed.get("type") == "mcp":
                        return {"type": "websocket.receive", "text": json.dumps({"type": self.MCP_REFUSED})}
            return message

        return filtered


# -- the app ---------------------------------------------------------------------------------------------------


def create_app(config: ServeConfig | None = None) -> FastAPI:
    """The ASGI app `python -m env serve` runs (uvicorn), for labs that run it under their own server."""
    config = config or ServeConfig()
    if config.backend not in BACKENDS:
        raise ValueError(f"unknown backend {config.backend!r}: use one of {', '.join(BACKENDS)}")
    if config.max_concurrent_envs < 1 or config.session_timeout_s <= 0 or config.max_message_bytes < 1024:
        raise ValueError("max_concurrent_envs ≥ 1, session_timeout > 0 and max_message_bytes ≥ 1024 are needed")
    _pack_tasks(str(Path(config.pack_dir).resolve()))  # an unusable pack fails here, not at the first client
    backend = get_backend(config.backend)  # one per server: its sandboxes are the sessions'
    lock = threading.Lock()

    def factory() -> EpisodeEnvironment:
        with lock:
            return EpisodeEnvironment(config, backend)

    server = SessionServer(
        factory,
        ToolCall,
        TaskObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=config.max_concurrent_envs, session_timeout=config.session_timeout_s
        ),
    )
    app = FastAPI(title="Gymwright pack environment (OpenEnv)", docs_url=None, redoc_url=None)
    server.register_routes(app)
    # Not an MCP environment: openenv-core's /mcp routes could create sessions outside /ws and close any
    # session whose id they are given.
    app.router.routes[:] = [route for route in app.router.routes if getattr(route, "path", None) != "/mcp"]

    @app.exception_handler(RequestError)
    async def _refused(request: Request, exc: RequestError):
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    @app.get("/capacity", tags=["Health"])
    async def capacity() -> dict:
        status = server.get_capacity_status()
        return {"active_sessions": status.active_sessions, "max_sessions": status.max_sessions}

    app.state.openenv_server = server
    app.add_middleware(_Bounds, max_bytes=config.max_message_bytes)
    return app


def serve(config: ServeConfig, *, host: str = "127.0.0.1", port: int = 8000) -> None:
    import uvicorn

    uvicorn.run(
        create_app(config),
        host=host,
        port=port,
        ws_max_size=config.max_message_bytes,
        limit_concurrency=config.connection_limit,
        log_level="warning",
    )


__all__ = ["EpisodeEnvironment", "ServeConfig", "TaskObservation", "TaskState", "ToolCall", "create_app", "serve"]
