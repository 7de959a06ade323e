"""The OpenAPI document describes what the API really answers (schemathesis found the lists were wrong)."""

import pytest

pytestmark = pytest.mark.django_db

LISTS = [
    "/api/environments/",
    "/api/environments/{slug}/versions/",
    "/api/tasks/",
    "/api/tasks/{slug}/versions/",
    "/api/tasks/{slug}/versions/{number}/previews/",
]


@pytest.mark.parametrize("path", LISTS)
def test_a_list_endpoint_is_documented_as_the_page_it_answers(api, task, path):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operation = schema["paths"][path]["get"]
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    component = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]

    url = path.format(slug=task.environment.slug if "environments" in path else task.slug, number=1)
    body = api.get(url).json()

    assert component["type"] == "object" and component["properties"]["results"]["type"] == "array"
    assert set(body) == set(component["properties"]) == {"count", "next", "previous", "results"}
    assert operation["operationId"].endswith("_list")
