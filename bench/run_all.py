"""Runs every benchmark in bench/ in turn (`make bench`)."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    failed = 0
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        failed |= subprocess.run([sys.executable, str(script)], cwd=HERE.parent).returncode != 0
    sys.exit(1 if failed else 0)
