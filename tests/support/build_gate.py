"""A hold on pack builds for fault tests, in a real worker: `celery worker --include tests.support.build_gate` with
GYMWRIGHT_TEST_BUILD_HELD=<path> set. A build then stops after its first task, writes its pid to that path and
waits to be killed, so a test kills the worker mid-build at a known point instead of racing the build."""

from __future__ import annotations

import os
import time
from pathlib import Path

from packs.services import builds

_task_items = builds._task_items


def _held_after_the_first_task(pack_version):
    marker = os.environ["GYMWRIGHT_TEST_BUILD_HELD"]
    for item in _task_items(pack_version):
        yield item
        Path(marker).write_text(str(os.getpid()))
        while True:
            time.sleep(1)


if os.environ.get("GYMWRIGHT_TEST_BUILD_HELD"):
    builds._task_items = _held_after_the_first_task
