"""Preview services: creating runs, the rollout status machine, claims, cancel, reaping."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from authoring.models import AuditEvent
from gymwright.errors import DomainError, NotAllowed
from sandbox import services, worker
from sandbox.models import PreviewRun, Rollout
from tests.sandbox.factories import make_task

#: The oracle of this task writes a text file and a binary one: what the viewer shows as text, and what it does not.
WITH_BINARY = "echo 42 > answer.txt; printf '\\000\\001' > blob.bin"


def start(version, user, *, policy="oracle", n=2, enqueued=None, capture=None):
    if capture is None:
        return services.preview_run_create(task_version=version, user=user, policy=policy, n=n)
    with capture(execute=True):
        return services.preview_run_create(task_version=version, user=user, policy=policy, n=n)


def test_a_preview_makes_n_queued_rollouts_and_enqueues_one_job_each_after_commit(
    version, author, enqueued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        preview_run = services.preview_run_create(task_version=version, user=author, policy="oracle", n=3)
        assert enqueued == []  # nothing is sent before the rows are committed
    for callback in callbacks:
        callback()
    rollouts = list(preview_run.rollouts.order_by("index"))
    assert [r.status for r in rollouts] == ["queued"] * 3 and [r.index for r in rollouts] == [0, 1, 2]
    assert sorted(rollout_id for rollout_id, _ in enqueued) == sorted(r.pk for r in rollouts)
    soft, hard = services.rollout_time_limits(version)
    assert all(options["soft_time_limit"] == soft and options["time_limit"] == hard for _, options in enqueued)
    assert soft > 600 and hard > soft  # the task's 600 s timeout plus the worker's margin
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.PREVIEW)
    assert event.actor == author and event.data["preview_run"] == preview_run.pk and event.data["n"] == 3


def test_a_rollout_s_time_limit_leaves_room_for_the_grade_s_judging(version, settings):
    soft, _ = services.rollout_time_limits(version)  # defaults: the 600 s margin covers 300 s + 60 s of judging
    settings.JUDGE_GRADE_DEADLINE_S, settings.JUDGE_TIMEOUT_S = 3600, 120
    longer, hard = services.rollout_time_limits(version)
    assert longer >= 600 + 3600 + 120 and longer > soft and hard > longer  # the task's 600 s, then judging


@pytest.mark.parametrize("n", [0, 65, -1, "many", None, 2.5, True])
def test_it_refuses_n_outside_1_to_64_with_a_clear_error(version, author, n, enqueued):
    with pytest.raises(DomainError) as excinfo:
        services.preview_run_create(task_version=version, user=author, policy="nop", n=n)
    assert (
        excinfo.value.details[0]["pointer"] == "/n" and "1" in excinfo.value.message and "64" in excinfo.value.message
    )
    assert not PreviewRun.objects.exists() and not Rollout.objects.exists()


@pytest.mark.parametrize("policy", ["", "random", "oracle:x", None])
def test_it_refuses_an_unknown_policy(version, author, policy):
    with pytest.raises(DomainError) as excinfo:
        services.preview_run_create(task_version=version, user=author, policy=policy, n=1)
    assert excinfo.value.details[0]["pointer"] == "/policy"


def test_a_probe_keeps_its_text_and_the_oracle_needs_a_reference_solution(author, version):
    preview_run = services.preview_run_create(task_version=version, user=author, policy="probe: Thought process:", n=1)
    assert preview_run.policy == "probe: Thought process:"
    assert (preview_run.policy_kind, preview_run.policy_argument) == ("probe", " Thought process:")
    oracle = services.preview_run_create(task_version=version, user=author, policy=" Oracle ", n=1)
    assert (oracle.policy, oracle.policy_kind, oracle.policy_argument) == ("oracle", "oracle", "")
    bare = make_task(author=author, slug="no-solution", script=None, answer=None)
    with pytest.raises(DomainError, match="no reference solution"):
        services.preview_run_create(task_version=bare.latest_version, user=author, policy="oracle", n=1)


def test_the_model_policy_needs_a_configured_endpoint(version, author, settings):
    settings.OPENAI_BASE_URL = ""
    with pytest.raises(DomainError) as excinfo:
        services.preview_run_create(task_version=version, user=author, policy="model", n=1)
    assert excinfo.value.code == "no_policy_model"


def test_users_without_a_role_cannot_start_previews(version, nobody):
    with pytest.raises(NotAllowed):
        services.preview_run_create(task_version=version, user=nobody, policy="nop", n=1)


def test_a_reviewer_may_start_a_preview(version, reviewer):
    assert services.preview_run_create(task_version=version, user=reviewer, policy="nop", n=1).n == 1


def test_a_rollout_claimed_twice_is_run_once(version, author, monkeypatch):
    preview_run = start(version, author, n=1)
    rollout = preview_run.rollouts.get()
    assert services.rollout_claim(rollout_id=rollout.pk, worker="w1") == 1
    assert services.rollout_claim(rollout_id=rollout.pk, worker="w2") is None
    rollout.refresh_from_db()
    assert rollout.status == "running" and rollout.worker == "w1" and rollout.attempts == 1
    calls = []
    monkeypatch.setattr(worker, "_run_in_sandbox", lambda **kw: calls.append(kw))  # a spy: must not be called
    assert worker.rollout_execute(rollout_id=rollout.pk, worker="w3") == "skipped"
    assert calls == []


def test_executing_a_rollout_stores_trajectory_files_and_the_grade(sandbox_dir, author):
    version = make_task(author=author, script=WITH_BINARY).latest_version
    preview_run = start(version, author, n=1)
    rollout = preview_run.rollouts.get()
    assert worker.rollout_execute(rollout_id=rollout.pk, worker="w1") == "done"  # a real bubblewrap rollout
    rollout.refresh_from_db()
    assert rollout.status == "done" and rollout.reward == 1.0 and rollout.passed is True
    assert rollout.answer == "42" and rollout.steps == 2 and rollout.duration_ms is not None
    assert rollout.trajectory[2]["tool_calls"][0]["name"] == "bash"
    files = {f["path"]: f for f in rollout.workspace_files}
    assert files["answer.txt"]["content"] == "42\n" and files["blob.bin"]["content"] is None
    assert rollout.grade is not None and rollout.grade.rollout_id == rollout.pk and rollout.grade.source == "rollout"
    assert [c.check_id for c in rollout.grade.check_results.order_by("position")] == ["says_42", "report_exists"]
    preview_run.refresh_from_db()
    assert preview_run.status == "done" and preview_run.finished_at is not None
    assert preview_run.summary["mean_reward"] == 1.0 and preview_run.summary["pass_rate"] == 1.0
    assert preview_run.summary["verdict"]["ok"] is True


def test_a_rollout_that_raises_is_an_error_that_says_why(version, author, monkeypatch):
    preview_run = start(version, author, n=1)
    rollout = preview_run.rollouts.get()

    def boom(**kwargs):
        raise RuntimeError("the image python:9 does not exist")

    monkeypatch.setattr(worker, "_run_in_sandbox", boom)
    assert worker.rollout_execute(rollout_id=rollout.pk) == "error"
    rollout.refresh_from_db()
    assert rollout.status == "error" and "python:9 does not exist" in rollout.error
    preview_run.refresh_from_db()
    assert preview_run.status == "done" and preview_run.summary["counts"]["error"] == 1


def test_a_transient_sandbox_failure_is_retried_once_then_reported(
    version, author, monkeypatch, enqueued, django_capture_on_commit_callbacks
):
    from sandbox.runtime.spec import SandboxError

    preview_run = start(version, author, n=1)
    rollout = preview_run.rollouts.get()

    def flaky(**kwargs):
        raise SandboxError("docker engine unreachable", permanent=False)

    monkeypatch.setattr(worker, "_run_in_sandbox", flaky)
    with django_capture_on_commit_callbacks(execute=True):
        assert worker.rollout_execute(rollout_id=rollout.pk) == "requeued"
    rollout.refresh_from_db()
    assert rollout.status == "queued" and [r for r, _ in enqueued] == [rollout.pk]
    assert worker.rollout_execute(rollout_id=rollout.pk) == "error"
    rollout.refresh_from_db()
    assert rollout.status == "error" and rollout.attempts == 2 and "unreachable" in rollout.error


def test_an_error_in_the_result_without_a_grade_is_an_error(sandbox_dir, author):
    from authoring import services as authoring_services

    authoring_services.environment_create(
        slug="broken-setup", name="broken", author=author, spec={"network": "none", "setup": "echo no disk >&2; exit 2"}
    )
    version = make_task(author=author, environment_slug="broken-setup").latest_version
    preview_run = start(version, author, n=1)
    rollout = preview_run.rollouts.get()
    assert worker.rollout_execute(rollout_id=rollout.pk) == "error"  # the real sandbox's setup fails
    rollout.refresh_from_db()
    assert rollout.status == "error" and rollout.grade is None
    assert "setup script" in rollout.error and "no disk" in rollout.error, rollout.error


def _age(rollout_id, seconds):
    Rollout.objects.filter(pk=rollout_id).update(heartbeat_at=timezone.now() - timedelta(seconds=seconds))


def test_a_stale_rollout_is_requeued_once_then_failed_as_worker_lost(
    version, author, settings, enqueued, django_capture_on_commit_callbacks
):
    settings.ROLLOUT_STALE_AFTER_S = 60
    preview_run = start(version, author, n=2)
    stale, fresh = preview_run.rollouts.order_by("index")
    services.rollout_claim(rollout_id=stale.pk, worker="dead")
    services.rollout_claim(rollout_id=fresh.pk, worker="alive")
    _age(stale.pk, 61)
    _age(fresh.pk, 30)
    with django_capture_on_commit_callbacks(execute=True):
        result = services.rollouts_reap_stale()
    assert result["requeued"] == [stale.pk] and result["failed"] == []
    assert [r for r, _ in enqueued] == [stale.pk]
    stale.refresh_from_db(), fresh.refresh_from_db()
    assert stale.status == "queued" and fresh.status == "running"
    assert "worker lost" in stale.progress["note"]
    # Second life: claimed again, dies again → error, never back to the queue.
    assert services.rollout_claim(rollout_id=stale.pk, worker="dead-again") == 2
    _age(stale.pk, 61)
    result = services.rollouts_reap_stale()
    assert result["failed"] == [stale.pk]
    stale.refresh_from_db()
    assert stale.status == "error" and stale.error.startswith("worker lost")


def test_a_worker_whose_claim_was_reaped_cannot_overwrite_the_new_attempt(
    sandbox_dir, version, author, monkeypatch, enqueued
):
    preview_run = start(version, author, n=1)
    rollout = preview_run.rollouts.get()
    run_in_sandbox = worker._run_in_sandbox

    def reaped_while_running(**kwargs):  # fault injection: the reaper runs while the real rollout does
        _age(rollout.pk, 10_000)
        services.rollouts_reap_stale()  # another process decides this worker is dead
        assert services.rollout_claim(rollout_id=rollout.pk, worker="second") == 2
        return run_in_sandbox(**kwargs)

    monkeypatch.setattr(worker, "_run_in_sandbox", reaped_while_running)
    assert worker.rollout_execute(rollout_id=rollout.pk, worker="first") == "lost"
    rollout.refresh_from_db()
    assert rollout.status == "running" and rollout.worker == "second" and rollout.grade is None


def test_the_reap_command_reports_what_it_did(version, author, capsys, enqueued):
    preview_run = start(version, author, n=1)
    rollout = preview_run.rollouts.get()
    services.rollout_claim(rollout_id=rollout.pk, worker="gone")
    _age(rollout.pk, 500)
    call_command("reap_rollouts", "--stale-after", "100")
    assert "re-queued 1" in capsys.readouterr().out
    rollout.refresh_from_db()
    assert rollout.status == "queued"


def test_cancel_stops_queued_rollouts_and_flags_running_ones(sandbox_dir, version, author, monkeypatch):
    preview_run = start(version, author, n=3)
    first, second, third = preview_run.rollouts.order_by("index")
    attempt = services.rollout_claim(rollout_id=first.pk, worker="w")
    services.preview_run_cancel(preview_run=preview_run, user=author)
    second.refresh_from_db(), third.refresh_from_db()
    assert second.status == third.status == "cancelled"
    preview_run.refresh_from_db()
    assert preview_run.cancel_requested and preview_run.status == "running"  # one still running
    progress = worker._Progress(first.pk, attempt, preview_run.pk)
    assert progress.should_cancel() is True
    # The running one stops at its next poll; the runtime returns what it has.
    Rollout.objects.filter(pk=first.pk).update(status="queued", attempts=0)  # run it through execute this time

    seen = []
    run_in_sandbox = worker._run_in_sandbox
    monkeypatch.setattr(
        worker, "_run_in_sandbox", lambda **kw: seen.append(kw["progress"].should_cancel()) or run_in_sandbox(**kw)
    )
    assert worker.rollout_execute(rollout_id=first.pk) == "cancelled"  # the real rollout stops at its first poll
    assert seen == [True]
    first.refresh_from_db()
    assert first.grade is None
    preview_run.refresh_from_db()
    assert preview_run.status == "cancelled" and preview_run.summary["counts"]["cancelled"] == 3
    assert services.rollout_claim(rollout_id=second.pk, worker="late") is None


def test_the_job_failure_hook_records_the_reason(version, author):
    from sandbox.tasks import rollout_run

    preview_run = start(version, author, n=1)
    rollout = preview_run.rollouts.get()
    services.rollout_claim(rollout_id=rollout.pk, worker="w")
    from celery.exceptions import TimeLimitExceeded

    rollout_run.on_failure(TimeLimitExceeded(660), "task-id", [rollout.pk], {}, None)
    rollout.refresh_from_db()
    assert rollout.status == "error" and "TimeLimitExceeded" in rollout.error


def test_progress_events_move_the_rollout_to_grading_and_count_steps(version, author, monkeypatch):
    monkeypatch.setattr(worker, "PROGRESS_WRITE_INTERVAL_S", 0)
    preview_run = start(version, author, n=1)
    rollout = preview_run.rollouts.get()
    attempt = services.rollout_claim(rollout_id=rollout.pk, worker="w")
    progress = worker._Progress(rollout.pk, attempt, preview_run.pk)
    progress.on_event({"type": "step", "step": 3, "tool": "bash"})
    rollout.refresh_from_db()
    assert rollout.status == "running" and rollout.steps == 3 and rollout.progress["step"] == 3
    progress.on_event({"type": "grading"})
    rollout.refresh_from_db()
    assert rollout.status == "grading"


def test_summary_counts_pass_rate_interval_and_pass_at_k():
    rows = [
        {"status": "done", "reward": 1.0, "passed": True},
        {"status": "done", "reward": 0.5, "passed": False},
        {"status": "error", "reward": None, "passed": None},
        {"status": "done", "reward": 0.0, "passed": False},
    ]
    summary = services.preview_run_summary(policy_kind="model", rollouts=rows)
    assert summary["counts"]["done"] == 3 and summary["counts"]["error"] == 1
    assert summary["mean_reward"] == pytest.approx(0.5) and summary["pass_rate"] == pytest.approx(1 / 3)
    low, high = summary["pass_rate_ci95"]
    assert 0 < low < 1 / 3 < high < 1
    assert summary["pass_at_k"]["1"] == pytest.approx(1 / 3) and summary["pass_at_k"]["2"] == pytest.approx(2 / 3)
    assert summary["verdict"]["ok"] is True
    assert services.preview_run_summary(policy_kind="nop", rollouts=rows[:1])["verdict"]["ok"] is False


def test_the_reaper_leaves_a_rollout_alone_if_it_beats_between_the_check_and_the_update(version, author, enqueued):
    preview_run = start(version, author, n=1)
    rollout = preview_run.rollouts.get()
    attempt = services.rollout_claim(rollout_id=rollout.pk, worker="slow-but-alive")
    cutoff = timezone.now() - timedelta(seconds=60)
    _age(rollout.pk, 61)
    services.rollout_heartbeat(rollout_id=rollout.pk, attempt=attempt)  # the beat lands first
    assert not services.rollout_requeue(rollout_id=rollout.pk, attempt=attempt, note="x", stale_before=cutoff)
    assert not services.rollout_fail(rollout_id=rollout.pk, attempt=attempt, reason="x", stale_before=cutoff)
    rollout.refresh_from_db()
    assert rollout.status == "running" and rollout.worker == "slow-but-alive"


def test_with_docker_the_reaper_also_removes_containers_left_behind(db, settings, monkeypatch):
    from sandbox.runtime.backends import docker as docker_backend

    settings.SANDBOX_BACKEND = "docker"
    removed = []
    monkeypatch.setattr(docker_backend, "reap_containers", lambda *a, **k: removed.append(1) or ["c1", "c2"])
    assert services.rollouts_reap_stale()["containers_removed"] == 2 and removed == [1]

    def engine_down(*args, **kwargs):
        raise ConnectionError("docker engine unreachable")

    monkeypatch.setattr(docker_backend, "reap_containers", engine_down)
    assert services.rollouts_reap_stale()["containers_removed"] == 0  # logged; the next reap tries again
    settings.SANDBOX_BACKEND = "bubblewrap"
    assert services.rollouts_reap_stale()["containers_removed"] == 0


def test_the_verdict_says_when_grades_left_unscored_checks_out():
    rows = [
        {"status": "done", "reward": 1.0, "passed": True, "grade__complete": False},
        {"status": "done", "reward": 1.0, "passed": True, "grade__complete": True},
    ]
    summary = services.preview_run_summary(policy_kind="oracle", rollouts=rows)
    assert summary["incomplete"] == 1 and summary["verdict"]["ok"] is False
    assert "1 of 2 grades are incomplete" in summary["verdict"]["message"]
    complete = services.preview_run_summary(policy_kind="oracle", rollouts=[rows[1]])
    assert complete["incomplete"] == 0 and complete["verdict"]["ok"] is True
    # The verdict held on what was scored: pages show it without the colour of a miss to act on.
    assert summary["verdict"]["band_ok"] is True
    failing = [{**row, "reward": 0.0, "passed": False} for row in rows]
    assert services.preview_run_summary(policy_kind="oracle", rollouts=failing)["verdict"]["band_ok"] is False


def test_a_verdict_that_held_on_incomplete_grades_is_not_shown_as_an_error():
    from django.template.loader import render_to_string

    rows = [{"status": "done", "reward": 0.0, "passed": False, "grade__complete": False}] * 3
    summary = services.preview_run_summary(policy_kind="nop", rollouts=rows)
    run = {"pk": 1, "status": "done", "get_status_display": "Done", "summary": summary}
    html = render_to_string("sandbox/_preview_progress.html", {"summary": summary, "progress": {}, "preview_run": run})
    verdict = html.split('id="preview-verdict"', 1)[0].rsplit("<div", 1)[1]
    assert 'class="muted"' in verdict and "error" not in verdict


def test_reaping_removes_bubblewrap_sandboxes_whose_worker_died(db, settings, tmp_path):
    settings.SANDBOX_BACKEND = "bubblewrap"
    settings.SANDBOX_WORK_DIR = tmp_path / "boxes"
    dead = settings.SANDBOX_WORK_DIR / "gw-deadbeef"
    (dead / "workspace").mkdir(parents=True)
    (dead / "owner").write_text("999999999")  # no such process
    alive = settings.SANDBOX_WORK_DIR / "gw-livebeef"
    (alive / "workspace").mkdir(parents=True)
    (alive / "owner").write_text(str(os.getpid()))
    result = services.rollouts_reap_stale()
    assert result["containers_removed"] == 1
    assert not dead.exists() and alive.exists()


def _old_task_version(old_apps):
    """A task version made with the models as they stood at an older migration (`old_apps`)."""
    user = old_apps.get_model("auth", "User").objects.create(username="old")
    environment = old_apps.get_model("authoring", "Environment").objects.create(slug="e", name="e", owner_id=user.pk)
    environment_version = old_apps.get_model("authoring", "EnvironmentVersion").objects.create(
        environment=environment, number=1, sha256="0" * 64, spec={}, author_id=user.pk
    )
    task = old_apps.get_model("authoring", "Task").objects.create(
        slug="t", title="t", environment=environment, owner_id=user.pk
    )
    return old_apps.get_model("authoring", "TaskVersion").objects.create(
        task=task,
        number=1,
        spec={},
        sha256="1" * 64,
        content_sha256="2" * 64,
        environment_version=environment_version,
        author_id=user.pk,
    )


def test_the_migration_splits_stored_policies_into_kind_and_argument(transactional_db):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = (
        [("sandbox", "0003_model_endpoint_moves_to_grading")],
        [("sandbox", "0004_preview_run_policy_kind_and_argument")],
    )
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    task_version = _old_task_version(old_apps)
    OldRun = old_apps.get_model("sandbox", "PreviewRun")
    for policy in ("oracle", "probe:I am done: 42", "hack:skip_tests", "model"):
        OldRun.objects.create(task_version=task_version, policy=policy, n=1, backend="bubblewrap")
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    NewRun = executor.loader.project_state(after).apps.get_model("sandbox", "PreviewRun")
    assert sorted(NewRun.objects.values_list("policy_kind", "policy_argument")) == [
        ("hack", "skip_tests"),
        ("model", ""),
        ("oracle", ""),
        ("probe", "I am done: 42"),
    ]
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_the_migration_keeps_a_grade_that_only_the_rollouts_copy_held(transactional_db):
    """Dropping Rollout.grade_document: a rollout cancelled after grading had its grade only there."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from grading import engine

    before, after = [("sandbox", "0005_rollout_enqueued_at")], [("sandbox", "0006_rollout_grade_is_the_grade_row")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    task_version = _old_task_version(old_apps)
    run = old_apps.get_model("sandbox", "PreviewRun").objects.create(
        task_version=task_version, policy="oracle", n=2, backend="bubblewrap"
    )
    rubric = engine.parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": "says_42", "kind": "string_match", "points": 2, "mode": "contains", "expected": "42"},
                {"id": "judged", "kind": "llm_judge", "points": 1, "criterion": "Polite."},
            ],
        }
    )
    document = engine.grade(rubric, answer="42", judge=None).to_document()
    OldRollout = old_apps.get_model("sandbox", "Rollout")
    cancelled = OldRollout.objects.create(
        preview_run=run,
        index=0,
        status="cancelled",
        grade_document=document,
        reward=document["reward"],
        passed=document["passed"],
    )
    never_graded = OldRollout.objects.create(preview_run=run, index=1, status="cancelled")
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    new_apps = executor.loader.project_state(after).apps
    kept = new_apps.get_model("sandbox", "Rollout").objects.get(pk=cancelled.pk)
    grade = new_apps.get_model("grading", "Grade").objects.get(pk=kept.grade_id)
    assert grade.document == document and grade.rollout_id == cancelled.pk and grade.task_version_id == task_version.pk
    assert (grade.reward, grade.earned, grade.max, grade.complete) == (document["reward"], 2.0, 3.0, False)
    rows = new_apps.get_model("grading", "CheckResult").objects.filter(grade=grade).order_by("position")
    assert [(row.check_id, row.status) for row in rows] == [("says_42", "scored"), ("judged", "unscored")]
    assert new_apps.get_model("sandbox", "Rollout").objects.get(pk=never_graded.pk).grade_id is None
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_a_queued_rollout_whose_message_was_lost_is_sent_again(version, author, enqueued, settings):
    settings.ROLLOUT_REQUEUE_AFTER_S = 60
    preview_run = start(version, author, n=2)
    lost, waiting = preview_run.rollouts.order_by("index")
    Rollout.objects.filter(pk=lost.pk).update(enqueued_at=timezone.now() - timedelta(seconds=120))
    assert services.rollouts_reap_stale()["resent"] == [lost.pk]
    assert [rollout_id for rollout_id, _ in enqueued] == [lost.pk]
    assert services.rollouts_reap_stale()["resent"] == []  # sent again just now: not yet lost
    lost.refresh_from_db()
    assert lost.status == "queued" and lost.attempts == 0
    services.preview_run_cancel(preview_run=preview_run, user=author)
    Rollout.objects.filter(pk=waiting.pk).update(status="queued", enqueued_at=timezone.now() - timedelta(seconds=120))
    assert services.rollouts_reap_stale()["resent"] == []  # a cancelled preview's rollouts are not sent again


def test_a_rollout_costs_a_fixed_number_of_queries_whatever_the_run_size(
    sandbox_dir, version, author, django_assert_max_num_queries
):
    """Lean workers: claim, load, store and the run's bookkeeping, not a scan of the run per rollout."""
    preview_run = start(version, author, n=40)
    first, *others = list(preview_run.rollouts.order_by("index"))
    worker.rollout_execute(rollout_id=first.pk, worker="w")
    with django_assert_max_num_queries(13):
        assert worker.rollout_execute(rollout_id=others[0].pk, worker="w") == "done"


def _rollout_updates(queries) -> int:
    return sum(1 for query in queries if query["sql"].startswith('UPDATE "sandbox_rollout"'))


def test_progress_is_written_at_most_once_per_interval_however_fast_steps_come(version, author, monkeypatch):
    """Lean workers: an agent stepping four times per PROGRESS_WRITE_INTERVAL_S costs one write per interval (the
    worker's clock is the test's: no wall time), the switch to grading is written at once, "done" writes nothing."""
    from types import SimpleNamespace

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    clock = {"now": 1000.0}
    monkeypatch.setattr(worker, "time", SimpleNamespace(monotonic=lambda: clock["now"]))
    interval = worker.PROGRESS_WRITE_INTERVAL_S
    assert interval > 0
    preview_run = start(version, author, n=1)
    rollout = preview_run.rollouts.get()
    attempt = services.rollout_claim(rollout_id=rollout.pk, worker="w")
    progress = worker._Progress(rollout.pk, attempt, preview_run.pk)
    written = []  # (clock, step) of each step that wrote the row
    for step in range(1, 41):
        clock["now"] = 1000.0 + step * interval / 4
        with CaptureQueriesContext(connection) as queries:
            progress.on_event({"type": "step", "step": step, "tool": "bash"})
        assert _rollout_updates(queries) <= 1
        if _rollout_updates(queries):
            written.append((clock["now"], step))
    # Ten intervals went by: at most one write in each, and never two closer than the interval.
    assert 9 <= len(written) <= 10, written
    assert all(later - earlier >= interval - 1e-9 for (earlier, _), (later, _) in zip(written, written[1:])), written
    rollout.refresh_from_db()
    assert rollout.progress == {"phase": "step", "step": written[-1][1]} and rollout.steps == written[-1][1]
    with CaptureQueriesContext(connection) as queries:  # right after a write: grading is a status change, written
        progress.on_event({"type": "grading"})
        progress.on_event({"type": "done", "error": None})
    assert _rollout_updates(queries) == 1
    rollout.refresh_from_db()
    assert rollout.status == "grading" and rollout.steps == 40


def test_a_run_s_rollouts_are_counted_by_status_in_sql_whatever_the_run_size(author, version, enqueued):
    """Lean workers: the refresh after a claim or a finish asks the database for one row per status, an aggregate,
    never every rollout's status to count in Python (40 rollouts cost the rows 4 do)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    fetched = {}
    for n in (4, 40):
        preview_run = start(version, author, n=n)
        ids = list(preview_run.rollouts.order_by("index").values_list("pk", flat=True))
        Rollout.objects.filter(pk__in=ids[: n // 4]).update(status="done")
        Rollout.objects.filter(pk__in=ids[n // 4 : n // 2]).update(status="running")  # the rest stay queued
        with CaptureQueriesContext(connection) as queries:
            services.preview_run_refresh(preview_run_id=preview_run.pk, known_running=True)
        reads = [query["sql"] for query in queries if query["sql"].lstrip().upper().startswith("SELECT")]
        assert len(reads) == 1, reads  # the run goes on: its row and the rollouts' rows are not read
        assert "COUNT(" in reads[0].upper() and "GROUP BY" in reads[0].upper(), reads[0]
        with connection.cursor() as cursor:  # the query as it ran (logged runnable): how many rows it returns
            cursor.execute(reads[0])
            fetched[n] = cursor.fetchall()
        assert sorted((status, count) for status, count in fetched[n]) == [
            ("done", n // 4),
            ("queued", n - n // 2),
            ("running", n // 4),
        ], fetched[n]
    assert len(fetched[40]) == len(fetched[4]) == 3


def test_a_rollout_job_does_not_reap_the_worker_s_timer_does(
    sandbox_dir, version, author, settings, eager_celery, enqueued
):
    """Lean workers: no sweep after each job (it cost every rollout a scan); a worker reaps when it starts and then on
    its own timer, every reap_interval_s()."""
    from time import monotonic

    from kombu.asynchronous.timer import Timer

    from sandbox import tasks

    settings.ROLLOUT_STALE_AFTER_S, settings.ROLLOUT_REQUEUE_AFTER_S = 600, 900  # the timer's period: 300 s
    stale_run = start(version, author, n=1)
    stale = stale_run.rollouts.get()
    services.rollout_claim(rollout_id=stale.pk, worker="dead")
    _age(stale.pk, 10_000)  # a reap, any reap, would re-queue it
    preview_run = start(version, author, n=2)
    for rollout in preview_run.rollouts.all():
        assert tasks.rollout_run.apply(args=[rollout.pk]).get() == "done"
    stale.refresh_from_db()
    assert (stale.status, stale.worker) == ("running", "dead")  # two jobs ran, and nothing was reaped

    timer = Timer()  # the worker's event-loop timer (kombu's), given as the consumer's
    try:
        before = monotonic()
        tasks._reap_from_worker(sender=type("Consumer", (), {"timer": timer})())
        after = monotonic()
        stale.refresh_from_db()
        assert stale.status == "queued"  # reaped once as the worker starts
        [entry] = [scheduled.entry for scheduled in timer.queue]
        assert entry.fun.__wrapped__ is tasks._reap_quietly  # and then again and again from the timer
        # scheduled one interval after the moment it was set up (bracketed by the clock readings around it)
        assert before + tasks.reap_interval_s() <= timer.queue[0].eta <= after + tasks.reap_interval_s()
        assert services.rollout_claim(rollout_id=stale.pk, worker="dead-again") == 2
        _age(stale.pk, 10_000)
        entry()  # the timer's turn comes
        stale.refresh_from_db()
        assert stale.status == "error" and stale.error.startswith("worker lost")
    finally:
        timer.clear()
