"""`python -m env serve --port P` (from inside the unpacked pack): the pack's agentic tasks as an OpenEnv server.

    python -m env serve --port 8000 [--host 0.0.0.0] [--backend bubblewrap|docker] [--image IMAGE]
        [--max-concurrent-envs 8] [--session-timeout 900] [--max-message-bytes 4194304] [--max-connections N]

`python -m env tasks` lists the agentic task ids. See env/server.py for the endpoints and their bounds.

    python -m env verl --out DIR [--backend bubblewrap|docker] [--image IMAGE]

writes DIR/agent_loop.yaml (verl 0.9's agent loop entry `gymwright_agent`, env/verl_loop.py) and
DIR/agentic.parquet (one row per agentic task, for data.train_files); needs pyarrow (verl's own dependency).

    python -m env episode --task-id ID --base-url URL --model MODEL --out GRADE.json [--backend ...] [--image ...]

plays one episode of the task in a fresh sandbox against an OpenAI-compatible chat endpoint (its key in
OPENAI_API_KEY), the model calling the task's tools, and writes {"task_id", "grade"} to GRADE.json (the harness
verifiers' wrapper runs, env/verifiers_env.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m env", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the pack's agentic tasks over OpenEnv's HTTP and WebSocket API")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 behind a load balancer)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--backend", choices=("bubblewrap", "docker"), default="bubblewrap")
    serve.add_argument("--image", default=None, help="docker: one image for every task instead of each task's own")
    serve.add_argument("--max-concurrent-envs", type=int, default=8, help="sessions (sandboxes) at once")
    serve.add_argument("--session-timeout", type=float, default=900.0, help="idle seconds before a session closes")
    serve.add_argument("--max-message-bytes", type=int, default=4 * 1024 * 1024, help="request body / message cap")
    serve.add_argument("--max-connections", type=int, default=None, help="open connections (default 2×envs+16)")
    commands.add_parser("tasks", help="list the pack's agentic task ids")
    verl = commands.add_parser("verl", help="write verl's agent loop config and the agentic tasks' dataset")
    verl.add_argument("--out", required=True, help="folder for agent_loop.yaml and agentic.parquet")
    verl.add_argument("--backend", choices=("bubblewrap", "docker"), default="bubblewrap")
    verl.add_argument("--image", default=None)
    episode = commands.add_parser("episode", help="play one episode against an OpenAI-compatible endpoint")
    episode.add_argument("--task-id", required=True)
    episode.add_argument("--base-url", required=True, help="the chat endpoint's base URL (…/v1)")
    episode.add_argument("--model", required=True)
    episode.add_argument("--out", required=True, help="file for the grade (JSON)")
    episode.add_argument("--backend", choices=("bubblewrap", "docker"), default="bubblewrap")
    episode.add_argument("--image", default=None)
    episode.add_argument("--pack-dir", default=None)
    args = parser.parse_args(argv)

    if args.command == "tasks":
        from .environment import agentic_task_ids

        print("\n".join(agentic_task_ids()))
        return 0
    if args.command == "verl":
        return write_verl_files(args.out, backend=args.backend, image=args.image)
    if args.command == "episode":
        return play_episode(args)
    try:
        from .server import ServeConfig
        from .server import serve as run
    except ImportError as exc:
        print(
            f"python -m env serve needs env/requirements.txt installed (pip install -r env/requirements.txt): {exc}",
            file=sys.stderr,
        )
        return 2
    config = ServeConfig(
        backend=args.backend,
        image=args.image,
        max_concurrent_envs=args.max_concurrent_envs,
        session_timeout_s=args.session_timeout,
        max_message_bytes=args.max_message_bytes,
        max_connections=args.max_connections,
    )
    try:
        run(config, host=args.host, port=args.port)
    except (ValueError, FileNotFoundError) as exc:
        print(f"python -m env serve: {exc}", file=sys.stderr)
        return 2
    return 0


def play_episode(args) -> int:
    """`python -m env episode`: the model drives the task's tools in its sandbox until it answers without a
    tool call or the episode ends (submit, the task's step or time limit, a full workspace); then the grade.
    The grade file is written whole (a temporary file renamed) once the sandbox graded the episode."""
    import os

    from openai import OpenAI

    from .environment import TaskEnvironment

    client = OpenAI(base_url=args.base_url, api_key=os.environ.get("OPENAI_API_KEY") or "none", max_retries=2)
    env = TaskEnvironment(args.pack_dir, backend=args.backend, image=args.image)
    try:
        prompt = env.reset(task_id=args.task_id)
        messages = [{"role": "system", "content": env.system_prompt}, {"role": "user", "content": prompt}]
        tools = env.tool_schemas()
        answer = None
        while env.stop_reason is None:
            completion = client.chat.completions.create(model=args.model, messages=messages, tools=tools)
            message = completion.choices[0].message
            calls = message.tool_calls or []
            messages.append(message.model_dump(exclude_none=True))
            if not calls:
                answer = message.content or ""
                break
            for call in calls:
                output = env.call_tool(call.function.name, call.function.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        grade = env.grade(answer=answer)
    finally:
        env.close()
    out = Path(args.out)
    partial = out.with_name(out.name + ".partial")
    partial.write_text(json.dumps({"task_id": args.task_id, "grade": grade}))
    partial.replace(out)
    return 0


def verl_rows() -> list[dict]:
    """One verl dataset row per agentic task: the harness's system message and the task's prompt, the task id
    in extra_info (GymwrightAgentLoop reads it), and `agent_name` choosing that loop."""
    import json

    from .environment import PACK_DIR, TaskEnvironment, _pack_tasks

    manifest_path = PACK_DIR / "manifest.json"
    name = (
        json.loads(manifest_path.read_text()).get("name", PACK_DIR.name) if manifest_path.is_file() else PACK_DIR.name
    )
    system = TaskEnvironment(backend="bubblewrap").system_prompt
    rows = []
    for index, (task_id, document) in enumerate(sorted(_pack_tasks(str(PACK_DIR.resolve())).items())):
        rows.append(
            {
                "data_source": f"gymwright/{name}",
                "prompt": [{"role": "system", "content": system}, {"role": "user", "content": document["prompt"]}],
                "ability": "agentic",
                "reward_model": {"style": "environment", "ground_truth": task_id},
                "extra_info": {"task_id": task_id, "index": index},
                "agent_name": "gymwright_agent",
            }
        )
    return rows


def write_verl_files(out: str, *, backend: str, image: str | None) -> int:

    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        print("python -m env verl needs pyarrow (pip install pyarrow; verl's environment has it)", file=sys.stderr)
        return 2
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    entry = f"- name: gymwright_agent\n  _target_: env.verl_loop.GymwrightAgentLoop\n  backend: {backend}\n"
    if image:
        entry += f"  image: {json.dumps(image)}\n"
    (folder / "agent_loop.yaml").write_text(entry)
    pq.write_table(pa.Table.from_pylist(verl_rows()), folder / "agentic.parquet")
    print(f"wrote {folder / 'agent_loop.yaml'} and {folder / 'agentic.parquet'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
