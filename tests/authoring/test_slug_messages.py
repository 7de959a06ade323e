"""A slug is 1-64 lowercase letters, digits and hyphens, not starting or ending with a hyphen: the model's
validator, and every message that refuses one. The form fields were Django's SlugField, whose message
("letters, numbers, underscores or hyphens") allowed what the server then refused."""

import pytest
from rest_framework.test import APIClient

from authoring.models import SLUG_RULE
from tests.authoring.test_views import form_data

RULE = f"Use {SLUG_RULE}."
BAD = ["has space", "Upper-Case", "snake_case", "-edge", "edge-", "dots.too", "a" * 65]


def test_the_rule_is_the_one_the_model_keeps():
    from django.core.exceptions import ValidationError

    from authoring.models import slug_validator

    assert SLUG_RULE == "1-64 lowercase letters, digits and hyphens, not starting or ending with a hyphen"
    for good in ("a", "a1", "six-by-seven", "a" * 64):
        slug_validator(good)
    for bad in BAD:
        with pytest.raises(ValidationError) as refused:
            slug_validator(bad)
        assert refused.value.messages == [RULE]


def errors_of(response, field="slug") -> list[str]:
    """The field's errors, but for the length's own (true, and said only when the slug is too long)."""
    return [
        error
        for error in response.context["form"].errors.get(field, [])
        if not error.startswith("Ensure this value has at most 64 characters")
    ]


@pytest.mark.parametrize("slug", BAD)
def test_the_task_form_says_the_rule(client, author, environment, slug):
    client.force_login(author)
    data = {**form_data(), "slug": slug, "environment": "shell"}
    del data["base_version"]
    response = client.post("/tasks/new/", data)
    assert response.status_code == 400
    assert errors_of(response) == [RULE], errors_of(response)
    assert "underscore" not in response.content.decode()


def test_the_task_form_help_says_the_rule(client, author, environment):
    client.force_login(author)
    page = client.get("/tasks/new/").content.decode()
    assert f"{SLUG_RULE}; cannot change later." in page and "underscore" not in page
    assert 'name="slug" maxlength="64"' in page


@pytest.mark.parametrize("slug", BAD)
def test_the_environment_and_pack_forms_say_the_rule(client, admin, slug):
    client.force_login(admin)
    response = client.post(
        "/environments/new/",
        {
            "slug": slug,
            "name": "Python",
            "network": "none",
            "cpus": "1",
            "memory_mb": "512",
            "timeout_s": "60",
            "max_steps": "10",
            "tools": ["bash", "submit"],
            "custom_tools": "[]",
        },
    )
    assert response.status_code == 400 and errors_of(response) == [RULE]
    response = client.post("/packs/", {"slug": slug, "name": "A pack", "licence": "MIT"})
    assert errors_of(response) == [RULE]


@pytest.mark.parametrize("slug", BAD)
def test_the_api_says_the_rule(admin, environment, slug):
    api = APIClient()
    api.force_authenticate(admin)
    answers = {
        "/api/environments/": api.post(
            "/api/environments/", {"slug": slug, "spec": {"network": "none"}}, format="json"
        ),
        "/api/tasks/": api.post(
            "/api/tasks/",
            {"slug": slug, "environment": "shell", "title": "T", "prompt": "P", "rubric": {"checks": []}},
            format="json",
        ),
        "/api/packs/": api.post("/api/packs/", {"slug": slug}, format="json"),
    }
    for path, response in answers.items():
        assert response.status_code == 400, path
        details = response.json()["error"]["details"]
        assert {"pointer": "/slug", "message": RULE} in details, (path, details)
        assert "underscore" not in response.content.decode(), (path, details)
