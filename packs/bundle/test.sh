#!/bin/bash
# Harbor verifier: grade the agent's work with the pack's bundled Gymwright grader.
# Writes /logs/verifier/reward.json, reward.txt and grade.json (every check's result). The verifier image
# (tests/Dockerfile) has the grader's dependencies baked in; the agent's /workspace arrives as an artifact.
set -u
mkdir -p /logs/verifier
PYTHON="$(command -v python3 || command -v python || true)"
if [ -z "$PYTHON" ]; then
  echo "the verifier needs python3 in the task's image" >&2
  echo 0 > /logs/verifier/reward.txt
  exit 1
fi
# -I: no PYTHON* variable, user site or script folder changes the grader; no bytecode is read or written
# (the checks' own Python gets the same from grade.py).
# grade.py beside this script: /tests, or /tests/gymwright beside the tests of a task that came in as Harbor.
HERE="$(cd "$(dirname "$0")" && pwd)"
exec "$PYTHON" -I -B -X pycache_prefix=/dev/null/gymwright-no-bytecode "$HERE/grade.py"
