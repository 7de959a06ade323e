#!/bin/bash
# Harbor verifier: grade the agent's work with the pack's bundled Gymwright grader.
# Writes /logs/verifier/reward.txt (and grade.json with every check's result).
set -u
mkdir -p /logs/verifier
PYTHON="$(command -v python3 || command -v python || true)"
if [ -z "$PYTHON" ]; then
  echo "the verifier needs python3 in the task's image" >&2
  echo 0 > /logs/verifier/reward.txt
  exit 1
fi
if ! "$PYTHON" -c 'import pydantic' >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q -r /tests/requirements.txt >/dev/null 2>&1 || true
fi
exec "$PYTHON" /tests/grade.py
