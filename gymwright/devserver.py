"""`make run`: migrate, bootstrap, load the demo, then run the web server and a Celery worker.

SIGTERM or Ctrl-C (SIGINT), to this process or to its whole process group, stops everything it started,
promptly. Running it again reuses the database, the users and the demo content.

Each child runs in a session (and process group) of its own, so that a signal sent to the terminal's or
make's process group reaches this process only, which stops each child once: the web server at once, the
worker by its warm shutdown (it finishes a running job, then stops its own pool; idle, on the file-backed
broker, ~6 s: Celery's loop ends its 2-second poll and runs one more). Had the group's signal reached the
worker's pool processes too, they would die under their main process, which forks new ones in their place
(a stop then took from 6 to over 20 s). A child that has not exited after STOP_GRACE_S is killed with
all of its group (a worker's pool, a job's sandbox processes).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STOP_GRACE_S = 10.0


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], check=True, cwd=ROOT)


def _kill_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)  # the child leads its own group: the group's id is its pid
    except ProcessLookupError:
        pass  # nothing is left in it


def stop_children(processes: dict[str, subprocess.Popen], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to each child that runs, a wait of up to `grace_s`, then SIGKILL to each child's whole group,
    and SIGKILL to whatever a child left in its group when it exited."""
    running = [name for name, process in processes.items() if process.poll() is None]
    if running:
        print(
            f"\nStopping {' and '.join(running)} (a job the worker runs has up to {grace_s:g} s to finish).", flush=True
        )
    for name in running:
        processes[name].send_signal(signal.SIGTERM)  # the child only: it stops its own children
    deadline = time.monotonic() + grace_s
    for name, process in processes.items():
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"{name} did not stop within {grace_s:g} s; killing it.", flush=True)
            _kill_group(process, signal.SIGKILL)
            process.wait()
    for process in processes.values():
        _kill_group(process, signal.SIGKILL)


def _port_taken(host: str, port: str) -> str:
    """Why the web server could not listen on host:port ("" when it can): asked before anything starts, so that
    nothing says it is running when it is not."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, int(port)))
    except ValueError:
        return f"GYMWRIGHT_PORT={port!r} is not a port number"
    except OSError as exc:
        return exc.strerror or str(exc)
    return ""


def _listening(host: str, port: str, web: subprocess.Popen, timeout_s: float = 30.0) -> bool:
    """Whether the web server accepts connections within `timeout_s` (False once it has exited)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and web.poll() is None:
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gymwright.settings")
    host = os.environ.get("GYMWRIGHT_HOST", "127.0.0.1")
    port = os.environ.get("GYMWRIGHT_PORT", "8000")
    taken = _port_taken(host, port)
    if taken:
        print(
            f"Cannot serve on {host}:{port}: {taken}. Another Gymwright (or another server) may be running there: "
            f"stop it, or choose a free port, e.g. GYMWRIGHT_PORT=8765 make run",
            file=sys.stderr,
            flush=True,
        )
        return 1
    _manage("migrate", "--noinput", "-v", "0")
    _manage("bootstrap")
    _manage("load_demo")
    concurrency = os.environ.get("CELERY_WORKER_CONCURRENCY", "2")
    worker = [sys.executable, "-m", "celery", "-A", "gymwright", "worker", "--loglevel=INFO"]
    commands = {
        "worker": [*worker, f"--concurrency={concurrency}", "--hostname=gymwright@%h"],
        # Dataset health checks run for up to hours on a queue of their own (settings.DATASET_CHECK_QUEUE): one
        # process of its own takes them, so a check never holds the worker previews and builds wait for.
        "datasets worker": [
            *worker,
            "--concurrency=1",
            *("-Q", os.environ.get("GYMWRIGHT_DATASET_CHECK_QUEUE", "datasets")),
            "--hostname=gymwright-datasets@%h",
        ],
        "web": [sys.executable, str(ROOT / "manage.py"), "runserver", "--insecure", "--noreload", f"{host}:{port}"],
    }
    processes: dict[str, subprocess.Popen] = {}
    stop_signal: list[int] = []

    def stop(signum, frame):
        stop_signal.append(signum)  # the main loop below stops the children, once

    # Before any child starts: a signal from now on is the loop's to act on, and no child outlives this process.
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    exit_code = 0
    try:
        for name, command in commands.items():
            if not stop_signal:
                processes[name] = subprocess.Popen(command, cwd=ROOT, start_new_session=True)
        if not stop_signal and _listening(host, port, processes["web"]):
            print(
                f"\nGymwright is running: open http://{host}:{port}/ and log in. Ctrl-C stops the web server and "
                "the workers.\n",
                flush=True,
            )
        while not stop_signal:
            exited = next(((name, process) for name, process in processes.items() if process.poll() is not None), None)
            if exited:
                name, process = exited
                print(f"{name} exited with {process.returncode}; stopping.", flush=True)
                exit_code = process.returncode or 1
                break
            time.sleep(0.2)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # stopping: a second Ctrl-C does not cut it short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_children(processes)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
