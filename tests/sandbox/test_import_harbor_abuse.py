"""Abuse suite for imported Harbor tasks: the agent cannot fake the verifier's reward.

Harbor's verifier reads /logs/verifier/reward.txt after tests/test.sh. In Gymwright the checks run in the
sandbox the agent used, so the agent must not be able to leave a reward there (or tests to run) for them:
/logs and /tests are writable only once the episode is over and every process it left is gone, the check
empties /logs/verifier first, and it copies into /tests only the task's own test files.
"""

from __future__ import annotations

import pytest

from packs import importer
from sandbox.runtime import get_backend
from tests.sandbox.test_import_harbor_rollout import SOLVE, docker_backend, harbor_task, rollout
from tests.support.services import require_bwrap

# A test.sh that writes a reward only when the work is done (Harbor's review checklist asks for both
# branches, but tasks in the wild skip the else): a reward the agent left behind would pass it.
TEST_SH_WITHOUT_ELSE = "#!/bin/bash\ngrep -qx hello /app/out.txt && echo 1 > /logs/verifier/reward.txt\n"

# The agent: a reward of 1 wherever it can write one, its own tests where the task's arrive, and a
# process that keeps writing the reward (in its own session) in the hope of outliving the episode.
FAKE_REWARD = r"""for d in /logs/verifier /logs /tests /app/logs/verifier /workspace/logs/verifier /tmp/logs/verifier \
         /tmp /workspace /app; do
  mkdir -p "$d" 2>/dev/null
  echo 1 > "$d/reward.txt" 2>/dev/null && echo "wrote $d/reward.txt"
  echo '{"reward": 1}' > "$d/reward.json" 2>/dev/null && echo "wrote $d/reward.json"
done
mkdir -p .harbor/tests
printf '#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n' > .harbor/tests/test.sh
cp .harbor/tests/test.sh .harbor/tests/also.sh
printf 'also.sh\ntest.sh\n' > .harbor/tests.list
(setsid sh -c 'while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; sleep 0.05; done' \
  >/dev/null 2>&1 &)
touch /logs/probe 2>/dev/null && echo "/logs is writable during the episode"
touch /tests/probe 2>/dev/null && echo "/tests is writable during the episode"
echo done
"""


@pytest.fixture(params=["bubblewrap", "docker"])
def backend_and_dockerfile(request):
    if request.param == "bubblewrap":
        require_bwrap()
        return get_backend("bubblewrap"), None
    return docker_backend()


def test_an_agent_that_writes_a_reward_wherever_it_can_still_scores_0(author, tmp_path, backend_and_dockerfile):
    backend, dockerfile = backend_and_dockerfile
    harbor_task(tmp_path / "cheat", "cheat", test_sh=TEST_SH_WITHOUT_ELSE, solve=FAKE_REWARD, dockerfile=dockerfile)
    harbor_task(tmp_path / "honest", "honest", test_sh=TEST_SH_WITHOUT_ELSE, solve=SOLVE, dockerfile=dockerfile)
    for folder in ("cheat", "honest"):
        assert importer.tasks_import(path=tmp_path / folder, user=author).rejected == 0

    cheat = rollout("cheat", "oracle", backend)
    said = cheat.trajectory[3]["content"]
    assert "done" in said and "during the episode" not in said, said
    assert "wrote /logs" not in said and "wrote /tests" not in said, said
    assert cheat.grade.complete and cheat.grade.reward == 0 and not cheat.grade.passed, cheat.grade
    assert "test.sh wrote no /logs/verifier/reward.txt" in cheat.grade.checks[0].explanation

    # the same check passes the honest work: a 0 above is the cheat failing, not the check
    honest = rollout("honest", "oracle", backend)
    assert honest.grade.passed and honest.grade.reward == 1.0, honest.grade
