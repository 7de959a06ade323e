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
