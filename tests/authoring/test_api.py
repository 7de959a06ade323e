import copy
import hashlib
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from authoring.models import Blob
from tests.authoring.conftest import RUBRIC, task_content


def test_the_api_refuses_anonymous_callers_in_the_error_envelope(db):
    response = APIClient().get("/api/tasks/")
    assert response.status_code in (401, 403)
    assert response.json()["error"]["code"] in ("not_authenticated", "authentication_failed")


def test_a_lab_engineer_lists_tasks_with_a_token(task, reviewer):
    token = Token.objects.create(user=reviewer)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    body = client.get("/api/tasks/?tag=maths").json()
    assert body["count"] == 1 and body["results"][0]["slug"] == "six-times-seven"
    assert body["results"][0]["latest_version"] == 1 and body["results"][0]["tags"] == ["maths"]
    assert client.get("/api/tasks/?tag=nope").json()["count"] == 0


def test_create_a_task_then_a_version_then_diff_them(api, environment):
    response = api.post("/api/tasks/", {"slug": "api-task", "environment": "shell", **task_content()}, format="json")
    assert response.status_code == 201, response.json()
    rubric = copy.deepcopy(RUBRIC)
    rubric["checks"][0]["points"] = 5
    response = api.post(
        "/api/tasks/api-task/versions/", {**task_content(rubric=rubric), "base_version": 1}, format="json"
    )
    assert response.status_code == 201 and response.json()["number"] == 2
    assert response.json()["spec"]["rubric"]["checks"][0]["points"] == 5
    versions = api.get("/api/tasks/api-task/versions/").json()
    assert [v["number"] for v in versions["results"]] == [2, 1]
    diff = api.get("/api/tasks/api-task/diff/?a=1&b=2").json()
    changed = [c for c in diff["checks"] if c["status"] != "unchanged"]
    assert changed == [
        {
            "id": "says_42",
            "status": "changed",
            "moved": False,
            "changes": [{"key": "points", "a": "2", "b": "5"}],
            "a": RUBRIC["checks"][0],
            "b": rubric["checks"][0],
        }
    ]
    assert api.get("/api/tasks/api-task/versions/2/").json()["spec"]["version"] == 2


def test_an_unchanged_save_answers_200_with_the_latest(api, task):
    response = api.post(f"/api/tasks/{task.slug}/versions/", {**task_content(), "base_version": 1}, format="json")
    assert response.status_code == 200 and response.json()["number"] == 1


def test_an_invalid_rubric_answers_400_with_the_pointer(api, task):
    rubric = copy.deepcopy(RUBRIC)
    rubric["checks"][0]["kind"] = "telepathy"
    response = api.post(
        f"/api/tasks/{task.slug}/versions/", {**task_content(rubric=rubric), "base_version": 1}, format="json"
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert "/rubric/checks/0/kind" in [d["pointer"] for d in error["details"]]


def test_a_missing_field_answers_400_with_its_pointer(api, task):
    response = api.post(f"/api/tasks/{task.slug}/versions/", {"title": "x"}, format="json")
    assert response.status_code == 400
    pointers = {d["pointer"] for d in response.json()["error"]["details"]}
    assert {"/prompt", "/rubric", "/base_version"} <= pointers


def test_an_outdated_base_version_answers_409_and_keeps_the_latest(api, task):
    assert (
        api.post(
            f"/api/tasks/{task.slug}/versions/", {**task_content(title="first"), "base_version": 1}, format="json"
        ).status_code
        == 201
    )
    response = api.post(
        f"/api/tasks/{task.slug}/versions/", {**task_content(title="stale"), "base_version": 1}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict" and response.json()["error"]["latest_version"] == 2
    assert api.get(f"/api/tasks/{task.slug}/").json()["title"] == "first"


def test_only_the_owner_may_add_versions(task, other_author):
    client = APIClient()
    client.force_authenticate(other_author)
    response = client.post(f"/api/tasks/{task.slug}/versions/", {**task_content(), "base_version": 1}, format="json")
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"


def test_a_user_without_a_role_sees_nothing(task, nobody):
    client = APIClient()
    client.force_authenticate(nobody)
    assert client.get("/api/tasks/").json()["count"] == 0
    assert client.get(f"/api/tasks/{task.slug}/").status_code == 404


def test_malformed_json_and_non_utf8_bodies_answer_400(api, task):
    response = api.generic("POST", f"/api/tasks/{task.slug}/versions/", b'{"title": ', content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "parse_error"
    response = api.generic(
        "POST", f"/api/tasks/{task.slug}/versions/", b'{"title": "\xff\xfe"}', content_type="application/json"
    )
    assert response.status_code == 400 and "error" in response.json()


def test_diff_with_a_bad_version_number_is_a_clear_400(api, task):
    response = api.get(f"/api/tasks/{task.slug}/diff/?a=one&b=1")
    assert response.status_code == 400 and response.json()["error"]["details"][0]["pointer"] == "/a"
    assert api.get(f"/api/tasks/{task.slug}/diff/?a=1&b=9").status_code == 404


def test_blob_upload_refuses_traversal_and_oversize(api, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = api.post("/api/blobs/", {"file": SimpleUploadedFile("ok.txt", b"hi")}, format="multipart")
    assert response.status_code == 201 and response.json()["size"] == 2
    response = api.post(
        "/api/blobs/", {"file": SimpleUploadedFile("../../etc/passwd", b"traversal")}, format="multipart"
    )
    # Django strips directory parts from upload names ("passwd" is left); and the name is never used for
    # storage: a blob is stored under its sha256, inside MEDIA_ROOT.
    assert response.status_code == 201, response.content
    sha256 = hashlib.sha256(b"traversal").hexdigest()
    assert response.json() == {"sha256": sha256, "size": 9}
    stored = Blob.objects.get(sha256=sha256)
    assert stored.file.name == f"blobs/{sha256[:2]}/{sha256}"
    media = Path(settings.MEDIA_ROOT).resolve()
    assert Path(stored.file.path).resolve().is_relative_to(media)
    assert Path(stored.file.path).read_bytes() == b"traversal"
    assert not any("passwd" in path.name for path in media.parent.rglob("*"))
    settings.UPLOAD_MAX_BYTES = 1024
    response = api.post("/api/blobs/", {"file": SimpleUploadedFile("big.bin", b"x" * 5000)}, format="multipart")
    assert response.status_code == 413 and response.json()["error"]["code"] == "upload_too_large"


def test_environment_api_round_trip(api, environment):
    body = api.get("/api/environments/shell/").json()
    assert body["latest_version"] == 1 and body["spec"]["network"] == "none"
    response = api.post(
        "/api/environments/shell/versions/",
        {"spec": {**body["spec"], "setup": "true"}, "base_version": 1},
        format="json",
    )
    assert response.status_code == 201 and response.json()["number"] == 2
    response = api.post(
        "/api/environments/shell/versions/", {"spec": {"limits": {"cpus": "lots"}}, "base_version": 2}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["pointer"].startswith("/limits/cpus")


def test_openapi_schema_and_docs_are_served(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/api/tasks/{slug}/versions/" in schema.json()["paths"]
    docs = api.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


def test_openapi_schema_and_docs_need_a_login_unless_made_public(client, settings):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code in (401, 403) and schema.json()["error"]["code"] == "not_authenticated"
    assert client.get("/api/docs/").status_code in (401, 403)  # a script: the API's answer
    docs = client.get("/api/docs/", HTTP_ACCEPT="text/html")  # a browser: sent to sign in, and back (a bare 401)
    assert docs.status_code == 302 and docs.headers["Location"] == "/accounts/login/?next=/api/docs/"
    settings.API_DOCS_PUBLIC = True
    assert client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").status_code == 200
    assert client.get("/api/docs/").status_code == 200


def test_updated_at_follows_new_versions_and_the_list_is_sorted_by_it(api, author, environment):
    from datetime import datetime

    from authoring import services

    services.task_create(slug="older", environment=environment, author=author, content=task_content())
    services.task_create(slug="newer", environment=environment, author=author, content=task_content())
    for number in range(1, 5):
        response = api.post(
            "/api/tasks/older/versions/",
            {**task_content(title=f"Take {number}"), "base_version": number},
            format="json",
        )
        assert response.status_code == 201, response.content
    task = api.get("/api/tasks/older/").json()
    assert task["latest_version"] == 5
    created, updated = (datetime.fromisoformat(task[key]) for key in ("created_at", "updated_at"))
    fifth = datetime.fromisoformat(api.get("/api/tasks/older/versions/5/").json()["created_at"])
    assert updated > created and updated >= fifth
    listed = [row["slug"] for row in api.get("/api/tasks/").json()["results"]]
    assert listed.index("older") < listed.index("newer")  # edited last, listed first


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/St_Johns"])
def test_the_task_lists_dates_are_written_as_drfs_datetime_field_writes_them(zone, settings):
    """The task list writes its dates without DRF's field (gymwright.api.iso_datetime): the same text."""
    import datetime
    from zoneinfo import ZoneInfo

    from django.utils import timezone
    from rest_framework import serializers

    from gymwright.api import iso_datetime

    settings.TIME_ZONE = zone
    with timezone.override(ZoneInfo(zone)):
        for value in (
            datetime.datetime(2026, 11, 25, 1, 2, 3, tzinfo=datetime.UTC),
            datetime.datetime(2026, 6, 30, 23, 59, 59, 999999, tzinfo=datetime.UTC),
            datetime.datetime(2026, 3, 29, 0, 30, tzinfo=ZoneInfo("Asia/Kolkata")),
        ):
            assert iso_datetime(value) == serializers.DateTimeField().to_representation(value)
            assert iso_datetime(value, timezone.get_current_timezone()) == iso_datetime(value)  # a list's zone
    assert iso_datetime(None) is None


def test_the_api_keeps_a_prompt_as_sent_and_bounds_it_as_the_format_does(author, environment):
    """DRF trims a CharField by default: a prompt's leading blank line and final newline, which the editor keeps,
    were lost through the API, so the same text hashed differently by the two paths."""
    from authoring.models import Task
    from grading.engine.models import MAX_TAGS, PROMPT_MAX_CHARS

    client = APIClient()
    client.force_authenticate(author)
    body = {
        "slug": "kept-prompt",
        "environment": environment.slug,
        "title": "t",
        "prompt": "\n  Indented.\n",
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "a", "kind": "string_match", "points": 1, "expected": "x"}],
        },
    }
    assert client.post("/api/tasks/", body, format="json").status_code == 201
    assert Task.objects.get(slug="kept-prompt").latest_version.spec["prompt"] == "\n  Indented.\n"
    too_long = client.post(
        "/api/tasks/", {**body, "slug": "long", "prompt": "p" * (PROMPT_MAX_CHARS + 1)}, format="json"
    )
    assert too_long.status_code == 400 and too_long.json()["error"]["details"][0]["pointer"] == "/prompt"
    many = client.post(
        "/api/tasks/", {**body, "slug": "tags", "tags": [f"t{i}" for i in range(MAX_TAGS + 1)]}, format="json"
    )
    assert many.status_code == 400 and many.json()["error"]["details"][0]["pointer"] == "/tags"
