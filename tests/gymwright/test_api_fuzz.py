"""schemathesis against the OpenAPI schema: no generated request gets a server error (issue 12).

Every operation in the schema drf-spectacular publishes gets bounded, derandomized examples
(GYMWRIGHT_FUZZ_EXAMPLES, default 10 each) sent through the real WSGI application with an API
token of a user who holds every role, so the requests reach the views rather than stopping at
authentication. A 5xx answer fails the test with the request that caused it.
"""

from __future__ import annotations

import json
import os

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token

from authoring import services
from tests.authoring.conftest import task_content
from tests.support.users import make_user

EXAMPLES = int(os.environ.get("GYMWRIGHT_FUZZ_EXAMPLES", "10"))

_raw = json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))
schema = schemathesis.openapi.from_dict(_raw)
schema.app = WSGIHandler()


@pytest.fixture
def api_token(transactional_db, django_user_model, settings):
    settings.ALLOWED_HOSTS = ["*"]
    user = make_user(django_user_model, "fuzz", "author", "reviewer", "admin")
    environment = services.environment_create(slug="shell", name="Shell", author=user, spec={"network": "none"})
    services.task_create(slug="t1", environment=environment, author=user, content=task_content())
    return Token.objects.create(user=user).key


def test_the_schema_lists_the_api():
    assert len(list(schema.get_all_operations())) >= 10


@schema.parametrize()
@settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
def test_no_api_operation_answers_a_server_error(case, api_token):
    response = case.call(headers={"Authorization": f"Token {api_token}"})
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}\n"
        f"query={case.query} body={str(case.body)[:500]}\n{response.text[:2000]}"
    )
