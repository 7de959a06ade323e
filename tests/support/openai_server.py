"""A local OpenAI-protocol server for tests: POST /v1/chat/completions (and /chat/completions).

A real HTTP server (threaded `http.server` on 127.0.0.1, a free port) so tests
exercise the real openai SDK, httpx, timeouts and retries. Replies come from a
scripted queue, or from a callable given each request body, or from `default`.

    from tests.support.openai_server import OpenAIServer, Reply, tool_call

    with OpenAIServer(replies=['{"met": true, "explanation": "ok"}']) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test")
        ...
        assert server.calls == 1
        assert server.requests[0]["model"] == "judge"

A reply is any of:

* a `str` — the assistant message content;
* a `dict` — an assistant message: `{"content": ..., "tool_calls": [...]}` (see `tool_call`);
* a `Reply` — full control: content / tool_calls, `status` (429, 500, ...),
  `delay` seconds before answering, `hang=True` (never answers until the
  server stops: a client timeout), raw `body` bytes, extra `headers`;
* a callable `(request_body: dict) -> reply` — called per request, in the
  handler thread (so it must be thread-safe if requests overlap);
* an `Exception` instance is not supported: use `Reply(status=...)`.

`flapping(*replies)` makes a `handler` that cycles through replies forever, e.g. alternating
HTTP 500s and timeouts.

`delay` on the server applies to every reply that does not set its own.
`calls` counts requests received; `requests` records every request body
(parsed JSON) in arrival order, and `api_keys` the bearer token each came with.
With `api_key`, a request with any other token is answered HTTP 401, as a
provider answers a wrong key (still counted and recorded).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[dict] | None = None
    status: int = 200
    delay: float | None = None
    hang: bool = False
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str | None = None


def tool_call(name: str, arguments: dict | str, call_id: str | None = None) -> dict:
    """One OpenAI-format tool call for an assistant message (`arguments` is JSON-encoded if a dict)."""
    return {
        "id": call_id or f"call_{name}_{next(_ids)}",
        "type": "function",
        "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)},
    }


_ids = itertools.count(1)


def _as_reply(value: Any) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(content=value)
    if isinstance(value, dict):
        unknown = set(value) - {"content", "tool_calls", "role"}
        if unknown:
            raise ValueError(f"a dict reply is an assistant message; unknown keys {sorted(unknown)}")
        return Reply(content=value.get("content"), tool_calls=value.get("tool_calls"))
    raise TypeError(f"cannot turn {type(value).__name__} into a reply")


class OpenAIServer:
    """The server; a context manager. `base_url` ends in /v1, as the openai SDK expects."""

    def __init__(
        self,
        replies: list | None = None,
        *,
        handler: Callable[[dict], Any] | None = None,
        default: Any = None,
        delay: float = 0.0,
        api_key: str | None = None,
    ):
        self._queue: deque = deque(replies or [])
        self.api_key = api_key
        self.api_keys: list[str] = []
        self.handler = handler
        self.default = default
        self.delay = delay
        self.requests: list[dict] = []
        self.calls = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.in_flight = 0
        self.max_in_flight = 0

    # ------------------------------------------------------------ scripting

    def queue(self, *replies: Any) -> None:
        """Append scripted replies (used before `handler` and `default`)."""
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        """Forget recorded requests and counters (the queue is kept)."""
        with self._lock:
            self.requests.clear()
            self.api_keys.clear()
            self.calls = 0
            self.max_in_flight = 0

    def _next_reply(self, body: dict) -> Reply:
        with self._lock:
            scripted = self._queue.popleft() if self._queue else None
        if scripted is not None:
            return _as_reply(scripted(body) if callable(scripted) else scripted)
        if self.handler is not None:
            return _as_reply(self.handler(body))
        if self.default is not None:
            return _as_reply(self.default(body) if callable(self.default) else self.default)
        return Reply(
            status=500,
            body=json.dumps(
                {"error": {"message": "the test server has no scripted reply left", "type": "server_error"}}
            ).encode(),
        )

    # ------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> OpenAIServer:
        owner = self

        class Handler(_Handler):
            server_owner = owner

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    server_owner: OpenAIServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, keep-alive clients wait ~40 ms for each reply.
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, json.dumps({"object": "list", "data": [{"id": "test-model", "object": "model"}]}).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self):
        owner = self.server_owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.split("?")[0] not in CHAT_PATHS:
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, b'{"error": {"message": "request body is not JSON"}}')
            return
        authorization = self.headers.get("Authorization") or ""
        token = authorization[len("Bearer ") :] if authorization.startswith("Bearer ") else ""
        with owner._lock:
            owner.calls += 1
            owner.requests.append(body)
            owner.api_keys.append(token)
            owner.in_flight += 1
            owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
        try:
            if owner.api_key is not None and token != owner.api_key:
                error = {
                    "message": "Incorrect API key provided",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
                self._send(401, json.dumps({"error": error}).encode())
                return
            reply = owner._next_reply(body)
            if reply.hang:
                self.close_connection = True
                owner._stopping.wait(300)
                return
            delay = owner.delay if reply.delay is None else reply.delay
            if delay:
                if owner._stopping.wait(delay):
                    self.close_connection = True
                    return
            if reply.body is not None:
                self._send(reply.status, reply.body, reply.headers)
                return
            if reply.status != 200:
                error = {"error": {"message": f"scripted HTTP {reply.status}", "type": "test", "code": reply.status}}
                self._send(reply.status, json.dumps(error).encode(), reply.headers)
                return
            message: dict[str, Any] = {"role": "assistant", "content": reply.content}
            if reply.tool_calls:
                message["tool_calls"] = reply.tool_calls
            finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
            prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
            completion = {
                "id": f"chatcmpl-test-{owner.calls}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "test-model"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": {
                    "prompt_tokens": prompt_chars // 4,
                    "completion_tokens": len(reply.content or "") // 4,
                    "total_tokens": prompt_chars // 4 + len(reply.content or "") // 4,
                },
            }
            self._send(200, json.dumps(completion).encode(), reply.headers)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with owner._lock:
                owner.in_flight -= 1


def flapping(*replies: Any) -> Callable[[dict], Reply]:
    """A `handler` that answers with `replies` in turn, forever (thread-safe): a flapping endpoint,
    e.g. `flapping(Reply(status=500), Reply(hang=True))` alternates server errors and timeouts."""
    turns = itertools.cycle([_as_reply(reply) for reply in replies])
    lock = threading.Lock()

    def handler(body: dict) -> Reply:
        with lock:
            return next(turns)

    return handler


def unused_port() -> int:
    """A localhost port nothing listens on (bound then released): for 'server down' tests."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


try:  # a ready-made fixture: `from tests.support.openai_server import openai_server` in a conftest
    import pytest

    @pytest.fixture
    def openai_server():
        """A started OpenAIServer with an empty script; use `.queue(...)`, `.handler`, `.default`, `.delay`."""
        with OpenAIServer() as server:
            yield server

except ImportError:  # pragma: no cover - the module also works outside pytest (benchmarks)
    pass
