"""`make run`: migrate, bootstrap, load the demo, then run the web server and a Celery worker.

Both processes stop cleanly on Ctrl-C. Running it again reuses the database, the
users and the demo content.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], check=True, cwd=ROOT)


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gymwright.settings")
    host = os.environ.get("GYMWRIGHT_HOST", "127.0.0.1")
    port = os.environ.get("GYMWRIGHT_PORT", "8000")
    _manage("migrate", "--noinput", "-v", "0")
    _manage("bootstrap")
    _manage("load_demo")
    concurrency = os.environ.get("CELERY_WORKER_CONCURRENCY", "2")
    processes = {
        "worker": subprocess.Popen([sys.executable, "-m", "celery", "-A", "gymwright", "worker", "--loglevel=INFO",
                                    f"--concurrency={concurrency}", "--hostname=gymwright@%h"], cwd=ROOT),
        "web": subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "runserver", "--insecure", "--noreload",
                                 f"{host}:{port}"], cwd=ROOT),
    }
    print(f"\nGymwright is running: open http://{host}:{port}/ and log in. Ctrl-C stops the web server and the worker.\n",
          flush=True)

    stopping = False

    def stop(signum=None, frame=None):
        nonlocal stopping
        if stopping:
            return
        stopping = True
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    exit_code = 0
    try:
        while not stopping:
            for name, process in processes.items():
                if process.poll() is not None:
                    print(f"{name} exited with {process.returncode}; stopping.", flush=True)
                    exit_code = process.returncode or 1
                    stop()
                    break
            time.sleep(0.5)
    finally:
        stop()
        deadline = time.monotonic() + 20
        for process in processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
