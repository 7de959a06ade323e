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

import pytest

_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker and not os.environ.get("GYMWRIGHT_WORKER_DATA_DIR"):
    _base = Path(os.environ.get("GYMWRIGHT_DATA_DIR") or Path(__file__).resolve().parent.parent / "var")
    os.environ["GYMWRIGHT_DATA_DIR"] = os.environ["GYMWRIGHT_WORKER_DATA_DIR"] = str(_base / f"pytest-{_worker}")


def pytest_configure(config) -> None:
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        config.pluginmanager.register(EveryTestReported(config), "gymwright-every-test-reported")


class EveryTestReported:
    """On the xdist controller: a run in which every reported test passed, but some collected tests never
    reported, fails. xdist's loadfile, loadscope and loadgroup schedules silently dropped the 43 operations of
    the schemathesis test (`tests/gymwright/test_api_fuzz.py`): "1288 passed" of 1331 collected, exit 0."""

    def __init__(self, config) -> None:
        self.config = config
        self.collected: set[str] | None = None
        self.reported: set[str] = set()

    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        self.collected = set(ids)  # every worker collects the same tests (xdist checks)

    def pytest_runtest_logreport(self, report) -> None:
        self.reported.add(report.nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        if exitstatus != 0 or not self.collected:
            return
        missing = sorted(self.collected - self.reported)
        if missing:
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(
                    f"{len(missing)} of {len(self.collected)} collected tests never reported "
                    f"(an xdist schedule dropped them), e.g. {missing[:3]}",
                    red=True,
                    bold=True,
                )
            session.exitstatus = 1
