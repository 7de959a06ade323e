"""Fault: the judge endpoint flaps (HTTP 500, then a timeout, then 500 ...) during a preview.

A real worker grades through the judge client against the local OpenAI-protocol server in
tests/support, switched to flapping. Every judge call fails, retried a bounded number of
times (GYMWRIGHT_JUDGE_MAX_RETRIES, each attempt within GYMWRIGHT_JUDGE_TIMEOUT_S, all of
them within GYMWRIGHT_JUDGE_DEADLINE_S); so each judged check is unscored with the reason, the
grade says `complete: false`, the deterministic checks keep their scores, and no judge check
ever gets a score it was not given.
"""

from __future__ import annotations

import pytest

from grading.models import ModelEndpoint
from sandbox import services
from sandbox.models import PreviewRun
from tests.sandbox.factories import make_task
from tests.support.openai_server import OpenAIServer, Reply, flapping
from tests.support.users import make_user
from tests.support.workers import start_workers, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.bubblewrap, pytest.mark.slow]

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.7,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 3, "mode": "contains", "expected": "42"},
        {"id": "explains", "kind": "llm_judge", "points": 2, "criterion": "Explains why the answer is 42."},
        {"id": "polite", "kind": "llm_judge", "points": 1, "criterion": "Is polite.", "samples": 2},
    ],
}


@pytest.mark.timeout(90 + 240 + 90)  # the worker's start, then the wait below
def test_a_flapping_judge_leaves_its_checks_unscored_with_the_reason(
    request, transactional_db, django_user_model, redis_db, celery_producer, tmp_path, client
):
    author = make_user(django_user_model, "ada", "author")
    task = make_task(author=author, slug="judged", rubric=RUBRIC)
    with OpenAIServer(handler=flapping(Reply(status=500), Reply(hang=True))) as judge:
        ModelEndpoint.objects.create(
            name="judge",
            role="judge",
            base_url=judge.base_url,
            model="flappy-judge",
            api_key_env="GYMWRIGHT_TEST_JUDGE_KEY",
            is_default=True,
        )
        workers = start_workers(request, redis_db.url, tmp_path, stale_after_s=120)
        workers.start(
            name="judge-fault",
            env={
                "GYMWRIGHT_TEST_JUDGE_KEY": "test-key",
                "GYMWRIGHT_JUDGE_TIMEOUT_S": "1",
                "GYMWRIGHT_JUDGE_MAX_RETRIES": "3",
                "GYMWRIGHT_JUDGE_CACHE_DIR": str(tmp_path / "judge-cache"),
            },
        )
        preview_run = services.preview_run_create(task_version=task.latest_version, user=author, policy="oracle", n=2)
        wait_for(
            lambda: PreviewRun.objects.filter(pk=preview_run.pk, status__in=PreviewRun.FINISHED).exists(),
            timeout=240,
            what="the preview with a flapping judge to finish",
            workers=workers,
        )
        calls = judge.calls

    rollouts = list(preview_run.rollouts.select_related("grade"))
    assert [r.status for r in rollouts] == ["done", "done"], ([r.error for r in rollouts], workers.logs())
    # 2 rollouts × 3 judge samples, each tried once and retried 3 times: bounded, and every try was made.
    assert calls == 2 * 3 * 4, calls
    for rollout in rollouts:
        grade = rollout.grade.document
        assert grade["complete"] is False and rollout.grade.complete is False
        checks = {check["id"]: check for check in grade["checks"]}
        assert checks["says_42"]["status"] == "scored" and checks["says_42"]["score"] == 1.0
        for judged in ("explains", "polite"):
            check = checks[judged]
            assert check["status"] == "unscored" and check.get("score") is None and not check.get("awarded"), check
            assert "judge call failed after 4 attempt(s)" in check["explanation"], check["explanation"]
            assert "HTTP 500" in check["explanation"] or "timed out" in check["explanation"], check["explanation"]
        # Only the scored check earns: 3 of 6 points (the judge checks stay in the maximum), never a judge
        # verdict nobody gave; had they been met, 6 of 6.
        assert (grade["earned"], grade["max"], grade["reward"], grade["reward_upper"]) == (3, 6, 0.5, 1.0)
    preview_run.refresh_from_db()
    assert preview_run.status == "done"

    # What the author reads on the rollout page: incomplete, and why each judge check has no score.
    client.force_login(author)
    page = client.get(f"/previews/rollouts/{rollouts[0].pk}/").content.decode()
    assert "incomplete" in page and "judge call failed after 4 attempt(s)" in page
