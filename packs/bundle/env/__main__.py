"""`python -m env serve --port P` (from inside the unpacked pack): the pack's agentic tasks as an OpenEnv server.

    python -m env serve --port 8000 [--host 0.0.0.0] [--backend bubblewrap|docker] [--image IMAGE]
        [--max-concurrent-envs 8] [--session-timeout 900] [--max-message-bytes 4194304] [--max-connections N]

`python -m env tasks` lists the agentic task ids. See env/server.py for the endpoints and their bounds.

    python -m env verl --out DIR [--backend bubblewrap|docker] [--image IMAGE]

writes DIR/agent_loop.yaml (verl 0.9's agent loop entry `gymwright_agent`, env/verl_loop.py) and
DIR/agentic.parquet (one row per agentic task, for data.train_files); needs pyarrow (verl's own dependency).
"""

from __future__ import annotations

import argparse
import json
import sys


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
    args = parser.parse_args(argv)

    if args.command == "tasks":
        from .environment import agentic_task_ids

        print("\n".join(agentic_task_ids()))
        return 0
    if args.command == "verl":
        return write_verl_files(args.out, backend=args.backend, image=args.image)
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
    from pathlib import Path

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
