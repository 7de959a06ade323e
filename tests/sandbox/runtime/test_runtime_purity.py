"""sandbox.runtime is a pure core: importing it (and running its CLI) pulls in no Django."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_runtime_imports_no_django_and_no_django_apps():
    code = (
        "import sys, sandbox.runtime, sandbox.runtime.cli, sandbox.runtime.backends.docker, "
        "sandbox.runtime.backends.bubblewrap\n"
        "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.') "
        "or m.startswith(('authoring', 'grading.models', 'sandbox.models', 'sandbox.tasks')))\n"
        "print(bad)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
