"""bench_env.py's OpenEnv side, run in the virtualenv made from a pack's env/requirements.txt (make openenv-venv):
OpenEnv's own client against `python -m env serve`. Prints one JSON object.

    var/openenv-venv/bin/python bench/env_client.py URL TASK_ID STEPS RESETS

`steps`: ms per `step({"tool": "bash", "arguments": {"command": "true"}})` over the session's WebSocket (the
raw `exec` baseline is measured in bench_env.py's own process, in the same run); `first` and `ready`: ms from
sending reset to its observation (a fresh sandbox and the prompt), and to the first tool result after it.
"""

import asyncio
import json
import sys
import time

from openenv import GenericEnvClient

url, task_id, steps, resets = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


async def main() -> dict:
    async with GenericEnvClient(base_url=url, message_timeout_s=300) as env:
        await env.reset(task_id=task_id)
        for _ in range(3):
            await env.step({"tool": "bash", "arguments": {"command": "true"}})
        stepped = []
        for _ in range(steps):
            started = time.perf_counter()
            result = await env.step({"tool": "bash", "arguments": {"command": "true"}})
            stepped.append((time.perf_counter() - started) * 1000)
            assert result.observation["content"].startswith("exit code: 0"), result.observation
        first, ready = [], []
        for _ in range(resets):
            started = time.perf_counter()
            result = await env.reset(task_id=task_id)
            first.append((time.perf_counter() - started) * 1000)
            await env.step({"tool": "bash", "arguments": {"command": "true"}})
            ready.append((time.perf_counter() - started) * 1000)
    return {"steps": stepped, "first": first, "ready": ready}


print(json.dumps(asyncio.run(main())))
