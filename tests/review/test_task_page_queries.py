"""The task page's gates on every view (issue 34: the task page's CPU doubled as judge panels, calibration and blind
figures joined the gates): what the gates read that does not change between views is not read again, and what they
read on every view does not grow with the labels and blind scores a task has. Counts, never timings."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from authoring import services as authoring_services
from tests.review.conftest import finished_preview

pytestmark = pytest.mark.django_db

JUDGED = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 1, "mode": "contains", "expected": "42"},
        {"id": "explains", "kind": "llm_judge", "points": 1, "criterion": "Explains that six times seven is 42."},
    ],
}


def _judged_task(author, environment, slug: str = "judged"):
    return authoring_services.task_create(
        slug=slug,
        environment=environment,
        author=author,
        content={
            "title": "Six by seven",
            "prompt": "What is six times seven?",
            "rubric": JUDGED,
            "solution": {"script": None, "answer": "Six times seven is 42."},
        },
    )


def _sql(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    return [query["sql"] for query in captured.captured_queries]


def test_who_can_give_the_judge_checks_a_judge_is_read_once_per_process_while_fresh(
    client, author, environment, settings
):
    """No judge endpoint: the gates say who can add one (the admins, by their permissions). That was two queries a
    view, one of them the permissions' join, which costs more to compile than to run; it is kept as the endpoints'
    configuration is (settings.ENDPOINT_CACHE_S), and the page says the same."""
    from grading import endpoints

    settings.OPENAI_BASE_URL = ""
    settings.ENDPOINT_CACHE_S = 30
    endpoints.cache_clear()
    task = _judged_task(author, environment)
    client.force_login(author)
    first = _sql(client, f"/tasks/{task.slug}/")
    page = client.get(f"/tasks/{task.slug}/").content.decode()
    second = _sql(client, f"/tasks/{task.slug}/")
    assert any("auth_permission" in sql for sql in first)
    assert not [sql for sql in second if "auth_permission" in sql or "grading_modelendpoint" in sql]
    assert "No judge endpoint is configured, and no user can add one" in page


def test_the_task_page_reads_the_same_queries_whatever_its_labels_and_blind_scores(
    client, author, environment, reviewer, settings
):
    """The gates' judge validation (labels) and human prediction (blind scores) are one query each, for a task with
    one of each and for one with six."""
    from grading.models import CheckResult, Grade, JudgeLabel
    from review.models import BlindScore

    settings.OPENAI_BASE_URL = ""
    client.force_login(author)
    counts = {}
    for size in (1, 6):
        task = _judged_task(author, environment, slug=f"judged-{size}")
        version = task.latest_version
        run = finished_preview(version, author, "model", [0.5] * size)
        for index, rollout in enumerate(run.rollouts.all()):
            grade = Grade.objects.create(
                task_version=version,
                source="rollout",
                rollout_id=rollout.pk,
                reward=0.5,
                earned=1,
                max=2,
                passed=True,
                document={},
            )
            result = CheckResult.objects.create(
                grade=grade,
                check_id="explains",
                kind="llm_judge",
                status=CheckResult.Status.SCORED,
                score=1.0,
                points=1,
                position=0,
            )
            JudgeLabel.objects.create(
                check_result=result, reviewer=reviewer, verdict=JudgeLabel.Verdict.MET, agrees=True
            )
            BlindScore.objects.create(rollout=rollout, reviewer=reviewer, passed=index % 2 == 0, score=index % 5 + 1)
        client.get(f"/tasks/{task.slug}/")  # this process's kept facts for the version
        counts[size] = _sql(client, f"/tasks/{task.slug}/")
    assert len(counts[1]) == len(counts[6]), "\n".join(counts[6])


def test_a_versions_document_is_validated_once_per_process_for_its_gates(client, author, environment, monkeypatch):
    """The rubric gate's input (what is wrong with the version's document) never changes for a version: a second view
    does not validate it again, and the gate says the same."""
    from review import gate_evidence

    calls = []
    validate = gate_evidence.validate_task
    monkeypatch.setattr(gate_evidence, "validate_task", lambda spec: calls.append(1) or validate(spec))
    task = _judged_task(author, environment, slug="validated-once")
    client.force_login(author)
    pages = [client.get(f"/tasks/{task.slug}/").content.decode() for _ in range(2)]
    assert len(calls) == 1
    assert 'data-gate="rubric" data-status="pass"' in pages[1]


def test_the_gates_table_is_rendered_once_per_content(monkeypatch):
    """The gates' table (review/_gate_rows.html) is kept per content, as the preview page's rows are: the same gates
    read back, a changed gate rendered anew, and what differs per request (the Run gates form) stays outside."""
    from django.template.loader import render_to_string
    from django.test import RequestFactory

    from grading.engine.gate_registry import GateResult
    from gymwright.process_cache import Kept
    from gymwright.templatetags import pages as page_tags

    monkeypatch.setattr(page_tags, "_FRAGMENTS", Kept(entries=8))
    request = RequestFactory().get("/")

    def page(status: str) -> str:
        gates = [
            GateResult(gate="rubric", title="Rubric valid", status="pass", message="<ok>"),
            GateResult(gate="oracle", title="Oracle", status=status, message="3 of 3", run_id=7, link="/x"),
        ]
        return render_to_string("review/_gates.html", {"gates": gates, "task": None}, request)

    first = page("fail")
    assert page("fail") == first and len(page_tags._FRAGMENTS) == 1
    assert 'data-gate="oracle" data-status="fail"' in first and "&lt;ok&gt;" in first and "/previews/7/" in first
    assert 'data-gate="oracle" data-status="pass"' in page("pass") and len(page_tags._FRAGMENTS) == 2
