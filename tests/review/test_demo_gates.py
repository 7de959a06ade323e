"""The demo tasks show the happy path: `make run` seeds them, and Run gates on the files task passes
every gate with its own oracle and hack probes, so it is submitted without an admin's override
(hack:echo-prompt scored 0.30 on it: the prompt names report.md and says "Q3", which was all its
report check asked for). Rollouts run through the real runtime (bubblewrap)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from authoring.models import Task
from review import gate_evidence as review_gates
from review import services as review_services
from sandbox import worker

pytestmark = [pytest.mark.bubblewrap]


def test_the_demo_files_task_passes_its_gates_honestly_and_is_submitted_without_override(sandbox_dir, author, settings):
    settings.OPENAI_BASE_URL = ""
    call_command("load_demo", owner=author.username)
    task = Task.objects.get(slug="q3-revenue-summary")
    version = task.latest_version
    runs = review_gates.gates_run(task_version=version, user=author)
    assert {run.policy for run in runs} >= {"oracle", "nop", "hack:echo-prompt", "hack:empty-files"}
    for run in runs:
        for rollout in run.rollouts.all():
            assert worker.rollout_execute(rollout_id=rollout.pk) == "done"
    gates = {result.gate: result for result in review_gates.gates_evaluate(task_version=version)}
    assert {name: result.status for name, result in gates.items()} == dict.fromkeys(gates, "pass"), {
        name: result.message for name, result in gates.items()
    }
    assert gates["oracle"].message == "3 of 3 passed: the reference solution passes"
    assert gates["hack:echo-prompt"].message == "hack:echo-prompt scores 0.00, within its limit of 0.10"
    submission = review_services.task_submit(task=task, user=author)
    assert submission.override_reason == ""
