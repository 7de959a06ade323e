"""Attached files open in the browser: text is shown as plain text, anything else is downloaded,
and no file (whatever its name or content) is ever rendered as HTML or sniffed into a script."""

from __future__ import annotations

import pytest

from authoring import services
from tests.authoring.conftest import task_content

pytestmark = pytest.mark.django_db

HOSTILE_HTML = b"<html><script>fetch('/account/').then(r => r.text()).then(steal)</script></html>"


@pytest.fixture
def files_task(author, environment):
    files = []
    for path, data in [
        ("notes/readme.md", "# Notes\nCaf\u00e9 \u2014 42\n".encode()),
        ("evil.html", HOSTILE_HTML),
        ("chart.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)),
        ("latin1.txt", "na\u00efve".encode("latin-1")),
    ]:
        files.append({"path": path, "sha256": services.blob_store(data=data).sha256})
    return services.task_create(
        slug="with-files", environment=environment, author=author, content=task_content(files=files)
    )


def url(path: str, number: int = 1) -> str:
    return f"/tasks/with-files/versions/{number}/files/{path}"


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def test_a_text_file_is_shown_as_plain_text(client, author, files_task):
    client.force_login(author)
    response = client.get(url("notes/readme.md"))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"].startswith("inline") and "readme.md" in response["Content-Disposition"]
    assert body(response).decode() == "# Notes\nCaf\u00e9 \u2014 42\n"


def test_an_html_file_is_never_rendered_as_html(client, author, files_task):
    client.force_login(author)
    response = client.get(url("evil.html"))
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert body(response) == HOSTILE_HTML


@pytest.mark.parametrize("path", ["chart.png", "latin1.txt"])
def test_binary_or_non_utf8_files_are_downloaded(client, author, files_task, path):
    client.force_login(author)
    response = client.get(url(path))
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"].startswith("attachment") and path in response["Content-Disposition"]
    assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("path", ["nope.txt", "../evil.html", "notes/../evil.html", "notes"])
def test_only_the_versions_own_files_are_served(client, author, files_task, path):
    client.force_login(author)
    assert client.get(url(path)).status_code == 404


def test_members_without_a_role_cannot_read_files(client, django_user_model, files_task):
    from tests.support.users import make_user

    client.force_login(make_user(django_user_model, "nobody"))
    assert client.get(url("notes/readme.md")).status_code in (403, 404)


def test_the_task_page_links_each_attached_file(client, author, files_task):
    client.force_login(author)
    html = client.get("/tasks/with-files/").content.decode()
    assert f'href="{url("notes/readme.md")}"' in html and f'href="{url("chart.png")}"' in html


def test_a_long_text_changed_in_one_line_is_diffed_in_its_middle_only(settings):
    """Over the line pairs limit, the lines both texts start and end with are taken off first: a one-line edit
    of a long file still shows as that one line, not as the whole file removed and added."""
    from authoring.diff import line_diff

    settings.DIFF_MAX_CELLS = 100
    old = "\n".join(f"line {n}" for n in range(1000))
    new = old.replace("line 500", "line five hundred")

    lines = line_diff(old, new)

    changed = [(line.op, line.text) for line in lines if line.op != "equal"]
    assert changed == [("delete", "line 500"), ("insert", "line five hundred")]
    assert len(lines) == 1001
