"""`python -m sandbox.runtime exec|rollout|reap` (contract: docs/formats.md, "Command-line contract").

Exit status: 0 when the sandbox ran (whatever the command's own exit code,
which is in the JSON), 2 for bad arguments, 3 when the sandbox could not be
started or used (the JSON then has `error` and `permanent`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .spec import SandboxError, SandboxSpec

DEFAULT_BACKEND = os.environ.get("GYMWRIGHT_SANDBOX_BACKEND", "bubblewrap")


def _backend(args):
    from .backends import get_backend

    options = {}
    if args.backend == "docker" and os.environ.get("GYMWRIGHT_SANDBOX_IMAGE"):
        options["default_image"] = os.environ["GYMWRIGHT_SANDBOX_IMAGE"]
    return get_backend(args.backend, **options)


def _read_dir(root: str | None) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    if not root:
        return files
    base = Path(root)
    if not base.is_dir():
        raise SystemExit(f"--workspace/--files: {root} is not a directory")
    for path in sorted(base.rglob("*")):
        if path.is_file() and not path.is_symlink():
            files[path.relative_to(base).as_posix()] = path.read_bytes()
    return files


def cmd_exec(args) -> int:
    from .results import exec_result_dict

    command = args.command
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("exec: give a command after --", file=sys.stderr)
        return 2
    # One argument is a shell command line; several are an argv.
    command_arg = command[0] if len(command) == 1 else command
    spec = SandboxSpec(image=args.image, network=args.network).with_overrides(
        memory_mb=args.memory_mb,
        cpus=args.cpus,
        pids=args.pids,
        output_cap=args.output_cap,
        exec_timeout_s=args.timeout,
    )
    try:
        backend = _backend(args)
        with backend.start(spec, files=_read_dir(args.workspace)) as sandbox:
            result = sandbox.exec(
                command_arg, timeout_s=args.timeout, stdin=sys.stdin.buffer.read() if args.stdin else None
            )
            if args.snapshot:
                sandbox.snapshot(Path(args.snapshot))
    except SandboxError as exc:
        print(json.dumps({"error": exc.message, "permanent": exc.permanent}))
        return 3
    print(json.dumps(exec_result_dict(result)))
    return 0


def cmd_rollout(args) -> int:
    from .rollout import rollout_from_cli

    return rollout_from_cli(args)


def cmd_reap(args) -> int:
    """Docker containers (if an engine is reachable) and bubblewrap leftovers."""
    from .backends.bubblewrap import reap_bubblewrap

    out: dict = {"removed": [], "bubblewrap_removed": reap_bubblewrap()}
    if args.backend in ("docker", "all"):
        from .backends.docker import reap_containers

        try:
            out["removed"] = reap_containers(older_than=args.older_than)
        except SandboxError as exc:
            out["docker_error"] = exc.message
            if args.backend == "docker":
                print(json.dumps(out))
                return 3
    print(json.dumps(out))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox.runtime", description="Gymwright sandboxes: run commands and rollouts."
    )
    sub = parser.add_subparsers(dest="cmd", required=True)

    def backend_args(p):
        p.add_argument("--backend", choices=["bubblewrap", "docker"], default=DEFAULT_BACKEND)

    p = sub.add_parser("exec", help="run one command in a fresh sandbox, print a JSON result")
    backend_args(p)
    p.add_argument("--image", help="docker image (default $GYMWRIGHT_SANDBOX_IMAGE)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    p.add_argument("--memory-mb", type=int)
    p.add_argument("--cpus", type=float)
    p.add_argument("--pids", type=int)
    p.add_argument("--output-cap", type=int, help="bytes kept of stdout and of stderr")
    p.add_argument("--network", choices=["none", "allowed"], default="none")
    p.add_argument("--workspace", help="directory whose files are copied into /workspace first")
    p.add_argument("--snapshot", help="copy /workspace here afterwards")
    p.add_argument("--stdin", action="store_true", help="pass our stdin to the command")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_exec)

    p = sub.add_parser("rollout", help="run one episode of a task and grade it")
    backend_args(p)
    p.add_argument("--task", required=True, help="gymwright.task/v1 JSON file")
    p.add_argument(
        "--policy",
        required=True,
        help="oracle | nop | probe:TEXT | model | hack:NAME (skip-tests, delete-tests, edit-tests, echo-prompt, keyword-stuffing, judge-injection, empty-files)",
    )
    p.add_argument("--base-url", help="OpenAI-compatible base URL (default $OPENAI_BASE_URL)")
    p.add_argument("--model", help="model name (default $GYMWRIGHT_POLICY_MODEL)")
    p.add_argument("--api-key", help="default $OPENAI_API_KEY")
    p.add_argument("--files", help="directory holding the task's files (by their path)")
    p.add_argument("--env-files", help="directory holding the environment's files (/env)")
    p.add_argument("--judge-base-url")
    p.add_argument("--judge-model")
    p.add_argument("--image", help="override the environment's image")
    p.set_defaults(func=cmd_rollout)

    p = sub.add_parser("reap", help="remove sandboxes left behind by dead workers")
    p.add_argument("--older-than", type=float, help="docker: also remove any older than this many seconds")
    p.add_argument("--backend", choices=["docker", "bubblewrap", "all"], default="all")
    p.set_defaults(func=cmd_reap)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
