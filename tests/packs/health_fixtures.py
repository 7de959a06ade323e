"""Harbor task folders for the dataset health report, one per defect class and one healthy, written for these
tests (none is copied from a public dataset). Each is what `harbor tasks init` makes (task.toml, instruction.md,
environment/Dockerfile, solution/solve.sh, tests/test.sh writing /logs/verifier/reward.txt), filled in.

Their images are built locally FROM the test images (tests/support/images.py; nothing is pulled): the shell tasks
share one Dockerfile (busybox, /bin/bash as its sh, WORKDIR /app), the Python ones another (the pytest image), so
the whole set builds three images."""

from __future__ import annotations

from pathlib import Path

REWARD = "/logs/verifier/reward.txt"
TASK_TOML = """version = "1.0"

[metadata]
difficulty = "easy"
category = "testing"

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 120.0
"""


def shell_dockerfile(busybox: str) -> str:
    return f"FROM {busybox}\nRUN printf '#!/bin/sh\\nexec /bin/sh \"$@\"\\n' > /bin/bash && chmod 755 /bin/bash\nWORKDIR /app\n"


def python_dockerfile(pytest_image: str) -> str:
    return f"FROM {pytest_image}\nWORKDIR /app\n"


# name -> (instruction, solve.sh, tests/ files, which Dockerfile, what the report must say)
def fixtures(busybox: str, pytest_image: str) -> dict[str, dict]:
    shell = shell_dockerfile(busybox)
    python = python_dockerfile(pytest_image)
    sum_instruction = "Compute the sum of the whole numbers from 1 to 10 and write it to /app/answer.txt.\n"
    factorial = "Compute 10! (ten factorial) and write it, digits only, to /app/answer.txt.\n"
    return {
        # Healthy: the verifier runs the agent's program on its own input and writes a reward either way.
        "sort-numbers": {
            "instruction": "Write a shell script /app/sort.sh that reads whole numbers, one per line, on standard "
            "input and prints them in ascending numeric order, one per line.\n",
            "solve": "#!/bin/bash\nprintf '#!/bin/sh\\nsort -n\\n' > /app/sort.sh\nchmod 755 /app/sort.sh\n",
            "tests": {
                "test.sh": "#!/bin/bash\n"
                "out=$(printf '10\\n9\\n100\\n3\\n' | sh /app/sort.sh 2>/dev/null)\n"
                "want=$(printf '3\\n9\\n10\\n100')\n"
                f'if [ "$out" = "$want" ]; then echo 1; else echo 0; fi > {REWARD}\n'
            },
            "dockerfile": shell,
        },
        # An unconditional reward: whatever the agent did, 1.
        "always-one": {
            "instruction": sum_instruction,
            "solve": "#!/bin/bash\necho 55 > /app/answer.txt\n",
            "tests": {"test.sh": f"#!/bin/bash\n# every run is a success\necho 1 > {REWARD}\n"},
            "dockerfile": shell,
        },
        # The verifier runs a checker that ships in the agent's work directory: the agent can rewrite it.
        "writable-checker": {
            "instruction": sum_instruction + "The checker /app/run_tests.sh tells you whether the answer is right.\n",
            "solve": "#!/bin/bash\necho 55 > /app/answer.txt\n",
            "tests": {"test.sh": f"#!/bin/bash\nif bash /app/run_tests.sh; then echo 1; else echo 0; fi > {REWARD}\n"},
            "dockerfile": shell
            + "RUN printf '#!/bin/sh\\ngrep -qx 55 /app/answer.txt\\n' > /app/run_tests.sh && chmod 755 /app/run_tests.sh\n",
        },
        # The tests are copied next to the agent's files and imported from there: a planted __pycache__ wins.
        "pycache-leak": {
            "instruction": factorial,
            "solve": "#!/bin/bash\necho 3628800 > /app/answer.txt\n",
            "tests": {
                "test.sh": "#!/bin/bash\nmkdir -p /app/checks\ncp /tests/test_outputs.py /app/checks/\n"
                f"cd /app/checks && python3 -m unittest test_outputs && echo 1 > {REWARD} || echo 0 > {REWARD}\n",
                "test_outputs.py": "import unittest\n\n\nclass TestAnswer(unittest.TestCase):\n"
                "    def test_answer(self):\n        with open('/app/answer.txt') as handle:\n"
                "            self.assertEqual(handle.read().strip(), '3628800')\n",
            },
            "dockerfile": python,
        },
        # pytest runs in the agent's folder: a conftest.py there decides.
        "conftest-plant": {
            "instruction": factorial,
            "solve": "#!/bin/bash\necho 3628800 > /app/answer.txt\n",
            "tests": {
                "test.sh": "#!/bin/bash\ncp /tests/test_outputs.py /app/test_outputs.py\n"
                f"cd /app && python3 -m pytest -q -p no:cacheprovider test_outputs.py && echo 1 > {REWARD} "
                f"|| echo 0 > {REWARD}\n",
                "test_outputs.py": "def test_answer():\n    with open('/app/answer.txt') as handle:\n"
                "        assert handle.read().strip() == '3628800'\n",
            },
            "dockerfile": python,
        },
        # The verdict depends on when the verifier runs: the answer must be younger than an hour.
        "clock-verifier": {
            "instruction": sum_instruction,
            "solve": "#!/bin/bash\necho 55 > /app/answer.txt\n",
            "tests": {
                "test.sh": "#!/bin/bash\nage=$(( $(date +%s) - $(stat -c %Y /app/answer.txt 2>/dev/null || echo 0) ))\n"
                f'if [ "$(cat /app/answer.txt 2>/dev/null)" = 55 ] && [ "$age" -lt 3600 ]; then echo 1; else echo 0; '
                f"fi > {REWARD}\n"
            },
            "dockerfile": shell,
        },
        # Only a string the instruction shows is looked for: echoing it is enough.
        "literal-verifier": {
            "instruction": "Count the lines of /etc/passwd and print the count. When you are done, write "
            "REPORT COMPLETE to /app/status.txt.\n",
            "solve": "#!/bin/bash\nwc -l < /etc/passwd\necho 'REPORT COMPLETE' > /app/status.txt\n",
            "tests": {
                "test.sh": f'#!/bin/bash\nif grep -q "REPORT COMPLETE" /app/status.txt; then echo 1; else echo 0; fi > {REWARD}\n'
            },
            "dockerfile": shell,
        },
        # set -e ends test.sh at the first failing command, before any reward is written.
        "errexit-verifier": {
            "instruction": "Multiply 6 by 7 and write the product to /app/answer.txt.\n",
            "solve": "#!/bin/bash\necho 42 > /app/answer.txt\n",
            "tests": {
                "test.sh": "#!/bin/bash\nset -e\nresult=$(cat /app/answer.txt)\n"
                f'if [ "$result" = 42 ]; then echo 1 > {REWARD}; else echo 0 > {REWARD}; fi\n'
            },
            "dockerfile": shell,
        },
        # The agent's image holds the reference solution, and a file named after the answer.
        "leaky-image": {
            "instruction": factorial,
            "solve": "#!/bin/bash\necho 3628800 > /app/answer.txt\n",
            "tests": {
                "test.sh": '#!/bin/bash\nif [ "$(cat /app/answer.txt 2>/dev/null)" = "3628800" ]; then echo 1; '
                f"else echo 0; fi > {REWARD}\n"
            },
            "dockerfile": shell
            + "RUN mkdir -p /opt && printf '#!/bin/bash\\necho 3628800 > /app/answer.txt\\n' > /opt/solve.sh "
            "&& touch /app/expected-3628800.txt\n",
        },
        # Its base image is not on this engine and cannot be pulled: not runnable here.
        "absent-base": {
            "instruction": sum_instruction,
            "solve": "#!/bin/bash\necho 55 > /app/answer.txt\n",
            "tests": {
                "test.sh": f"#!/bin/bash\ngrep -qx 55 /app/answer.txt && echo 1 > {REWARD} || echo 0 > {REWARD}\n"
            },
            "dockerfile": "FROM gymwright-test/absent-base:1\nWORKDIR /app\n",
        },
    }


def write_dataset(root: Path, tasks: dict[str, dict]) -> Path:
    for name, task in tasks.items():
        folder = root / name
        for sub in ("environment", "solution", "tests"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        (folder / "task.toml").write_text(TASK_TOML)
        (folder / "instruction.md").write_text(task["instruction"])
        (folder / "environment" / "Dockerfile").write_text(task["dockerfile"])
        (folder / "solution" / "solve.sh").write_text(task["solve"])
        for path, text in task["tests"].items():
            (folder / "tests" / path).write_text(text)
    return root
