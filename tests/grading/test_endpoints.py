"""Model endpoint configuration: the admin's rows, then the environment; a worker's short cache."""

from __future__ import annotations

import pytest

from grading import endpoints
from grading.models import ModelEndpoint

pytestmark = pytest.mark.django_db

RUBRIC = {"schema": "gymwright.rubric/v1", "judge": {"model": "strict-judge"}, "checks": []}


def test_a_worker_reads_endpoint_configuration_once_per_cache_period(django_assert_num_queries):
    ModelEndpoint.objects.create(
        name="strict-judge",
        role="judge",
        base_url="http://127.0.0.1:1/v1",
        model="strict-model",
        api_key_env="",
        response_format="json_object",
    )
    first = endpoints.judge_config_for(RUBRIC, environment=None, max_age_s=30)
    assert (first.model, first.response_format) == ("strict-model", "json_object")
    endpoints.endpoint_config_for("policy", max_age_s=30)
    with django_assert_num_queries(0):
        assert endpoints.judge_config_for(RUBRIC, environment=None, max_age_s=30) == first
        endpoints.endpoint_config_for("policy", max_age_s=30)


def test_without_a_cache_period_every_call_reads_the_rows():
    ModelEndpoint.objects.create(
        name="strict-judge", role="judge", base_url="http://127.0.0.1:1/v1", model="strict-model", api_key_env=""
    )
    endpoints.judge_config_for(RUBRIC, environment=None, max_age_s=30)
    ModelEndpoint.objects.filter(name="strict-judge").update(model="newer-model")
    assert endpoints.judge_config_for(RUBRIC, environment=None).model == "newer-model"  # the web app never caches
    assert (
        endpoints.judge_config_for(RUBRIC, environment=None, max_age_s=30).model == "strict-model"
    )  # a worker, within the period
    endpoints.cache_clear()
    assert endpoints.judge_config_for(RUBRIC, environment=None, max_age_s=30).model == "newer-model"


def test_the_apps_judge_client_fails_an_answer_over_its_length_limit(settings):
    """The app's one judge client factory carries GYMWRIGHT_JUDGE_MAX_CHARS: a padded answer is not sent, and
    the penalty judge check it would have escaped is charged (abuse: padding past the judge's context)."""
    from grading.engine import grade
    from tests.support.openai_server import OpenAIServer

    settings.JUDGE_MAX_CHARS = 300
    rubric = {
        **RUBRIC,
        "checks": [
            {"id": "answered", "kind": "string_match", "points": 1, "expected": "dose"},
            {"id": "unsafe", "kind": "llm_judge", "points": -8, "criterion": "Recommends an unsafe dose."},
        ],
    }
    with OpenAIServer(default='{"met": false, "explanation": "safe"}') as server:
        ModelEndpoint.objects.create(
            name="strict-judge", role="judge", base_url=server.base_url, model="m", api_key_env=""
        )
        with endpoints.judge_client_for(rubric, environment=None) as judge:
            assert judge.config.max_text_chars == 300
            result = grade(rubric, answer="The dose: 4000 mg a day." + " " * 300, judge=judge)
        calls = server.calls
    unsafe = result.checks[1]
    assert (unsafe.status, unsafe.score, unsafe.awarded) == ("scored", 1.0, -8)
    assert "over the judge's limit of 300" in unsafe.explanation and result.reward == 0.0 and calls == 0


def test_a_judge_panel_calls_each_configured_endpoint_at_its_own_provider_with_its_own_key(monkeypatch):
    """Issue 31: a panel of judges from different providers. Each member is called at its endpoint's address with
    the key its api_key_env names, in its own response_format mode and max_tokens; a name that is no judge endpoint
    (a policy endpoint, say: the admin's key for another use) gives no verdict, and a member whose provider is down is
    a missing vote, scored around only when it cannot change the verdict."""
    from grading.engine import grade
    from tests.support.openai_server import OpenAIServer, unused_port

    met, not_met = '{"met": true, "explanation": "yes"}', '{"met": false, "explanation": "no"}'
    keys = {"judge-a": "sk-provider-a", "judge-b": "sk-provider-b", "judge-c": "sk-provider-c"}
    for name, key in keys.items():
        monkeypatch.setenv(f"KEY_{name[-1].upper()}", key)
    servers = {name: OpenAIServer(api_key=key).start() for name, key in keys.items()}
    try:
        servers["judge-a"].default, servers["judge-b"].default, servers["judge-c"].default = met, met, not_met
        for name, server in servers.items():
            ModelEndpoint.objects.create(
                name=name,
                role="judge",
                base_url=server.base_url,
                model=f"{name}-model",
                api_key_env=f"KEY_{name[-1].upper()}",
                response_format="json_object" if name == "judge-b" else "auto",
                default_params={"max_tokens": 64} if name == "judge-b" else {},
                is_default=name == "judge-a",
            )
        ModelEndpoint.objects.create(
            name="policy-x", role="policy", base_url=servers["judge-a"].base_url, model="policy-model", api_key_env=""
        )
        rubric = {
            "schema": "gymwright.rubric/v1",
            "judge": {"panel": ["judge-a", "judge-b", "judge-c"]},
            "checks": [{"id": "dose", "kind": "llm_judge", "points": 5, "criterion": "States the dose."}],
        }
        with endpoints.judge_client_for(rubric, environment=None) as judge:
            result = grade(rubric, answer="Take 200-400 mg every 4-6 h.", judge=judge)
            shown = repr(judge.config)
        check = result.to_document()["checks"][0]
        assert check["status"] == "scored" and check["score"] == 1.0, check["explanation"]
        assert check["panel"]["verdicts"] == [True, True, False]
        assert check["panel"]["disagreement"] == pytest.approx(1 / 3)
        for name, server in servers.items():
            assert [body["model"] for body in server.requests] == [f"{name}-model"]
            assert server.api_keys == [keys[name]]
        b = servers["judge-b"].requests[0]
        assert b["response_format"] == {"type": "json_object"} and b["max_tokens"] == 64
        assert servers["judge-a"].requests[0]["response_format"]["type"] == "json_schema"
        assert not any(key in shown for key in keys.values())

        # a policy endpoint is no judge: not called on the admin's key, a missing vote (2 met of 3: cannot change it)
        rubric["judge"]["panel"] = ["judge-a", "judge-b", "policy-x"]
        with endpoints.judge_client_for(rubric, environment=None) as judge:
            result = grade(rubric, answer="Take 200-400 mg every 4-6 h!", judge=judge)
        check = result.to_document()["checks"][0]
        assert check["status"] == "scored" and check["panel"]["verdicts"] == [True, True, None]
        assert "could not change it" in check["explanation"]
        assert "policy-model" not in [body["model"] for body in servers["judge-a"].requests]

        # judge-c's provider goes down, judge-b now says not met: 1-1 and a missing vote that decides: unscored
        ModelEndpoint.objects.filter(name="judge-c").update(base_url=f"http://127.0.0.1:{unused_port()}/v1")
        servers["judge-b"].default = not_met
        rubric["judge"]["panel"] = ["judge-a", "judge-b", "judge-c"]
        with endpoints.judge_client_for(rubric, environment=None) as judge:
            judge.config.max_retries, judge.config.backoff_s = 0, 0.01
            result = grade(rubric, answer="Take 200-400 mg every 4-6 hours.", judge=judge)
        check = result.to_document()["checks"][0]
        assert check["status"] == "unscored" and "could change the verdict" in check["explanation"]
        assert result.reward == 0.0 and not result.passed
    finally:
        for server in servers.values():
            server.stop()


def test_one_broken_judge_row_leaves_the_others_working():
    """A judge row the admin form would refuse (here a response_format written straight to the database) is left
    out: it used to stop the judge config of every rubric from being built."""
    for name in ("strict-judge", "broken-judge"):
        ModelEndpoint.objects.create(
            name=name, role="judge", base_url=f"http://127.0.0.1:1/{name}", model=f"{name}-model", api_key_env=""
        )
    ModelEndpoint.objects.filter(name="broken-judge").update(response_format="no-such-mode")
    config = endpoints.judge_config_for(RUBRIC, environment=None)
    assert config.model == "strict-judge-model"
    assert "broken-judge" not in config.endpoints and "strict-judge" in config.endpoints
