"""The import and pack build forms as a new user meets them: a CSV from a spreadsheet in another locale, the
environments to choose from, and each refusal said once, in words, under its field (the walkthrough read
"/file: unknown kind of file" under the field and the same refusal again on top)."""

from __future__ import annotations

import io
import re

import pytest

from authoring import services as authoring_services
from authoring.models import Task
from packs import importer, services
from tests.packs.conftest import make_approved

pytestmark = pytest.mark.django_db


def upload(name: str, data: bytes) -> io.BytesIO:
    handle = io.BytesIO(data)
    handle.name = name
    return handle


def field_errors(page: str, field: str) -> list[str]:
    """The error texts a page shows under `field`: Django's list (as_p, as_field_group) or the page's own
    .field-error lines."""
    listed = re.findall(rf'<ul class="errorlist" id="id_{field}_error">(.*?)</ul>', page, re.S)
    return re.findall(r"<li>(.*?)</li>", "".join(listed), re.S) + re.findall(
        rf'<div class="field-error" data-field="{field}">(.*?)</div>', page, re.S
    )


@pytest.mark.parametrize(
    "data",
    [
        b"id;prompt;criteria\nsemi-1;Say hi;Greets the user\nsemi-2;Say bye;Says goodbye\n",  # Excel where , is a decimal
        b"\xef\xbb\xbfprompt;id;criteria\nSay hi;semi-1;Greets the user\nSay bye;semi-2;Says goodbye\n",  # CSV UTF-8
        b"id\tprompt\tcriteria\nsemi-1\tSay hi\tGreets the user\nsemi-2\tSay bye\tSays goodbye\n",
    ],
    ids=["semicolons", "semicolons-after-a-byte-order-mark", "tabs"],
)
def test_a_csv_separated_by_semicolons_or_tabs_imports(author, tmp_path, data):
    path = tmp_path / "rows.csv"
    path.write_bytes(data)
    report = importer.tasks_import(path=path, user=author)
    assert (report.imported, report.rejected) == (2, 0)
    assert Task.objects.get(slug="semi-1").latest_version.spec["prompt"] == "Say hi"


def test_a_csv_without_a_prompt_column_names_the_columns_it_has_and_how_they_were_split(client, author):
    client.force_login(author)
    response = client.post(
        "/packs/import/", {"file": upload("rows.csv", b"id;task text;answer\n1;Say hi;hi\n"), "dry_run": "on"}
    )
    page = response.content.decode()
    assert response.status_code == 400
    assert (
        "rows.csv has no prompt column: its columns are &#x27;id&#x27;, &#x27;task text&#x27;, &#x27;answer&#x27; "
        "(split at semicolons)"
    ) in page
    assert "prompt, question, instruction or input" in page and "semicolons, tabs or vertical bars" in page
    assert page.count("has no prompt column") == 1
    path_page = client.post("/packs/import/", {"file": upload("rows.jsonl", b'{"id": "1", "text": "hi"}\n')})
    assert (
        "rows.jsonl has no prompt column: its columns are &#x27;id&#x27;, &#x27;text&#x27;."
        in path_page.content.decode()
    )


def test_an_unknown_kind_of_file_is_refused_once_in_words_under_the_file_field(client, author):
    client.force_login(author)
    page = client.post("/packs/import/", {"file": upload("notes.txt", b"hello")}).content.decode()
    assert field_errors(page, "file") == ["notes.txt: import a tasks.jsonl, a .csv/.jsonl/.parquet table or a .tar.gz."]
    assert page.count("import a tasks.jsonl") == 1 and "/file" not in page and "unknown kind of file" not in page


def test_the_import_form_offers_the_environments_that_exist(client, author, other_author):
    for slug in ("shell", "finance-desk"):
        authoring_services.environment_create(slug=slug, name=slug, author=author, spec={"network": "none"})
    client.force_login(author)
    page = client.get("/packs/import/").content.decode()
    select = re.search(r'<select name="environment" id="id_environment">(.*?)</select>', page, re.S).group(1)
    assert re.findall(r'<option value="([^"]*)"', select) == ["", "finance-desk", "shell"]
    assert "“imported” (made by this import)" in select and " selected>—" in select
    response = client.post(
        "/packs/import/",
        {"file": upload("rows.csv", b"prompt,criteria\nSay hi,Greets\n"), "environment": "finance-desk"},
    )
    assert response.status_code == 200
    assert Task.objects.get().environment.slug == "finance-desk"
    # A name that is not there (sent by hand, or from a page loaded before it went) stays chosen, refused once.
    page = client.post(
        "/packs/import/", {"file": upload("rows.csv", b"prompt,criteria\nSay bye,Leaves\n"), "environment": "gone"}
    ).content.decode()
    select = re.search(r'<select name="environment" id="id_environment">(.*?)</select>', page, re.S).group(1)
    assert '<option value="gone" selected>gone (no such environment)</option>' in select
    assert field_errors(page, "environment") == ["There is no environment &#x27;gone&#x27;."]
    assert page.count("There is no environment") == 1


def test_a_version_lower_than_the_proposal_is_refused_once_in_words_under_the_version_field(
    client, lab, author, reviewer
):
    make_approved(author=author, reviewer=reviewer, slug="first-task")
    pack = services.pack_create(slug="form-pack", user=lab, name="Form pack")
    services.pack_version_build(
        pack_version_id=services.pack_version_start(
            pack=pack, user=lab, selection=services.Selection(), enqueue=False
        ).pk
    )
    make_approved(author=author, reviewer=reviewer, slug="second-task")
    client.force_login(lab)
    response = client.post("/packs/form-pack/", {"action": "check", "version": "1.0.1", "test_ratio": "0.1"})
    page = response.content.decode()
    assert response.status_code == 400
    assert field_errors(page, "version") == [
        "Version 1.0.1 is lower than the proposed 1.1.0; a version may be raised, never lowered or reused "
        "(a failed one&#x27;s number is free)."
    ]
    assert page.count("is lower than the proposed") == 1
    assert "/version" not in page and "lower than the proposal" not in page
    page = client.post(
        "/packs/form-pack/", {"action": "check", "tasks": "first-task, nope, ghost", "test_ratio": "0.1"}
    ).content.decode()
    # Two problems in one field: the sentence (naming them) on top, each at its place in the list, in words (a lab
    # member's: a draft and a task that does not exist read alike).
    assert field_errors(page, "tasks") == ["Item 2: no approved task.", "Item 3: no approved task."]


def test_a_dry_run_that_would_import_nothing_offers_no_import_and_says_how_rows_are_counted(client, author):
    client.force_login(author)
    rows = b"prompt,answer\nWhat is 6 x 7?,42\n,7\n"  # no rubric or criteria: every row is refused
    page = client.post("/packs/import/", {"file": upload("rows.csv", rows), "dry_run": "on"}).content.decode()
    assert "0 ok, 2 rejected" in page
    assert 'id="import-pending"' not in page and 'id="import-nothing"' in page
    assert 'id="import-row-numbers"' in page and "in a CSV, the line after its header" in page
    good = b"prompt,answer,criteria\nWhat is 6 x 7?,42,States 42\n"
    page = client.post("/packs/import/", {"file": upload("good.csv", good), "dry_run": "on"}).content.decode()
    assert 'id="import-pending"' in page and 'id="import-nothing"' not in page
