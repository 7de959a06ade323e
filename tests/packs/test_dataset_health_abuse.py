"""The dataset health report against hostile tasks: bounded on the host (a task's time, the stored report's size),
every task's code only in its sandbox."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from packs.services import health
from tests.packs.health_fixtures import REWARD, shell_dockerfile, write_dataset
from tests.support.services import require_docker


@pytest.mark.timeout(900)
def test_a_task_that_hangs_is_stopped_at_its_budget_and_reported_not_runnable(tmp_path):
    from tests.support.images import busybox_image

    shell = shell_dockerfile(busybox_image(require_docker()))
    root = write_dataset(
        tmp_path / "hostile",
        {
            "hangs": {
                "instruction": "Wait.\n",
                # the reference solution never ends, and floods its output while it runs
                "solve": "#!/bin/bash\nwhile true; do echo flood; done\n",
                "tests": {"test.sh": f"#!/bin/bash\nsleep 100000\necho 1 > {REWARD}\n"},
                "dockerfile": shell,
            }
        },
    )
    out = StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("check_dataset", str(root), "--task-timeout", "30", "--json", str(tmp_path / "r.json"), stdout=out)
    assert raised.value.returncode == 1
    [entry] = json.loads((tmp_path / "r.json").read_text())["tasks"]
    assert entry["verdict"] == "not_runnable", entry
    assert entry["reason"].startswith("its rollouts ran over the time a task may take here (30 s;"), entry
    assert list(entry["rollouts"]) == ["oracle"]  # nothing else started once its budget was spent


def test_a_stored_report_past_its_size_keeps_each_tasks_verdict_and_reason(settings):
    settings.DATASET_CHECK_REPORT_MAX_MB = 1
    entry = {"task": "t", "where": "d/t", "verdict": "broken", "reason": "r", "seconds": 1, "gates": []}
    document = {
        "schema": "gymwright.dataset-health/v1",
        "tasks": [{**entry, "gates": [{"message": "x" * 1000}] * 20} for _ in range(100)],
    }
    bounded = health._bounded(document)
    assert len(json.dumps(bounded)) < 1024 * 1024
    assert bounded["tasks"][0] == {key: entry[key] for key in ("task", "where", "verdict", "reason", "seconds")}
    assert bounded["truncated"] == "each task's gates, findings and rollouts were left out"


@pytest.mark.parametrize("probes", ["verifier-tamperr", "hack:verifier-tamper,no-such-probe", " , "])
def test_probe_names_that_name_no_probe_are_a_usage_error_not_a_healthy_report(tmp_path, probes):
    """`--probes` with a misspelt name (or none) ran no probe at all, and a task whose verifier any of them would
    have fooled came out healthy: it is a usage error, before anything is read or run."""
    (tmp_path / "dataset").mkdir()
    with pytest.raises(CommandError) as raised:
        call_command("check_dataset", str(tmp_path / "dataset"), "--probes", probes, stdout=StringIO())
    assert raised.value.returncode == 2
    assert "--probes" in str(raised.value) and "verifier-tamper" in str(raised.value), str(raised.value)


@pytest.mark.parametrize("limit", ["--task-timeout", "--time-limit"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_time_limit_that_is_no_finite_positive_number_is_a_usage_error(tmp_path, limit, value):
    """`nan` passed the `<= 0` test, and every task then came out "the check itself failed" (exit 1)."""
    (tmp_path / "dataset").mkdir()
    with pytest.raises(CommandError) as raised:
        call_command("check_dataset", str(tmp_path / "dataset"), limit, value, stdout=StringIO())
    assert raised.value.returncode == 2 and "--task-timeout and --time-limit" in str(raised.value)


@pytest.mark.django_db
def test_a_probe_setting_that_names_no_probe_fails_the_stored_report_with_the_reason(settings, author):
    """GYMWRIGHT_DATASET_CHECK_PROBES misspelt: the import's health report fails naming the setting, instead of
    running no probe and calling the tasks healthy."""
    from packs.models import DatasetCheck

    settings.DATASET_CHECK_PROBES = ["verifier-tamperr"]
    check = DatasetCheck.objects.create(source="d", created_by=author, subjects=[{"where": "d/t", "task_version": 1}])
    health.dataset_check_run(check_id=check.pk)
    check.refresh_from_db()
    assert check.status == DatasetCheck.Status.FAILED and check.document is None
    assert "GYMWRIGHT_DATASET_CHECK_PROBES" in check.error and "'verifier-tamperr'" in check.error, check.error


@pytest.mark.django_db
def test_a_task_whose_rollouts_outlast_the_reapers_wait_is_not_reaped_while_they_run(settings, author, monkeypatch):
    """The reaper fails a running check silent for longer than a task may take (+300 s). The check beat only when a
    task's entry was done, and one task may take longer than that (its image built by its first rollout, then its
    whole budget): a check still at work was failed as dead. Each rollout's start now beats."""
    from datetime import timedelta

    from django.utils import timezone

    from packs.models import DatasetCheck

    clock = [timezone.now()]
    monkeypatch.setattr(health.timezone, "now", lambda: clock[0])
    check = DatasetCheck.objects.create(source="d", created_by=author, subjects=[])
    reaped = []

    def one_long_task(subjects, *, backend, limits, on_entry=None, on_rollout=None):
        for policy in ("oracle", "nop", "hack:exit-zero"):
            if on_rollout is not None:
                on_rollout(f"t: {policy}")
            clock[0] += timedelta(seconds=settings.DATASET_CHECK_TASK_S / 2)  # this rollout (and a build) runs
            reaped.append(health.dataset_checks_reap_stale(now=clock[0]))
        return []

    monkeypatch.setattr(health.runner, "check_subjects", one_long_task)
    monkeypatch.setattr(health, "_docker_backend", lambda: None)
    monkeypatch.setattr(health, "HEARTBEAT_S", 0)
    health.dataset_check_run(check_id=check.pk)
    check.refresh_from_db()
    assert reaped == [0, 0, 0] and check.status == DatasetCheck.Status.DONE, (reaped, check.error)
