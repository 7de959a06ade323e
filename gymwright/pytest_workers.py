"""pytest plugin (`-p gymwright.pytest_workers`, set in pyproject.toml): the suite's parallel workers
each keep a data directory of their own.

`make test` runs the suite in two pytest-xdist processes. pytest-django gives each its own test
database; everything else the settings put under GYMWRIGHT_DATA_DIR (the file cache that holds
throttle counts, pack scratch, the filesystem broker, the secret key) would be shared. The
variable is set here, when pytest loads its early plugins and before pytest-django reads the
settings, so that the worker's settings and every server, Celery worker or command a test
starts read the same folder. Without xdist this does nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker and not os.environ.get("GYMWRIGHT_WORKER_DATA_DIR"):
    _base = Path(os.environ.get("GYMWRIGHT_DATA_DIR") or Path(__file__).resolve().parent.parent / "var")
    os.environ["GYMWRIGHT_DATA_DIR"] = os.environ["GYMWRIGHT_WORKER_DATA_DIR"] = str(_base / f"pytest-{_worker}")
