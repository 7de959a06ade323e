"""OpenEnv's own client (`openenv.GenericEnvClient`, openenv-core from PyPI) against `python -m env serve`, run
in the virtualenv made from the pack's env/requirements.txt (`make openenv-venv`), without Gymwright.

    python client.py SCENARIO IN_JSON OUT_JSON

IN_JSON: {"urls": [...], ...the scenario's inputs}; OUT_JSON: what the client saw. Scenarios:

- `episodes`: {"episodes": [{"task_id", "actions": [{"tool", "arguments"}...]}...], "concurrent": bool} — a
  pool of clients, client i on urls[i % len(urls)], each playing its episode over /ws; every observation.
- `isolation`: two sessions of one task at once; one writes a file, the other lists its workspace.
- `capacity`: `sessions` + 1 clients hold sessions at once; what each reset answered.
- `idle`: reset, then wait `wait_s`; what a step answers afterwards.
- `abuse`: an `mcp` message closing a session by id (another client's), an oversized message, then the first
  client's episode goes on.
"""

import asyncio
import json
import sys
import time

from openenv import GenericEnvClient
from websockets.asyncio.client import connect

scenario, source, out = sys.argv[1], sys.argv[2], sys.argv[3]
spec = json.loads(open(source).read())
urls = spec["urls"]


def result(step) -> dict:
    return {"observation": step.observation, "reward": step.reward, "done": step.done}


async def play(url: str, episode: dict) -> dict:
    async with GenericEnvClient(base_url=url, message_timeout_s=300) as client:
        seen = {"url": url, "reset": result(await client.reset(task_id=episode["task_id"])), "steps": []}
        for action in episode["actions"]:
            seen["steps"].append(result(await client.step(action)))
        seen["state"] = await client.state()
        return seen


async def episodes() -> list:
    jobs = [play(urls[i % len(urls)], episode) for i, episode in enumerate(spec["episodes"])]
    if spec.get("concurrent"):
        return list(await asyncio.gather(*jobs))
    return [await job for job in jobs]


async def isolation() -> dict:
    task_id = spec["task_id"]
    async with GenericEnvClient(base_url=urls[0]) as first, GenericEnvClient(base_url=urls[-1]) as second:
        await first.reset(task_id=task_id, episode_id="shared-label")
        await second.reset(task_id=task_id, episode_id="shared-label")  # a label, never another's sandbox
        wrote = await first.step({"tool": "write_file", "arguments": {"path": "mine.txt", "content": "first"}})
        listed = await second.step({"tool": "list_files", "arguments": {}})
        read = await second.step({"tool": "read_file", "arguments": {"path": "mine.txt"}})
        return {"wrote": result(wrote), "listed": result(listed), "read": result(read)}


async def capacity() -> dict:
    clients = [GenericEnvClient(base_url=urls[0]) for _ in range(spec["sessions"] + 1)]
    answers = []
    try:
        for client in clients:
            try:
                step = await client.reset(task_id=spec["task_id"])
                answers.append({"ok": True, "task_id": step.observation["task_id"]})
            except Exception as exc:  # noqa: BLE001 - what the server answered is the point
                answers.append({"ok": False, "error": str(exc)})
        # OpenEnv's client only sees the connection closed under it: what the server said, read raw
        async with connect(urls[0].replace("http://", "ws://") + "/ws") as refused:
            said = json.loads(await asyncio.wait_for(refused.recv(), 60))
    finally:
        for client in clients:
            await client.close()
    # a freed slot serves the next client
    async with GenericEnvClient(base_url=urls[0]) as again:
        step = await again.reset(task_id=spec["task_id"])
    return {"answers": answers, "refused": said, "after_close": step.observation["task_id"]}


async def idle() -> dict:
    async with GenericEnvClient(base_url=urls[0]) as client:
        await client.reset(task_id=spec["task_id"])
        await asyncio.sleep(spec["wait_s"])
        try:
            step = await client.step({"tool": "list_files", "arguments": {}})
            return {"ok": True, "step": result(step)}
        except Exception as exc:  # noqa: BLE001
            return {"ok": False, "error": str(exc)}


async def raw(ws, message: dict | str) -> dict:
    await ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(await asyncio.wait_for(ws.recv(), 120))


async def abuse() -> dict:
    seen = {}
    ws_url = urls[0].replace("http://", "ws://") + "/ws"
    async with GenericEnvClient(base_url=urls[0]) as victim:
        await victim.reset(task_id=spec["task_id"])
        await victim.step({"tool": "write_file", "arguments": {"path": "work.txt", "content": "kept"}})
        async with connect(ws_url, max_size=None) as attacker:
            close = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "openenv/session/close",
                "params": {"session_id": spec["victim_guess"]},
            }
            seen["mcp_close"] = await raw(attacker, {"type": "mcp", "data": close})
            # the same message with its type spelled in JSON escapes: the same "mcp" once parsed
            escaped = json.dumps({"type": "mcp", "data": close}).replace('"mcp"', '"\\u006dcp"')
            seen["mcp_close_escaped"] = await raw(attacker, escaped)
            create = {"jsonrpc": "2.0", "id": 2, "method": "openenv/session/create", "params": {}}
            seen["mcp_create"] = await raw(attacker, {"type": "mcp", "data": create})
            seen["step_with_session_id"] = await raw(
                attacker,
                {"type": "step", "data": {"tool": "list_files", "arguments": {}, "session_id": spec["victim_guess"]}},
            )
        async with connect(ws_url, max_size=None) as flooder:
            await flooder.send(
                json.dumps({"type": "step", "data": {"tool": "bash", "arguments": {"command": "x" * spec["oversize"]}}})
            )
            try:
                answer = await asyncio.wait_for(flooder.recv(), 60)
                seen["oversize"] = {"answer": str(answer)[:300]}
            except Exception as exc:  # noqa: BLE001 - the connection is closed on us: how, is the point
                seen["oversize"] = {
                    "closed": type(exc).__name__,
                    "code": getattr(getattr(exc, "rcvd", None), "code", None),
                }
        read = await victim.step({"tool": "read_file", "arguments": {"path": "work.txt"}})
        seen["victim_after"] = result(read)
    return seen


started = time.monotonic()
outcome = asyncio.run(
    {"episodes": episodes, "isolation": isolation, "capacity": capacity, "idle": idle, "abuse": abuse}[scenario]()
)
with open(out, "w") as handle:
    json.dump({"result": outcome, "seconds": time.monotonic() - started}, handle)
