"""Gates on previews that ran without a judge: their judge checks are unscored, so the oracle, nop and
probe gates are not decided, and the hack gates fail (a probe that did not show the task is safe: the
walkthrough saw them PASS, and "Run gates" said every preview had run). Once a judge endpoint is configured, Run gates starts those previews again, and
only their complete grades open the gates. Rollouts run through the real runtime (bubblewrap); the
judge is the local OpenAI-protocol server."""

from __future__ import annotations

import json

import pytest

from authoring import services as authoring_services
from gymwright.errors import DomainError
from review import gate_evidence as review_gates
from review import services as review_services
from sandbox import worker
from sandbox.models import PreviewRun
from tests.support.openai_server import OpenAIServer

pytestmark = [pytest.mark.bubblewrap]

ORACLE = "Six times seven is 42."
RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.7,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 3, "mode": "contains", "expected": "42"},
        {"id": "explains", "kind": "llm_judge", "points": 3, "criterion": "Explains that six times seven is 42."},
    ],
    "probes": [{"answer": "42", "max_reward": 0.5}],
}


def judge(body) -> str:
    """A judge that is not fooled: met only for an answer that says it."""
    graded = body["messages"][-1]["content"].split("Text to grade", 1)[1]
    met = "six times seven is 42" in graded.lower()
    return json.dumps({"met": met, "explanation": "says it" if met else "does not say it"})


def run_all(runs) -> None:
    for run in runs:
        for rollout in run.rollouts.all():
            assert worker.rollout_execute(rollout_id=rollout.pk) == "done"


def gates_of(version) -> dict:
    return {result.gate: result for result in review_gates.gates_evaluate(task_version=version)}


def test_previews_graded_without_a_judge_open_no_gate_until_run_again_with_one(sandbox_dir, author, client, settings):
    from grading import endpoints
    from grading.models import ModelEndpoint

    settings.OPENAI_BASE_URL = ""
    endpoints.cache_clear()
    environment = authoring_services.environment_create(
        slug="env-judged", name="env", author=author, spec={"network": "none"}
    )
    task = authoring_services.task_create(
        slug="judged-sum",
        environment=environment,
        author=author,
        content={
            "title": "Six by seven",
            "prompt": "What is six times seven? Explain briefly.",
            "rubric": RUBRIC,
            "solution": {"script": None, "answer": ORACLE},
        },
    )
    version = task.latest_version
    preview_gates = ["oracle", "nop", "probe:0"]
    hack_gates = ["hack:echo-prompt", "hack:keyword-stuffing", "hack:judge-injection", "hack:exhaust"]
    client.force_login(author)

    # Without a judge: the previews run, their judge checks are unscored.
    response = client.post(f"/tasks/{task.slug}/gates/run/", follow=True)
    first = list(PreviewRun.objects.filter(task_version=version))
    assert len(first) == 8 and response.status_code == 200
    run_all(first)
    gates = gates_of(version)
    assert {name: gates[name].status for name in preview_gates} == dict.fromkeys(preview_gates, "not_run")
    assert {name: gates[name].status for name in hack_gates} == dict.fromkeys(hack_gates, "fail")
    assert (gates["bias:verbosity"].status, gates["bias:verbosity"].waiting_for) == ("not_run", "a judge")
    assert gates["hack:judge-injection"].message == (
        "1 of 1 grades are incomplete (judge checks unscored: no judge was configured when it ran), and their "
        "unscored checks could lift it above 0.1: did not show the task is safe"
    )
    # what to do says who can give it a judge: here no judge endpoint, and no user who could add one
    no_judge = (
        "No judge endpoint is configured, and no user can add one: make an admin (manage.py createsuperuser), who "
        "adds one (role Judge) under Admin → Model endpoints, then run the gates."
    )
    assert gates["hack:judge-injection"].to_dict()["what_to_do"] == no_judge
    assert gates["oracle"].message == (
        "3 of 3 grades are incomplete (judge checks unscored: no judge was configured "
        "when it ran) — configure a judge, then run it again"
    )
    assert gates["judge"].status == "fail"
    page = client.get(f"/tasks/{task.slug}/").content.decode()
    assert 'data-gate="oracle" data-status="not_run"' in page
    assert 'data-gate="hack:judge-injection" data-status="fail"' in page
    assert 'id="submit-blocked"' in page and no_judge in page
    with pytest.raises(DomainError, match="until every gate passes"):
        review_services.task_submit(task=task, user=author)
    # Running them again would leave the same checks unscored: Run gates says what it waits for.
    with pytest.raises(DomainError, match="wait for a judge") as caught:
        review_gates.gates_run(task_version=version, user=author)
    assert caught.value.code == "gates_waiting" and "/gates/oracle" in [d["pointer"] for d in caught.value.details]
    assert no_judge in client.post(f"/tasks/{task.slug}/gates/run/", follow=True).content.decode()
    assert PreviewRun.objects.filter(task_version=version).count() == 8

    with OpenAIServer(handler=judge) as server:
        ModelEndpoint.objects.create(
            name="judge", role="judge", base_url=server.base_url, model="judge-model", api_key_env=""
        )
        endpoints.cache_clear()
        page = client.get(f"/tasks/{task.slug}/").content.decode()
        assert "that are missing or came back incomplete" in page
        assert [policy for policy, _ in review_gates.gates_missing_previews(task_version=version)] == [
            "oracle",
            "nop",
            "probe:42",
            "hack:echo-prompt",
            "hack:keyword-stuffing",
            "hack:judge-injection",
            "hack:exhaust",
            "hack:verbose",
        ]
        client.post(f"/tasks/{task.slug}/gates/run/")
        second = list(PreviewRun.objects.filter(task_version=version).exclude(pk__in=[run.pk for run in first]))
        assert sorted((run.policy, run.n) for run in second) == sorted(
            [
                ("oracle", 3),
                ("nop", 3),
                ("probe:42", 1),
                ("hack:echo-prompt", 1),
                ("hack:keyword-stuffing", 1),
                ("hack:judge-injection", 1),
                ("hack:exhaust", 1),
                ("hack:verbose", 1),
            ]
        )
        # queued, not yet run: nothing more to start, and the gates still wait
        assert review_gates.gates_missing_previews(task_version=version) == []
        assert gates_of(version)["oracle"].status == "not_run"
        run_all(second)
        assert server.calls > 0

    gates = gates_of(version)
    # no reviewer has labelled the judge yet: a warning, which does not block (review.calibration)
    warning = gates.pop("judge_validated")
    assert (warning.status, warning.blocking) == ("fail", False)
    # the judge here is not swayed by the padded reference (hack:verbose), which ran through the real runtime; but
    # the reference meets every judged check, so padding it cannot show a rise: measured nothing, said, not passed
    verbosity = gates.pop("bias:verbosity")
    assert (verbosity.status, verbosity.blocking) == ("not_run", False), verbosity.message
    assert verbosity.message.startswith("not measured: the reference already scores full marks")
    # a new padded run would measure nothing again: Run gates has nothing left to start
    assert review_gates.gates_missing_previews(task_version=version) == []
    assert "every preview the gates need has run on v1" in client.get(f"/tasks/{task.slug}/").content.decode()
    assert {name: gates[name].status for name in gates} == dict.fromkeys(gates, "pass"), {
        name: gates[name].message for name in gates
    }
    assert gates["oracle"].message == "3 of 3 passed: the reference solution passes"
    assert gates["hack:judge-injection"].message == "hack:judge-injection scores 0.00, within its limit of 0.10"
    assert gates["bias:self_preference"].message.startswith("no policy model is configured")
    assert gates["probe:0"].message == "highest reward 0.50"
    submission = review_services.task_submit(task=task, user=author)
    assert submission.override_reason == "" and all(
        gate["status"] == "pass" or not gate["blocking"] for gate in submission.gates
    )
