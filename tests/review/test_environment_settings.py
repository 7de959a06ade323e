"""An environment's calibration settings are its owner's to change (issue 31): when a judged check counts as
validated, whether one that is not blocks, and the blind rule, on the environment page's Calibration panel and
through PATCH /api/environments/<slug>/; refused for other users, a bad value refused at its field (page) or its
pointer (API) with nothing saved, each change audited; the gates follow."""

import pytest

from authoring.models import AuditEvent, Environment
from review import blind
from review import gate_evidence as review_gates
from review.models import BlindRule
from tests.review.conftest import api_client
from tests.review.test_judge_calibration import measured  # noqa: F401

GOOD = {
    "judge_min_labels": "10",
    "judge_min_rate": "0.8",
    "judge_unvalidated_blocks": "on",
    "blind_min_correlation": "-0.25",
    "blind_min_scored": "5",
}


def judge_gate(task):
    version = type(task.latest_version).objects.get(pk=task.latest_version.pk)
    return {result.gate: result for result in review_gates.gates_evaluate(task_version=version)}["judge_validated"]


def test_the_owner_changes_the_calibration_settings_on_the_page_and_the_gate_follows(client, measured, author):
    gate = judge_gate(measured)
    assert (gate.status, gate.blocking, gate.message) == (
        "fail",
        False,
        "clear: judge not validated: TNR 0.80 below 0.85",
    )
    client.force_login(author)
    page = client.get("/environments/shell/").content.decode()
    assert 'id="calibration-form"' in page and 'data-setting="judge_min_rate">0.85<' in page
    response = client.post("/environments/shell/calibration/", GOOD)
    assert response.status_code == 302 and response["Location"].endswith("#calibration")
    environment = Environment.objects.get(slug="shell")
    assert (environment.judge_min_labels, environment.judge_min_rate, environment.judge_unvalidated_blocks) == (
        10,
        0.8,
        True,
    )
    assert blind.rule_for(environment).to_dict() == {"min_correlation": -0.25, "min_scored": 5}
    assert judge_gate(measured).status == "pass"  # TNR 0.80 clears 0.8
    # stricter: the gate fails again, and now blocks
    client.post("/environments/shell/calibration/", {**GOOD, "judge_min_rate": "0.95"})
    gate = judge_gate(measured)
    assert (gate.status, gate.blocking, gate.message) == (
        "fail",
        True,
        "clear: judge not validated: TPR 0.90, TNR 0.80 below 0.95",
    )
    events = list(AuditEvent.objects.filter(verb=AuditEvent.Verb.CALIBRATION).order_by("id"))
    assert [event.actor for event in events] == [author, author, author]
    assert events[0].data == {"calibration": {"judge_min_rate": [0.85, 0.8], "judge_unvalidated_blocks": [False, True]}}
    assert events[1].data == {"blind_rule": {"blind_min_correlation": [0.5, -0.25], "blind_min_scored": [10, 5]}}
    assert events[2].data == {"calibration": {"judge_min_rate": [0.8, 0.95]}}
    # nothing changed: nothing audited
    client.post("/environments/shell/calibration/", {**GOOD, "judge_min_rate": "0.95"})
    assert AuditEvent.objects.filter(verb=AuditEvent.Verb.CALIBRATION).count() == 3


def test_only_the_owner_and_an_admin_change_them(client, environment, other_author, reviewer, admin):
    for user in (other_author, reviewer):
        client.force_login(user)
        assert 'id="calibration-form"' not in client.get("/environments/shell/").content.decode()
        assert client.post("/environments/shell/calibration/", GOOD).status_code == 403
        assert (
            api_client(user).patch("/api/environments/shell/", {"judge_min_rate": 0.9}, format="json").status_code
            == 403
        )
    environment.refresh_from_db()
    assert environment.judge_min_rate == 0.85 and not BlindRule.objects.exists()
    client.force_login(admin)
    assert client.post("/environments/shell/calibration/", GOOD).status_code == 302
    assert BlindRule.objects.get().min_scored == 5


def test_the_address_a_refused_change_leaves_in_the_browser_opens_the_calibration_panel(client, environment, author):
    # A refused change answers the environment's page at the form's own address; reloading it, or coming back to it,
    # asked for it with a GET, which answered an empty 405 (the browser's "This page isn't working").
    client.force_login(author)
    assert client.post("/environments/shell/calibration/", {**GOOD, "judge_min_rate": "1.5"}).status_code == 400
    response = client.get("/environments/shell/calibration/")
    assert (response.status_code, response["Location"]) == (302, "/environments/shell/#calibration")


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("judge_min_rate", "0.3", "greater than or equal to 0.5"),
        ("judge_min_rate", "1.5", "less than or equal to 1"),
        ("judge_min_rate", "nan", "Enter a number"),
        ("judge_min_labels", "1", "greater than or equal to 2"),
        ("judge_min_labels", "9" * 40, "less than or equal to 100000"),
        ("judge_min_labels", "ten", "Enter a whole number"),
        ("blind_min_correlation", "2", "less than or equal to 1"),
        ("blind_min_scored", "2", "greater than or equal to 3"),
        ("blind_min_scored", "", "This field is required"),
    ],
)
def test_a_bad_value_on_the_page_is_refused_under_its_field(client, environment, author, field, value, words):
    client.force_login(author)
    response = client.post("/environments/shell/calibration/", {**GOOD, field: value})
    assert response.status_code == 400
    page = response.content.decode()
    error = page.split(f'data-field="{field}">', 1)[1].split("</div>", 1)[0]
    assert words in error, error
    environment.refresh_from_db()
    assert (environment.judge_min_rate, environment.judge_min_labels) == (0.85, 50)
    assert not BlindRule.objects.exists() and not AuditEvent.objects.filter(verb=AuditEvent.Verb.CALIBRATION).exists()


@pytest.mark.parametrize(
    ("body", "pointer", "words"),
    [
        ({"judge_min_rate": 1.5}, "/judge_min_rate", "less than or equal to 1"),
        ({"judge_min_rate": "high"}, "/judge_min_rate", "valid number"),
        ({"judge_min_labels": 10**30}, "/judge_min_labels", "less than or equal to 100000"),
        ({"judge_min_labels": 3.5}, "/judge_min_labels", "valid integer"),
        ({"judge_unvalidated_blocks": "maybe"}, "/judge_unvalidated_blocks", "valid boolean"),
        ({"blind_min_correlation": -1.01}, "/blind_min_correlation", "greater than or equal to -1"),
        ({"blind_min_scored": 0}, "/blind_min_scored", "greater than or equal to 3"),
        # all or none: the good value before the bad one is not kept
        ({"judge_min_rate": 0.9, "blind_min_scored": 1}, "/blind_min_scored", "greater than or equal to 3"),
    ],
)
def test_a_bad_value_in_the_api_is_a_400_at_its_pointer(environment, author, body, pointer, words):
    response = api_client(author).patch("/api/environments/shell/", body, format="json")
    assert response.status_code == 400, response.content
    (detail,) = response.json()["error"]["details"]
    assert detail["pointer"] == pointer and words in detail["message"].lower(), detail
    environment.refresh_from_db()
    assert environment.judge_min_rate == 0.85 and not BlindRule.objects.exists()
    assert not AuditEvent.objects.filter(verb=AuditEvent.Verb.CALIBRATION).exists()


def test_the_api_shows_and_sets_them(environment, author, admin):
    api = api_client(author)
    body = api.get("/api/environments/shell/").json()
    assert {key: body[key] for key in ("judge_min_labels", "judge_min_rate", "judge_unvalidated_blocks")} == {
        "judge_min_labels": 50,
        "judge_min_rate": 0.85,
        "judge_unvalidated_blocks": False,
    }
    assert (body["blind_min_correlation"], body["blind_min_scored"]) == (0.5, 10)  # the defaults: no rule yet
    body = api.patch(
        "/api/environments/shell/",
        {"judge_min_labels": 20, "judge_unvalidated_blocks": True, "blind_min_correlation": 0.3},
        format="json",
    ).json()
    assert (body["judge_min_labels"], body["judge_unvalidated_blocks"], body["judge_min_rate"]) == (20, True, 0.85)
    assert (body["blind_min_correlation"], body["blind_min_scored"]) == (0.3, 10)
    assert (
        api_client(admin).patch("/api/environments/shell/", {"blind_min_scored": 4}, format="json").status_code == 200
    )
    listed = api.get("/api/environments/").json()["results"][0]
    assert (listed["blind_min_correlation"], listed["blind_min_scored"]) == (0.3, 4)


def test_the_api_schema_documents_their_types(db):
    from drf_spectacular.generators import SchemaGenerator

    schemas = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    output, patch = (
        schemas["EnvironmentOutput"]["properties"],
        schemas["PatchedEnvironmentFieldsInputRequest"]["properties"],
    )
    assert (output["blind_min_correlation"]["type"], output["blind_min_scored"]["type"]) == ("number", "integer")
    assert (patch["judge_min_rate"]["type"], patch["judge_unvalidated_blocks"]["type"]) == ("number", "boolean")
