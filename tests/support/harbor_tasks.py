"""A Harbor task folder written for Gymwright's tests, shaped as real datasets' tasks are: a task.toml that uses
every section (agent and verifier timeouts, [environment] limits and network, [metadata] of several kinds,
[verifier.env], [solution.env], a table Harbor does not know), a Dockerfile that COPYs and ADDs from its build
context into its own WORKDIR (/app), scripts that start with #!/bin/bash and `set -euo pipefail`, and a
test.sh that writes /logs/verifier/reward.txt."""

from __future__ import annotations

from pathlib import Path

TASK_TOML = """schema_version = "1.4"
artifacts = ["/app/summary.txt"]

[task]
name = "gymwright-tests/word-tally"
description = "Count the words of a text file."
keywords = ["text", "counting"]

[metadata]
difficulty = "medium"
category = "text-processing"
expert_time_estimate_min = 12.5
junior_time_estimate_min = 40
reviewed_on = 2026-03-01
notes = { origin = "written for Gymwright's tests", tier = 2 }

[verifier]
timeout_sec = 240.0

[verifier.env]
TALLY_MODE = "strict"
JUDGE_KEY = "${JUDGE_KEY:-}"

[agent]
timeout_sec = 1800.0

[environment]
build_timeout_sec = 900.0
cpus = 2
memory_mb = 3072
storage_mb = 4096
gpus = 0
allow_internet = false
mcp_servers = []

[solution.env]
TALLY_LABEL = "words"

[x_lab]
queue = "nightly"
weights = [0.5, 0.25]
"""

INSTRUCTION = "Count the words in /app/words.txt and write `words: N` to /app/summary.txt.\n"

# The build context: data into the WORKDIR, a checker script and a config file elsewhere in the image.
DOCKERFILE = """FROM {base}

WORKDIR /app
COPY data/words.txt /app/words.txt
COPY scripts/ /opt/tally/
ADD tally.ini /etc/tally.ini
"""

CONTEXT = {
    "data/words.txt": "alpha beta gamma\ndelta epsilon\n",
    "scripts/tally-check.sh": "#!/bin/sh\n# the image's own checker: its config came from the build context\n"
    'grep -q "^label=words$" /etc/tally.ini\n',
    "tally.ini": "label=words\n",
}

# bash as written: `set -euo pipefail` (dash refuses -o pipefail), and TALLY_LABEL from [solution.env] (set -u
# stops the script when it is missing).
SOLVE = """#!/bin/bash
set -euo pipefail
count=$(cat /app/words.txt | wc -w | tr -d ' ')
echo "${TALLY_LABEL}: ${count}" > /app/summary.txt
"""

# A file beside solve.sh (Harbor mounts solution/ at /solution), which the export must write back.
SOLUTION_NOTES = "wc -w counts the words; TALLY_LABEL names them.\n"

# TALLY_MODE comes from [verifier.env]; /opt/tally/tally-check.sh and /etc/tally.ini from the image's build.
TEST_SH = """#!/bin/bash
set -uo pipefail
mkdir -p /logs/verifier
expected=$(cat /app/words.txt | wc -w | tr -d ' ')
if [ "${TALLY_MODE:-}" = strict ] && [ "$(cat /app/summary.txt 2>/dev/null)" = "words: ${expected}" ] \\
    && sh /opt/tally/tally-check.sh; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def write_word_tally(root: Path, *, base: str, name: str = "word-tally", task_toml: str = TASK_TOML) -> Path:
    """The task's folder under `root`, its image built FROM `base`."""
    folder = root / name
    files = {
        "task.toml": task_toml,
        "instruction.md": INSTRUCTION,
        "environment/Dockerfile": DOCKERFILE.format(base=base),
        **{f"environment/{path}": text for path, text in CONTEXT.items()},
        "solution/solve.sh": SOLVE,
        "solution/NOTES.md": SOLUTION_NOTES,
        "tests/test.sh": TEST_SH,
    }
    for relative, text in files.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return folder
