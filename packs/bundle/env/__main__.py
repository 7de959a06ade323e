"""`python -m env serve --port P` (from inside the unpacked pack): the pack's agentic tasks as an OpenEnv server.

    python -m env serve --port 8000 [--host 0.0.0.0] [--backend bubblewrap|docker] [--image IMAGE]
        [--max-concurrent-envs 8] [--session-timeout 900] [--max-message-bytes 4194304] [--max-connections N]

`python -m env tasks` lists the agentic task ids. See env/server.py for the endpoints and their bounds.
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args(argv)

    if args.command == "tasks":
        from .environment import agentic_task_ids

        print("\n".join(agentic_task_ids()))
        return 0
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


if __name__ == "__main__":
    sys.exit(main())
