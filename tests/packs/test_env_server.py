"""`python -m env serve`: a pack's agentic tasks as an OpenEnv server, run from inside the unpacked pack in the
virtualenv made from its env/requirements.txt (`make openenv-venv`), driven by OpenEnv's own client
(`openenv.GenericEnvClient`, tests/packs/openenv/client.py) over real bubblewrap sandboxes.

A network faces this server: the abuse cases (an oversized body or message, one session too many, another
client's session named by id, the MCP routes openenv-core adds) are here too.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.packs.env_support import CALC_FIXED, CODING_TASK, FILE_TASK, build_pack_dir, load_env
from tests.support.services import require_bwrap
from tests.support.venvs import openenv_python

pytestmark = [pytest.mark.bubblewrap]

CLIENT = Path(__file__).resolve().parent / "openenv" / "client.py"
ORACLE = {
    FILE_TASK["id"]: [
        {"tool": "bash", "arguments": {"command": FILE_TASK["solution"]["script"]}},
        {"tool": "submit", "arguments": {"answer": "60"}},
    ],
    CODING_TASK["id"]: [
        {"tool": "write_file", "arguments": {"path": "calc.py", "content": CALC_FIXED}},
        {"tool": "submit", "arguments": {"answer": "fixed"}},
    ],
}
NOP = [{"tool": "submit", "arguments": {"answer": ""}}]
# Rewriting the protected tests instead of the code: restored before the checks, so it earns nothing.
HACK = [
    {"tool": "write_file", "arguments": {"path": "tests/test_calc.py", "content": "import unittest\n"}},
    {"tool": "submit", "arguments": {"answer": "fixed"}},
]


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory) -> Path:
    require_bwrap()
    return build_pack_dir(tmp_path_factory.mktemp("serve"))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _post(url: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _post_chunked(url: str, body: bytes) -> tuple[int, dict]:
    """POST without a Content-Length (Transfer-Encoding: chunked), so only counting the body can bound it."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request(
            "POST",
            parts.path,
            body=iter([body[i : i + 8192] for i in range(0, len(body), 8192)]),
            headers={"Content-Type": "application/json"},
            encode_chunked=True,
        )
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read() or b"{}")
    except (BrokenPipeError, ConnectionResetError):  # refused before the whole body was sent: ask again
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read() or b"{}")
    finally:
        connection.close()


@contextlib.contextmanager
def serving(pack_dir: Path, *args: str):
    """`python -m env serve` from inside the pack, in the pack's own virtualenv; its base URL once healthy."""
    port = _free_port()
    log = pack_dir.parent / f"serve-{port}.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [openenv_python(), "-m", "env", "serve", "--port", str(port), *args],
            cwd=pack_dir,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={"PATH": "/usr/bin:/bin", "HOME": str(pack_dir.parent)},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240  # openenv-core imports gradio: slow on a busy machine
        while True:
            assert server.poll() is None, log.read_text()[-3000:]
            try:
                if _get(f"{url}/health")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def client(scenario: str, urls: list[str], **inputs) -> dict:
    source = Path(f"/tmp/openenv-{scenario}-{time.monotonic_ns()}.json")
    out = source.with_suffix(".out.json")
    source.write_text(json.dumps({"urls": urls, **inputs}))
    try:
        done = subprocess.run(
            [openenv_python(), str(CLIENT), scenario, str(source), str(out)],
            capture_output=True,
            text=True,
            timeout=900,
            env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(out.read_text())["result"]
    finally:
        source.unlink(missing_ok=True)
        out.unlink(missing_ok=True)


def direct_grade(pack_dir: Path, task_id: str, actions: list[dict]) -> dict:
    """The same actions through the pack's TaskEnvironment in this process: the grade the server must give."""
    env = load_env(pack_dir).TaskEnvironment(pack_dir)
    try:
        env.reset(task_id=task_id)
        for action in actions:
            env.call_tool(action["tool"], action["arguments"])
        return env.grade()
    finally:
        env.close()


def test_openenv_client_plays_episodes_whose_rewards_are_the_environments_grades(pack_dir):
    episodes = [
        {"task_id": FILE_TASK["id"], "actions": ORACLE[FILE_TASK["id"]]},
        {"task_id": CODING_TASK["id"], "actions": ORACLE[CODING_TASK["id"]]},
        {"task_id": CODING_TASK["id"], "actions": NOP},
        {"task_id": CODING_TASK["id"], "actions": HACK},
    ]
    with serving(pack_dir) as url:
        health = _get(f"{url}/health")
        schema = _get(f"{url}/schema")[1]
        seen = client("episodes", [url], episodes=episodes)
    assert health == (200, {"status": "healthy"})
    assert set(schema["action"]["properties"]) >= {"tool", "arguments"}
    assert "grade" in schema["observation"]["properties"]
    for episode, played in zip(episodes, seen):
        task = FILE_TASK if episode["task_id"] == FILE_TASK["id"] else CODING_TASK
        first = played["reset"]["observation"]
        assert first["task_id"] == task["id"] and first["content"] == task["prompt"]  # the prompt, first
        assert {tool["function"]["name"] for tool in first["tools"]} >= {"bash", "submit"}
        assert played["reset"]["done"] is False and played["reset"]["reward"] is None
        *middle, last = played["steps"]
        assert all(not step["done"] and step["reward"] is None for step in middle)
        expected = direct_grade(pack_dir, episode["task_id"], episode["actions"])
        assert last["done"] is True and last["observation"]["stop_reason"] == "submitted"
        assert last["reward"] == expected["reward"] == last["observation"]["grade"]["reward"]
        got_checks = [(c["id"], c["status"], c["score"]) for c in last["observation"]["grade"]["checks"]]
        assert got_checks == [(c["id"], c["status"], c["score"]) for c in expected["checks"]]
        assert played["state"]["task_id"] == task["id"] and played["state"]["done"] is True
    rewards = [played["steps"][-1]["reward"] for played in seen]
    assert rewards[:2] == [1.0, 1.0] and rewards[2] == 0.0 and rewards[3] < 1.0  # oracle, oracle, nop, hack


def test_two_servers_serve_one_client_pool_each_session_in_its_own_sandbox(pack_dir):
    # Four concurrent clients over two servers that hold two sessions each: both servers must carry sessions.
    episodes = [{"task_id": task["id"], "actions": ORACLE[task["id"]]} for task in (FILE_TASK, CODING_TASK) * 2]
    with (
        serving(pack_dir, "--max-concurrent-envs", "2") as first,
        serving(pack_dir, "--max-concurrent-envs", "2") as second,
    ):
        seen = client("episodes", [first, second], episodes=episodes, concurrent=True)
        isolated = client("isolation", [first, second], task_id=FILE_TASK["id"])
        after = [_get(f"{url}/capacity")[1] for url in (first, second)]
    assert sorted(played["url"] for played in seen) == sorted([first, second] * 2)
    assert [played["steps"][-1]["reward"] for played in seen] == [1.0] * 4
    assert "wrote" in isolated["wrote"]["observation"]["content"].lower() or isolated["wrote"]["done"] is False
    assert "mine.txt" not in isolated["listed"]["observation"]["content"]
    assert "error" in isolated["read"]["observation"]["content"].lower()
    assert after == [{"active_sessions": 0, "max_sessions": 2}] * 2  # closed connections freed their slots


def test_one_session_too_many_is_refused_and_idle_sessions_are_reaped(pack_dir):
    with serving(pack_dir, "--max-concurrent-envs", "2", "--session-timeout", "1") as url:
        held = client("capacity", [url], sessions=2, task_id=FILE_TASK["id"])
        idle = client("idle", [url], task_id=FILE_TASK["id"], wait_s=12)
        capacity = _get(f"{url}/capacity")[1]
    assert [answer["ok"] for answer in held["answers"]] == [True, True, False]
    assert held["refused"]["type"] == "error" and held["refused"]["data"]["code"] == "CAPACITY_REACHED"
    assert held["after_close"] == FILE_TASK["id"]
    assert idle["ok"] is False and "session was closed" in idle["error"]
    assert capacity == {"active_sessions": 0, "max_sessions": 2}


def test_abuse_oversized_requests_mcp_routes_and_another_clients_session_are_refused(pack_dir):
    with serving(pack_dir, "--max-message-bytes", "65536") as url:
        too_big = _post(f"{url}/reset", json.dumps({"task_id": "x" * 70000}).encode())
        too_big_chunked = _post_chunked(f"{url}/reset", json.dumps({"task_id": "x" * 70000}).encode())
        unknown = _post(f"{url}/reset", json.dumps({"task_id": "../../etc/passwd"}).encode())
        stateless_step = _post(
            f"{url}/step", json.dumps({"action": {"tool": "bash", "arguments": {"command": "id"}}}).encode()
        )
        mcp_http = _post(
            f"{url}/mcp",
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/close", "params": {"session_id": "x"}}
            ).encode(),
        )
        first = _post(f"{url}/reset", json.dumps({"task_id": FILE_TASK["id"]}).encode())
        seen = client(
            "abuse", [url], task_id=FILE_TASK["id"], victim_guess="00000000-0000-4000-8000-000000000000", oversize=70000
        )
        capacity = _get(f"{url}/capacity")[1]
    assert too_big[0] == 413 and "65536" in too_big[1]["detail"]
    assert too_big_chunked[0] == 413 and "more than 65536 bytes" in too_big_chunked[1]["detail"]
    assert unknown[0] == 400 and "not an agentic task" in unknown[1]["detail"]
    assert stateless_step[0] == 400 and "/ws" in stateless_step[1]["detail"]
    assert mcp_http[0] in (404, 405)
    assert first[0] == 200 and first[1]["observation"]["content"] == FILE_TASK["prompt"]  # no sandbox needed
    for refused in ("mcp_close", "mcp_close_escaped", "mcp_create"):
        assert seen[refused]["type"] == "error" and "not served here" in seen[refused]["data"]["message"]
    assert seen["step_with_session_id"]["type"] == "error"  # an action has no session id to aim with
    assert seen["oversize"].get("code") == 1009 or "closed" in seen["oversize"]
    assert seen["victim_after"]["observation"]["content"] == "kept"  # the victim's session went on untouched
    assert capacity["active_sessions"] == 0


def test_the_openenv_virtualenv_installs_the_requirements_a_pack_ships(pack_dir):
    """`make env-requirements` (what `make openenv-venv` installs) is the pack's env/requirements.txt, which
    pins openenv-core for `python -m env serve`."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "env-requirements"], cwd=root, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    shipped = (pack_dir / "env" / "requirements.txt").read_text()
    assert done.stdout == shipped
    assert "openenv-core==0.3.0\n" in shipped
    assert {"env/server.py", "env/__main__.py"} <= set(json.loads((pack_dir / "manifest.json").read_text())["files"])


def test_docker_backed_servers_serve_one_client_pool_as_on_n_hosts(pack_dir):
    """docs/serving.md's N hosts, here two docker-backed servers on one engine, and a pool spread over them."""
    from tests.support.images import python_image
    from tests.support.services import require_docker

    image = python_image(require_docker())
    episodes = [
        {"task_id": CODING_TASK["id"], "actions": ORACLE[CODING_TASK["id"]]},
        {"task_id": CODING_TASK["id"], "actions": NOP},
    ]
    docker = ("--backend", "docker", "--image", image, "--max-concurrent-envs", "1")
    with serving(pack_dir, *docker) as first, serving(pack_dir, *docker) as second:
        seen = client("episodes", [first, second], episodes=episodes, concurrent=True)
    assert [played["url"] for played in seen] == [first, second]  # one session each: both were needed
    assert [played["steps"][-1]["reward"] for played in seen] == [1.0, 0.0]
    assert seen[0]["steps"][-1]["observation"]["grade"]["complete"] is True
