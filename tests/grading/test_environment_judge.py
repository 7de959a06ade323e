"""An environment's owner chooses which configured judge endpoint its tasks' judge checks use: one resolver for dry
runs, example answers and gates (a rubric's judge.model first, then the environment's choice, then the default); the
gate that fails for want of a judge says who can give it one, and where. The choice is grading's data
(grading.EnvironmentJudge), shown and made on the environment's page through grading's panel and in authoring's
API through an environment field grading registers."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from authoring import services as authoring_services
from authoring.models import AuditEvent, TaskVersion
from grading import endpoints
from grading import services as grading_services
from grading.models import EnvironmentJudge, ModelEndpoint
from review import gate_evidence
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.django_db

JUDGED = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 1, "expected": "42"},
        {"id": "explains", "kind": "llm_judge", "points": 1, "criterion": "Explains why the answer is 42."},
    ],
}


@pytest.fixture(autouse=True)
def no_server_judge(settings):
    """Only the admin's endpoints configure a judge here (not OPENAI_BASE_URL)."""
    settings.OPENAI_BASE_URL = ""
    settings.JUDGE_MODEL = ""


@pytest.fixture
def environment(author):
    return authoring_services.environment_create(slug="shell", name="Shell", author=author, spec={"network": "none"})


@pytest.fixture
def task(author, environment):
    content = {
        "title": "Judged",
        "prompt": "What is six times seven, and why?",
        "rubric": JUDGED,
        "solution": {"answer": "42"},
        "examples": [{"name": "right", "answer": "42 because 6 x 7", "expect": "pass"}],
    }
    return authoring_services.task_create(slug="judged", environment=environment, author=author, content=content)


def judge(name, base_url="http://127.0.0.1:1/v1", **fields):
    return ModelEndpoint.objects.create(
        name=name, role="judge", base_url=base_url, model=f"{name}-model", api_key_env="", **fields
    )


def chosen(environment):
    """The judge endpoint `environment`'s owner chose, or None (the default judge)."""
    choice = EnvironmentJudge.objects.filter(environment=environment).first()
    return choice.endpoint if choice else None


def gate(task, name="judge"):
    version = TaskVersion.objects.get(pk=task.latest_version_id)  # read afresh, as a page does
    results = gate_evidence.gates_evaluate(task_version=version)
    return next(result for result in results if result.gate == name)


def test_the_rubric_s_judge_then_the_environment_s_choice_then_the_default(environment):
    strict, lenient = judge("strict"), judge("lenient")
    assert endpoints.judge_config_for(JUDGED, environment=environment) is None  # two, none the default
    EnvironmentJudge.objects.create(environment=environment, endpoint=lenient)
    assert endpoints.judge_config_for(JUDGED, environment=environment).model == "lenient-model"
    named = {**JUDGED, "judge": {"model": "strict"}}
    assert endpoints.judge_config_for(named, environment=environment).model == "strict-model"  # the rubric's wins
    unknown = {**JUDGED, "judge": {"model": "gone"}}
    assert endpoints.judge_config_for(unknown, environment=environment).model == "lenient-model"
    ModelEndpoint.objects.filter(pk=strict.pk).update(is_default=True)
    assert endpoints.judge_config_for(JUDGED, environment=environment).model == "lenient-model"  # chosen beats default
    assert endpoints.judge_config_for(JUDGED, environment=None).model == "strict-model"
    lenient.delete()  # an admin deletes the chosen endpoint: the environment's tasks fall back to the default
    assert endpoints.judge_config_for(JUDGED, environment=environment).model == "strict-model"


def test_the_judge_gate_names_the_owner_and_where_to_choose_then_passes_once_chosen(client, author, task):
    judge("strict"), judge("lenient")
    failed = gate(task)
    assert failed.status == "fail"
    assert "alice, the owner of environment shell (or an admin), can choose one of the configured judge endpoints " in (
        failed.what_to_do
    )
    assert "(lenient, strict)" in failed.what_to_do and failed.link == "/environments/shell/#judge"
    client.force_login(author)
    page = client.get(f"/tasks/{task.slug}/").content.decode()
    assert 'href="/environments/shell/#judge" data-gate-link>Choose the judge of shell</a>' in page

    lenient = ModelEndpoint.objects.get(name="lenient")
    response = client.post("/grading/environments/shell/judge/", {"judge_endpoint": lenient.pk})
    assert response.status_code == 302 and response["Location"] == "/environments/shell/#judge"
    assert gate(task).status == "pass"
    event = AuditEvent.objects.filter(verb=AuditEvent.Verb.JUDGE).get()
    assert (event.actor, event.data) == (author, {"judge_endpoint": "lenient"})
    page = client.get("/environments/shell/").content.decode()
    assert "use <strong>lenient</strong> (chosen for this environment)" in page


def test_with_no_judge_endpoint_the_gate_names_the_admins_who_can_add_one(task, admin):
    get_user_model().objects.create_superuser("root", password="pw-root-1")
    admin.is_staff = False  # the admin role without the admin site: cannot add an endpoint there
    failed = gate(task)
    assert failed.status == "fail" and failed.link == "/admin/grading/modelendpoint/add/"
    assert failed.what_to_do.startswith("No judge endpoint is configured: an admin (root) can add one (role Judge)")


def test_only_the_owner_or_an_admin_chooses_and_bad_choices_are_form_errors(
    client, task, environment, other_author, reviewer, admin
):
    lenient, strict = judge("lenient"), judge("strict")
    policy = ModelEndpoint.objects.create(name="agent", role="policy", base_url="http://127.0.0.1:1/v1", model="m")
    for user in (other_author, reviewer):
        client.force_login(user)
        response = client.post("/grading/environments/shell/judge/", {"judge_endpoint": lenient.pk})
        assert response.status_code == 403
        assert "Only alice, the owner of shell, or an admin can choose its judge." in response.content.decode()
        page = client.get("/environments/shell/").content.decode()
        assert 'id="judge-form"' not in page and "Only alice, its owner, or an admin can choose its judge." in page
    assert chosen(environment) is None

    client.force_login(admin)
    for bad in (policy.pk, 999_999, "abc"):
        response = client.post("/grading/environments/shell/judge/", {"judge_endpoint": bad})
        assert response.status_code == 400
        html = response.content.decode()
        assert 'data-field="judge_endpoint">That is not one of the configured judge endpoints' in html
    assert chosen(environment) is None
    assert client.post("/grading/environments/shell/judge/", {"judge_endpoint": strict.pk}).status_code == 302
    assert chosen(environment) == strict
    # empty: back to the default
    assert client.post("/grading/environments/shell/judge/", {"judge_endpoint": ""}).status_code == 302
    assert chosen(environment) is None


def test_the_address_a_refused_choice_leaves_in_the_browser_opens_the_judge_panel(client, environment, author):
    # A refused choice answers the environment's page at the form's own address: a GET of it (a reload, Back) was an
    # empty 405.
    client.force_login(author)
    assert client.post("/grading/environments/shell/judge/", {"judge_endpoint": "abc"}).status_code == 400
    response = client.get("/grading/environments/shell/judge/")
    assert (response.status_code, response["Location"]) == (302, "/environments/shell/#judge")


def test_the_api_chooses_with_the_same_rules(task, environment, author, other_author):
    lenient = judge("lenient")
    policy = ModelEndpoint.objects.create(name="agent", role="policy", base_url="http://127.0.0.1:1/v1", model="m")
    api = APIClient()
    api.force_authenticate(other_author)
    assert api.patch("/api/environments/shell/", {"judge_endpoint": lenient.pk}, format="json").status_code == 403
    api.force_authenticate(author)
    for bad, words in ((policy.pk, "'agent' is a policy endpoint"), (999_999, "there is no endpoint 999999")):
        response = api.patch("/api/environments/shell/", {"judge_endpoint": bad}, format="json")
        assert response.status_code == 400 and words in response.json()["error"]["message"]
        assert response.json()["error"]["details"][0]["pointer"] == "/judge_endpoint"
    assert api.patch("/api/environments/shell/", {"judge_endpoint": "x"}, format="json").status_code == 400
    response = api.patch("/api/environments/shell/", {"judge_endpoint": lenient.pk}, format="json")
    assert response.status_code == 200
    assert (response.json()["judge_endpoint"], response.json()["judge_endpoint_name"]) == (lenient.pk, "lenient")
    assert api.get("/api/environments/").json()["results"][0]["judge_endpoint_name"] == "lenient"
    assert chosen(environment) == lenient and api.get("/api/environments/shell/").json()["judge_endpoint"] == lenient.pk
    response = api.patch("/api/environments/shell/", {"judge": lenient.pk}, format="json")  # a field it does not keep
    assert response.status_code == 400 and response.json()["error"]["details"][0]["pointer"] == "/judge"
    response = api.patch("/api/environments/shell/", {"judge_endpoint": None}, format="json")  # back to the default
    assert response.status_code == 200 and response.json()["judge_endpoint"] is None and chosen(environment) is None


def test_dry_runs_and_example_answers_ask_the_environment_s_judge(task, environment, author):
    asked = []

    def reply(body):
        asked.append(body["model"])
        return '{"met": true, "explanation": "It explains."}'

    with OpenAIServer(handler=reply) as server:
        judge("strict", base_url=server.base_url), judge("lenient", base_url=server.base_url)
        grading_services.environment_judge_set(
            environment=environment, user=author, endpoint_id=ModelEndpoint.objects.get(name="lenient").pk
        )
        task.refresh_from_db()
        outcome = grading_services.dry_run_start(
            rubric_text=json.dumps(JUDGED), answer="42 since 6 x 7", user=author, task=task
        )
        assert outcome.dry_run is not None  # a judge resolved: the dry run goes to a worker
        grading_services.dry_run_grade(dry_run_id=outcome.dry_run.pk)
        run = grading_services.example_answers_run(task_version=task.latest_version)
        assert run.needs_judge
        grading_services.example_answers_grade(example_run_id=run.pk)
    assert asked and set(asked) == {"lenient-model"}
