"""Pack pages and the API: build with progress, download streamed with its sha256, verification,
the lab role's rights, imports by upload and in bulk."""

from __future__ import annotations

import hashlib
import io
import re

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from authoring.models import AuditEvent, Task
from packs import archive, services
from packs.models import PackVersion
from tests.packs.conftest import build_and_verify
from tests.packs.storage_hooks import hooked_storage  # noqa: F401 - a fixture


@pytest.fixture
def ready(lab, approved_tasks):
    pack = services.pack_create(slug="web-pack", user=lab, name="Web pack")
    pack_version = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    return build_and_verify(pack_version.pk)


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_a_lab_member_builds_from_the_page_and_it_shows_progress_then_contents(
    client, lab, approved_tasks, eager_celery, django_capture_on_commit_callbacks
):
    client.force_login(lab)
    assert client.post("/packs/", {"slug": "from-web", "name": "From web", "licence": "MIT"}).status_code == 302
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/packs/from-web/", {"test_ratio": "0.2", "tags": "maths"})
    assert response.status_code == 302 and response["Location"] == "/packs/from-web/1.0.0/"
    page = client.get("/packs/from-web/1.0.0/").content.decode()
    assert 'data-status="ready"' in page and "12/12" in page
    assert "difficulty-chart" in page and 'data-count="12"' in page  # not previewed: 12
    assert "/tasks/task-00/versions/1/" in page
    progress = client.get("/packs/from-web/1.0.0/progress/", HTTP_HX_REQUEST="true")
    assert progress["HX-Refresh"] == "true"
    verified = client.get("/packs/from-web/1.0.0/verification/").content.decode()
    assert 'id="verified"' in verified
    assert 'id="empty-split"' not in page


def test_check_shows_the_plan_and_a_build_of_the_same_tasks_asks_first(client, lab, ready):
    """The build form's Check shows what a build would make and writes nothing; a build that would publish the
    previous version's task versions again (a patch with no change) asks before it builds."""
    client.force_login(lab)
    page = client.post("/packs/web-pack/", {"test_ratio": "0.1", "tasks": "task-00, task-01", "action": "check"})
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="build-plan"' in text and "web-pack 2.0.0" in text and "10 removed" in text, text
    # two tasks at a ratio of 0.1: no task in test, which the plan says before anything is built
    assert "2 in train, 0 in test" in text and "The test split would be empty" in text, text
    # and names a ratio that fills both, which checks without the warning
    from packs.archive import test_ratio_filling_both

    both = test_ratio_filling_both(["task-00", "task-01"])
    assert f"a test\n      ratio of {both} puts tasks in both" in text, text
    fills = client.post("/packs/web-pack/", {"test_ratio": str(both), "tasks": "task-00, task-01", "action": "check"})
    assert "1 in train, 1 in test" in fills.content.decode() and "would be empty" not in fills.content.decode()
    assert (
        "would be empty"
        not in client.post("/packs/web-pack/", {"test_ratio": "0.5", "action": "check"}).content.decode()
    )
    assert PackVersion.objects.filter(pack__slug="web-pack").count() == 1  # nothing built
    same = client.post("/packs/web-pack/", {"test_ratio": "0.1", "action": "build"})
    assert same.status_code == 200 and PackVersion.objects.filter(pack__slug="web-pack").count() == 1
    text = same.content.decode()
    assert "Nothing changed since 1.0.0" in text and "Build 1.0.1 anyway" in text
    assert 'name="confirm" value="1"' in text
    other_ratio = client.post("/packs/web-pack/", {"test_ratio": "0.5", "action": "check"}).content.decode()
    assert "Nothing changed" not in other_ratio  # the same tasks, split differently
    built = client.post("/packs/web-pack/", {"test_ratio": "0.1", "action": "build", "confirm": "1"})
    assert built.status_code == 302 and built["Location"] == "/packs/web-pack/1.0.1/"
    bad = client.post("/packs/web-pack/", {"test_ratio": "0.1", "tasks": "nope", "action": "check"})
    assert bad.status_code == 400 and "There is no approved task" in bad.content.decode()
    assert 'id="build-plan"' not in bad.content.decode()


def test_the_build_form_shows_the_approved_tasks_tags_not_a_later_drafts(client, lab, author, reviewer, ready):
    """A pack selects by the approved version's tags (services.selected_versions): the page names those, with how
    many tasks carry each, and not a tag only a later draft has."""
    from authoring import services as authoring_services
    from tests.packs.conftest import make_approved

    make_approved(author=author, reviewer=reviewer, slug="physics-01", tags=("physics", "maths"))
    retagged = Task.objects.get(slug="task-00")
    authoring_services.task_version_create(
        task=retagged,
        author=author,
        base_version=1,
        content={**authoring_services.task_version_content(retagged.latest_version), "tags": ["draft-only"]},
    )
    client.force_login(lab)
    page = client.get("/packs/web-pack/").content.decode()
    shown = page.split('id="approved-tags"')[1].split("</p>")[0]
    assert '<span class="badge">maths</span>&nbsp;13' in shown  # task-00 keeps its approved version's tag
    assert '<span class="badge">physics</span>&nbsp;1' in shown and "draft-only" not in shown


def test_the_build_form_starts_from_the_last_versions_selection(client, lab, approved_tasks):
    """An empty form built every approved task: after a build of tags 'maths' and a 0.2 split, Build again selected
    everything. The form now starts from the latest version's selection."""
    pack = services.pack_create(slug="sel-pack", user=lab, name="Selection")
    client.force_login(lab)
    assert 'name="tags" value' not in client.get("/packs/sel-pack/").content.decode()  # a new pack: empty
    services.pack_version_start(
        pack=pack,
        user=lab,
        enqueue=False,
        selection=services.Selection(tags=("maths",), tasks=("task-00", "task-01"), test_ratio=0.2),
    )
    page = client.get("/packs/sel-pack/").content.decode()
    assert 'name="tags" value="maths"' in page and 'name="tasks" value="task-00, task-01"' in page
    assert 'name="test_ratio" value="0.2"' in page


def test_the_api_answers_a_dry_run_build_with_its_plan(lab, ready):
    api = token_client(lab)
    response = api.post("/api/packs/web-pack/versions/", {"tasks": ["task-00"], "dry_run": True}, format="json")
    assert response.status_code == 200, response.content
    plan = response.json()
    assert plan["version"] == "2.0.0" and plan["tasks"] == 1 and plan["previous"] == "1.0.0"
    assert plan["splits"] == {"train": 1, "test": 0} and plan["test_ratio_filling_both"] is None  # one task
    two = api.post("/api/packs/web-pack/versions/", {"tasks": ["task-00", "task-01"], "dry_run": True}, format="json")
    assert two.json()["test_ratio_filling_both"] == archive.test_ratio_filling_both(["task-00", "task-01"])
    assert len(plan["changes"]["removed"]) == 11 and plan["unchanged"] is False
    assert api.post("/api/packs/web-pack/versions/", {"dry_run": True}, format="json").json()["unchanged"] is True
    assert PackVersion.objects.filter(pack__slug="web-pack").count() == 1
    bad = api.post("/api/packs/web-pack/versions/", {"dry_run": True, "version": "0.1.0"}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["pointer"] == "/version"


def test_a_build_request_with_oversized_names_is_refused_at_its_pointer(lab, ready):
    """Selection names are ids: a megabyte-long tag, task id, environment or version is refused before any query
    or comparison, at its pointer."""
    api = token_client(lab)
    huge = "x" * 1_000_000
    for body, pointer in (
        ({"tags": [huge]}, "/tags/0"),
        ({"tasks": [huge]}, "/tasks/0"),
        ({"environment": huge}, "/environment"),
        ({"version": huge}, "/version"),
        ({"tags": [f"t{n}" for n in range(21)]}, "/tags"),
    ):
        response = api.post("/api/packs/web-pack/versions/", {**body, "dry_run": True}, format="json")
        assert response.status_code == 400, (pointer, response.content[:300])
        assert response.json()["error"]["details"][0]["pointer"] == pointer
        assert len(response.content) < 2000
    assert PackVersion.objects.filter(pack__slug="web-pack").count() == 1


def test_the_pack_page_warns_of_an_empty_split(client, lab, author, reviewer):
    from tests.packs.conftest import make_approved

    make_approved(author=author, reviewer=reviewer, slug="six-times-seven")  # hashes into train at 0.1
    pack = services.pack_create(slug="tiny", user=lab, name="Tiny")
    version = services.pack_version_build(
        pack_version_id=services.pack_version_start(
            pack=pack, user=lab, selection=services.Selection(), enqueue=False
        ).pk
    )
    assert version.manifest["counts"] == {"tasks": 1, "train": 1, "test": 0, "parquet": {"train": 1, "test": 0}}
    client.force_login(lab)
    page = client.get("/packs/tiny/1.0.0/").content.decode()
    assert 'id="empty-split"' in page and "The test split is empty" in page and "-T split=train" in page


def test_a_building_version_polls_and_a_failed_one_says_why(client, lab, approved_tasks):
    client.force_login(lab)
    pack = services.pack_create(slug="slow", user=lab)
    building = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    page = client.get("/packs/slow/1.0.0/").content.decode()
    assert 'hx-trigger="every 1s"' in page and "0/12" in page
    services.pack_version_fail(pack_version_id=building.pk, reason="the worker was stopped")
    page = client.get("/packs/slow/1.0.0/").content.decode()
    assert "Failed: the worker was stopped" in page and 'hx-trigger="every 1s"' not in page


def test_download_in_the_browser_and_the_api_is_streamed_with_length_sha256_and_etag(client, lab, ready):
    client.force_login(lab)
    response = client.get("/packs/web-pack/1.0.0/download/")
    body = b"".join(response.streaming_content)
    assert response.status_code == 200 and response.streaming
    assert int(response["Content-Length"]) == len(body) == ready.size
    assert hashlib.sha256(body).hexdigest() == ready.sha256 == response["X-Checksum-SHA256"]
    assert response["ETag"] == f'"{ready.sha256}"'
    assert "web-pack-1.0.0.tar.gz" in response["Content-Disposition"]
    api = token_client(lab)
    response = api.get("/api/packs/web-pack/versions/1.0.0/download/")
    assert (
        response.status_code == 200 and hashlib.sha256(b"".join(response.streaming_content)).hexdigest() == ready.sha256
    )
    assert (
        api.get("/api/packs/web-pack/versions/1.0.0/download/", HTTP_IF_NONE_MATCH=f'"{ready.sha256}"').status_code
        == 304
    )
    assert AuditEvent.objects.filter(verb="download").count() == 2


def test_authors_cannot_build_or_download_but_can_read(client, author, ready):
    client.force_login(author)
    assert client.get("/packs/web-pack/1.0.0/").status_code == 200
    assert client.get("/packs/web-pack/1.0.0/download/").status_code == 403
    assert client.post("/packs/web-pack/", {"test_ratio": "0.1"}).status_code in (400, 403)
    assert PackVersion.objects.count() == 1
    api = token_client(author)
    assert api.post("/api/packs/web-pack/versions/", {}, format="json").status_code == 403
    assert api.get("/api/packs/web-pack/versions/1.0.0/download/").status_code == 403


def test_the_api_builds_and_reports_bad_input_with_pointers(
    lab, approved_tasks, eager_celery, django_capture_on_commit_callbacks
):
    api = token_client(lab)
    assert api.post("/api/packs/", {"slug": "api-pack"}, format="json").status_code == 201
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/packs/api-pack/versions/", {"tasks": ["task-01", "task-02"]}, format="json")
    assert response.status_code == 202 and response.json()["version"] == "1.0.0"
    detail = api.get("/api/packs/api-pack/versions/1.0.0/").json()
    assert detail["status"] == "ready" and detail["counts"]["tasks"] == 2
    bad = api.post("/api/packs/api-pack/versions/", {"tasks": ["nope"]}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["pointer"] == "/tasks/0"
    lower = api.post("/api/packs/api-pack/versions/", {"version": "0.9.0"}, format="json")
    assert lower.status_code == 400 and lower.json()["error"]["details"][0]["pointer"] == "/version"


def test_bulk_import_endpoint_takes_a_list_of_tasks_and_reports_per_item(author):
    api = token_client(author)
    rows = [{"id": f"bulk-{i}", "prompt": f"Q{i}", "answer": "A", "criteria": "Is right"} for i in range(5)]
    rows.append({"id": "bulk-bad", "prompt": "", "criteria": "x"})
    response = api.post("/api/imports/bulk/", {"tasks": rows}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["imported"] == 5 and body["rejected"] == 1
    assert body["rows"][5] == {
        "where": "/tasks/5",
        "status": "rejected",
        "task": "bulk-bad",
        "message": "the prompt is empty",
        "pointer": "/prompt",
    }
    assert Task.objects.filter(slug__startswith="bulk-").count() == 5
    assert api.post("/api/imports/bulk/", {"tasks": []}, format="json").status_code == 400


def test_a_bulk_request_rejects_each_bad_item_at_its_pointer_and_imports_the_rest(author):
    """Before, one item that was not an object failed the whole request with a pandas message about a file the
    caller never sent ("rows.jsonl could not be read as a table: ..."); items without an id were named by
    their position and so made new versions of the tasks an earlier request had made."""
    api = token_client(author)
    document = {
        "schema": "gymwright.task/v1",
        "id": "bulk-doc",
        "title": "A document",
        "prompt": "Say hi",
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "hi", "kind": "string_match", "points": 1, "expected": "hi"}],
        },
    }
    items = [
        None,
        5,
        "text",
        {"prompt": "What is 2+2?", "answer": "4", "criteria": ["Says 4", "Shows work"]},
        document,
        {"question": "No answer nor criteria"},
        {"answer": "no prompt"},
    ]
    response = api.post("/api/imports/bulk/", {"tasks": items}, format="json")
    assert response.status_code == 200, response.content
    rows = response.json()["rows"]
    assert [row["status"] for row in rows] == [
        "rejected",
        "rejected",
        "rejected",
        "created",
        "created",
        "rejected",
        "rejected",
    ]
    assert [row["where"] for row in rows] == [f"/tasks/{index}" for index in range(7)]
    assert rows[0]["message"] == "expected an object with a prompt, got NoneType"
    assert rows[2]["message"] == "expected an object with a prompt, got str"
    assert rows[5]["pointer"] == "/rubric" and rows[6]["pointer"] == "/prompt"
    assert not any("rows.jsonl" in row.get("message", "") for row in rows)
    row_task = Task.objects.get(slug=rows[3]["task"])
    assert [check["criterion"] for check in row_task.latest_version.spec["rubric"]["checks"]] == [
        "Says 4",
        "Shows work",
    ]
    again = api.post(
        "/api/imports/bulk/",
        {"tasks": [{"prompt": "What is 3*3?", "answer": "9", "criteria": "9"}, items[3]]},
        format="json",
    ).json()["rows"]
    assert [row["status"] for row in again] == ["created", "unchanged"] and again[1]["task"] == rows[3]["task"]
    assert again[0]["task"] != rows[3]["task"] and row_task.versions.count() == 1


def test_the_import_page_uploads_a_file_and_shows_the_report(client, author):
    client.force_login(author)
    upload = io.BytesIO(b"id,prompt,criteria\nweb-1,Say hi,Greets\nweb-2,,Greets\n")
    upload.name = "rows.csv"
    page = client.post("/packs/import/", {"file": upload, "dry_run": "on"}).content.decode()
    assert "Dry run: nothing was written" in page and "would_create" in page and "the prompt is empty" in page
    assert not Task.objects.exists()
    hostile = io.BytesIO(b"not a tarball")
    hostile.name = "evil.tar.gz"
    response = client.post("/packs/import/", {"file": hostile})
    assert response.status_code == 400 and "not a readable .tar.gz" in response.content.decode()


def test_an_import_says_which_environment_its_tasks_go_to_and_whether_it_makes_one(client, author):
    """Rows without an environment, and none named, go to a new 'imported' environment: the dry run says so (it made
    one silently), the import says it made it, and a second import finds it."""
    from authoring.models import Environment
    from packs import importer

    client.force_login(author)
    upload = io.BytesIO(b"id,prompt,criteria\nenv-1,Say hi,Greets\nenv-2,Say bye,Leaves\n")
    upload.name = "rows.csv"
    page = client.post("/packs/import/", {"file": upload, "dry_run": "on"}).content.decode()
    shown = page.split('id="import-environments"')[1].split("</p>")[0]
    assert "<strong>imported</strong>" in shown and "2 tasks" in shown and "a new environment" in shown
    assert "would make" in shown and not Environment.objects.filter(slug="imported").exists()
    report = importer.tasks_import(
        path=None, documents=[{"id": "env-1", "prompt": "Say hi", "criteria": "Greets"}], user=author
    )
    assert report.environments == [{"environment": "imported", "tasks": 1, "new": True}]
    assert report.as_dict()["environments"] == report.environments
    assert report.environments_text() == "environment imported (new): 1 task"
    again = importer.tasks_import(
        path=None,
        documents=[
            {"id": "env-2", "prompt": "Say bye", "criteria": "Leaves"},
            {"id": "env-1", "prompt": "Say hi", "criteria": "Greets"},
        ],
        user=author,
    )
    assert again.environments == [{"environment": "imported", "tasks": 1, "new": False}]  # env-1: unchanged


def test_an_import_refuses_options_it_would_not_read(author):
    """`?dry_run=1` in the query string, or a field the endpoint does not know, used to be dropped: the
    "dry run" imported for real."""
    api = token_client(author)
    rows = [{"id": "opt-1", "prompt": "Q", "criteria": "Right"}]
    response = api.post("/api/imports/bulk/?dry_run=1", {"tasks": rows}, format="json")
    assert response.status_code == 400 and response.json()["error"]["details"][0]["pointer"] == "?dry_run"
    response = api.post("/api/imports/bulk/", {"tasks": rows, "dryrun": True}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["details"] == [
        {"pointer": "/dryrun", "message": "unknown field (the fields are: tasks, environment, dry_run)"}
    ]
    assert not Task.objects.filter(slug="opt-1").exists()
    assert api.post("/api/imports/bulk/", {"tasks": rows, "dry_run": True}, format="json").json()["dry_run"] is True
    assert not Task.objects.filter(slug="opt-1").exists()


def test_after_a_dry_run_the_page_imports_the_same_file_for_real_without_a_second_upload(
    client, author, other_author, settings, tmp_path
):
    settings.PACK_SCRATCH_DIR = tmp_path / "scratch"
    client.force_login(author)
    upload = io.BytesIO(b"id,prompt,criteria\nkept-1,Say hi,Greets\n")
    upload.name = "rows.csv"
    page = client.post("/packs/import/", {"file": upload, "dry_run": "on"}).content.decode()
    assert "Dry run: nothing was written" in page and "Import rows.csv for real" in page
    token = page.split('name="pending" value="')[1].split('"')[0]
    assert not Task.objects.exists()

    # the token is the uploader's: another author cannot import the kept file, nor a forged name
    other = client.__class__()
    other.force_login(other_author)
    assert other.post("/packs/import/", {"pending": token}).status_code == 400
    assert client.post("/packs/import/", {"pending": token + "x"}).status_code == 400
    assert not Task.objects.exists()

    page = client.post("/packs/import/", {"pending": token}).content.decode()
    assert "Imported — 1 ok, 0 rejected" in page and Task.objects.filter(slug="kept-1").exists()
    assert not any((tmp_path / "scratch" / "pending").iterdir())  # removed once imported
    again = client.post("/packs/import/", {"pending": token})
    assert again.status_code == 400 and "no longer kept" in again.content.decode()


def test_the_import_report_says_each_status_in_words_and_links_what_it_made(client, author):
    client.force_login(author)
    upload = io.BytesIO(b"id,prompt,criteria\nlinked-1,Say hi,Greets\nlinked-2,,Greets\n")
    upload.name = "rows.csv"
    page = client.post("/packs/import/", {"file": upload}).content.decode()
    assert '<span class="badge">created</span>' in page and '<span class="badge error">rejected</span>' in page
    assert '<a href="/tasks/linked-1/versions/1/">linked-1 v1</a>' in page


@pytest.fixture
def hooked_ready(hooked_storage, lab, approved_tasks):
    """A ready version built into the hooked storage (tests.packs.storage_hooks), its check after the build done."""
    return build_and_verify(
        services.pack_version_start(
            pack=services.pack_create(slug="web-pack", user=lab, name="Web pack"),
            user=lab,
            selection=services.Selection(),
            enqueue=False,
        ).pk
    )


def test_pages_show_the_stored_verification_and_never_read_the_archive(
    client, lab, author, hooked_storage, hooked_ready
):
    """The verification fragment read and hashed the whole archive twice on every load, for any role member."""
    hooked_storage.opened.clear()
    for user in (lab, author):
        client.force_login(user)
        for _ in range(3):
            page = client.get("/packs/web-pack/1.0.0/").content.decode()
            fragment = client.get("/packs/web-pack/1.0.0/verification/").content.decode()
            assert 'id="verified"' in page and 'id="verified"' in fragment
            assert "after the build" in fragment and 'data-state="verified"' in fragment
            assert 'hx-trigger="every 2s"' not in fragment  # nothing running: no polling
    assert ('id="verify-again"' in client.get("/packs/web-pack/1.0.0/").content.decode()) is False  # author
    detail = token_client(lab).get("/api/packs/web-pack/versions/1.0.0/").json()
    assert detail["verification"]["ok"] is True and detail["verification"]["requested_by"] is None
    assert detail["verification"]["checked_at"] and detail["verifying"] is False
    assert hooked_storage.opened == []


def test_verify_again_catches_a_tampered_archive_and_the_page_shows_it_failed_with_each_mismatch(
    client, lab, author, hooked_ready, eager_celery, django_capture_on_commit_callbacks, capsys
):
    import html

    from django.core.files.storage import default_storage
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from tests.packs.storage_hooks import tamper

    tamper(hooked_ready, {"tasks/task-04/solution/solve.sh": b"#!/bin/sh\necho 41\n"})
    client.force_login(lab)
    page = client.get("/packs/web-pack/1.0.0/").content.decode()
    assert 'id="verified"' in page and 'id="verify-again"' in page  # the stored check, until someone asks again
    with django_capture_on_commit_callbacks(execute=True):
        asked = client.post("/packs/web-pack/1.0.0/verification/", HTTP_HX_REQUEST="true")
    assert asked.status_code == 200
    assert 'id="verifying"' in asked.content.decode() and 'hx-trigger="every 2s"' in asked.content.decode()
    too_soon = client.post("/packs/web-pack/1.0.0/verification/", HTTP_HX_REQUEST="true")
    assert too_soon.status_code == 429 and "at most once every 60 s" in too_soon.content.decode()
    assert 'id="verify-failed"' in too_soon.content.decode()  # with the result it refers to
    for user in (lab, author):  # every role member reads the result
        client.force_login(user)
        page = html.unescape(client.get("/packs/web-pack/1.0.0/").content.decode())
        assert 'id="verify-failed"' in page and 'id="verified"' not in page and "at lena's request" in page
    with pytest.raises(CommandError):
        call_command("verify_pack", default_storage.path(hooked_ready.archive.name))
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 1 and listed[0].startswith("tasks/task-04/solution/solve.sh: sha256 ")
    shown = page.split('id="verify-problems"')[1].split("</ul>")[0]
    assert shown.count("<li>") == 2 and f"<li>{listed[0]}</li>" in shown
    assert "<li>the archive's sha256 " in shown and f"is not the recorded {hooked_ready.sha256}" in shown
    detail = token_client(lab).get("/api/packs/web-pack/versions/1.0.0/").json()["verification"]
    assert detail["ok"] is False and detail["problems"][0] == listed[0] and detail["requested_by"] == "lena"
    client.force_login(author)
    assert client.post("/packs/web-pack/1.0.0/verification/", HTTP_HX_REQUEST="true").status_code == 403


def test_the_diff_links_each_change_to_the_task_versions_it_names(client, lab, author, reviewer, admin, approved_tasks):
    """Added: the version in this pack; removed: the one in the previous pack; changed: the task's version diff.
    Each link opens for a lab member, on the right versions (an added task's later approved version is not the
    pack's)."""
    from authoring import services as authoring_services
    from review import services as review_services

    def approve_new_version(task, prompt):
        authoring_services.task_version_create(
            task=task,
            author=author,
            base_version=task.latest_version.number,
            content={**authoring_services.task_version_content(task.latest_version), "prompt": prompt},
        )
        task.refresh_from_db()
        review_services.task_submit(task=task, user=admin, override_reason="no previews in this test")
        review_services.review_create(task_version=task.latest_version, reviewer=reviewer, decision="approve")

    pack = services.pack_create(slug="diff-pack", user=lab)
    slugs = [task.slug for task in approved_tasks]
    services.pack_version_build(
        pack_version_id=services.pack_version_start(
            pack=pack, user=lab, selection=services.Selection(tasks=tuple(slugs[:5])), enqueue=False
        ).pk
    )
    approve_new_version(approved_tasks[2], "reworded")
    second = services.pack_version_build(
        pack_version_id=services.pack_version_start(
            pack=pack, user=lab, selection=services.Selection(tasks=(*slugs[:4], slugs[6])), enqueue=False
        ).pk
    )
    assert second.version == "2.0.0"
    approve_new_version(approved_tasks[6], "after the pack")  # task-06 is at v2 now; the pack has v1
    client.force_login(lab)
    page = client.get("/packs/diff-pack/2.0.0/").content.decode()
    assert "Changes since 1.0.0" in page
    diff = page.split('id="pack-diff"')[1].split("</ul>")[0]
    links = {
        kind: href.replace("&amp;", "&")
        for kind, href in re.findall(r'data-change="(\w+)">\w+\s*<a href="([^"]+)"', diff)
    }
    assert links == {
        "added": "/tasks/task-06/versions/1/",
        "removed": "/tasks/task-04/versions/1/",
        "changed": "/tasks/task-02/diff/?a=1&b=2",
    }
    for kind, href in links.items():
        response = client.get(href)
        assert response.status_code == 200, (kind, href)
        if kind == "changed":
            assert (response.context["a"].number, response.context["b"].number) == (1, 2)
            assert response.context["task"].slug == "task-02"
        else:
            assert (response.context["version"].task.slug, response.context["version"].number) == (
                {"added": "task-06", "removed": "task-04"}[kind],
                1,
            )


def test_the_api_refuses_an_archived_task_in_the_list_at_its_pointer(lab, approved_tasks):
    Task.objects.filter(slug="task-02").update(status=Task.Status.ARCHIVED)
    api = token_client(lab)
    assert api.post("/api/packs/", {"slug": "api-pack"}, format="json").status_code == 201
    for dry_run in (True, False):
        response = api.post(
            "/api/packs/api-pack/versions/", {"tasks": ["task-01", "task-02"], "dry_run": dry_run}, format="json"
        )
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["message"] == "Task 'task-02' is archived."
        assert error["details"] == [{"pointer": "/tasks/1", "message": "archived"}]
    assert not PackVersion.objects.exists()
