"""Model endpoint configuration: the admin's rows, then the environment; a worker's short cache."""

from __future__ import annotations

import pytest

from grading import endpoints
from grading.models import ModelEndpoint

pytestmark = pytest.mark.django_db

RUBRIC = {"schema": "gymwright.rubric/v1", "judge": {"model": "strict-judge"}, "checks": []}


def test_a_worker_reads_endpoint_configuration_once_per_cache_period(django_assert_num_queries):
    ModelEndpoint.objects.create(name="strict-judge", role="judge", base_url="http://127.0.0.1:1/v1",
                                 model="strict-model", api_key_env="", response_format="json_object")
    first = endpoints.judge_config_for(RUBRIC, max_age_s=30)
    assert (first.model, first.response_format) == ("strict-model", "json_object")
    endpoints.endpoint_config_for("policy", max_age_s=30)
    with django_assert_num_queries(0):
        assert endpoints.judge_config_for(RUBRIC, max_age_s=30) == first
        endpoints.endpoint_config_for("policy", max_age_s=30)


def test_without_a_cache_period_every_call_reads_the_rows():
    ModelEndpoint.objects.create(name="strict-judge", role="judge", base_url="http://127.0.0.1:1/v1",
                                 model="strict-model", api_key_env="")
    endpoints.judge_config_for(RUBRIC, max_age_s=30)
    ModelEndpoint.objects.filter(name="strict-judge").update(model="newer-model")
    assert endpoints.judge_config_for(RUBRIC).model == "newer-model"  # the web app never caches
    assert endpoints.judge_config_for(RUBRIC, max_age_s=30).model == "strict-model"  # a worker, within the period
    endpoints.cache_clear()
    assert endpoints.judge_config_for(RUBRIC, max_age_s=30).model == "newer-model"
