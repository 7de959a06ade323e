"""An environment that asks for network egress is refused at save, in the form
and the API, with the field named, unless the operator enables egress."""

import pytest

from authoring import services
from authoring.models import Environment
from gymwright.errors import DomainError

pytestmark = pytest.mark.django_db


def environment_form(**overrides):
    data = {
        "name": "Shell",
        "network": "allowed",
        "cpus": "1",
        "memory_mb": "1024",
        "timeout_s": "600",
        "max_steps": "30",
        "tools": ["bash"],
        "custom_tools": "[]",
        "base_version": "1",
    }
    data.update(overrides)
    return data


def test_the_environment_form_refuses_egress_on_the_network_field(client, author, environment):
    client.force_login(author)
    response = client.post(f"/environments/{environment.slug}/edit/", environment_form())

    assert response.status_code == 400
    errors = " ".join(response.context["form"].errors["network"])
    # under the field, which says where: no JSON pointer in the sentence
    assert "/network" not in errors and "GYMWRIGHT_SANDBOX_EGRESS" in errors
    assert environment.versions.count() == 1


def test_the_environment_form_saves_egress_when_the_operator_enables_it(client, author, environment, settings):
    settings.SANDBOX_EGRESS = True
    client.force_login(author)
    response = client.post(f"/environments/{environment.slug}/edit/", environment_form())

    assert response.status_code == 302, getattr(response, "context", None) and response.context["form"].errors
    assert environment.versions.count() == 2
    assert environment.versions.order_by("-number")[0].spec["network"] == "allowed"


@pytest.mark.parametrize(
    "url, body",
    [
        ("/api/environments/shell/versions/", {"spec": {"network": "egress"}, "base_version": 1}),
        ("/api/environments/", {"slug": "net-env", "spec": {"network": "allowed"}}),
    ],
)
def test_the_api_refuses_egress_with_its_pointer(api, environment, url, body):
    response = api.post(url, body, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["details"][0]["pointer"] == "/network"
    assert "GYMWRIGHT_SANDBOX_EGRESS" in error["details"][0]["message"]
    assert environment.versions.count() == 1
    assert not Environment.objects.filter(slug="net-env").exists()


def test_a_spec_without_egress_is_saved_as_before(author, environment):
    version, created = services.environment_version_create(
        environment=environment, author=author, spec={"network": "none", "setup": "true"}, base_version=1
    )
    assert created and version.spec["network"] == "none"
    with pytest.raises(DomainError):
        services.environment_version_create(
            environment=environment, author=author, spec={"network": "egress"}, base_version=2
        )


def test_the_environment_form_says_egress_is_off_before_the_save(client, author, environment, settings):
    client.force_login(author)
    page = client.get(f"/environments/{environment.slug}/edit/").content.decode()
    assert "will be refused" in page and "GYMWRIGHT_SANDBOX_EGRESS" in page
    settings.SANDBOX_EGRESS = True
    page = client.get(f"/environments/{environment.slug}/edit/").content.decode()
    assert "will be refused" not in page
