"""Error pages are the site's own pages (with DEBUG off, as in production), never Django's bare text."""

import pytest
from django.views import defaults

from authoring import services
from tests.authoring.conftest import task_content
from tests.support.users import make_user


@pytest.fixture
def author(db, django_user_model, settings):
    settings.DEBUG = False
    return make_user(django_user_model, "alice", "author")


@pytest.fixture
def logged_in(client, author):
    client.force_login(author)
    return client


def _is_site_page(html: str, status: int) -> bool:
    return 'class="topbar"' in html and f'data-status="{status}"' in html and "app.css" in html


def test_an_unknown_task_answers_the_sites_404_page(logged_in):
    response = logged_in.get("/tasks/nope/")
    html = response.content.decode()
    assert response.status_code == 404 and _is_site_page(html, 404)
    assert "<code>/tasks/nope/</code>" in html and 'href="/"' in html


def test_an_unknown_address_answers_the_sites_404_page(logged_in):
    response = logged_in.get("/no/such/page/")
    assert response.status_code == 404 and _is_site_page(response.content.decode(), 404)


def test_a_diff_of_non_numbers_is_a_400_on_the_site_page_naming_the_parameter(logged_in, author):
    environment = services.environment_create(slug="shell", name="Shell", author=author, spec={"network": "none"})
    services.task_create(slug="x", environment=environment, author=author, content=task_content())
    response = logged_in.get("/tasks/x/diff/?a=x")
    html = response.content.decode()
    assert response.status_code == 400 and 'class="topbar"' in html
    assert "<code>?a</code>: must be a version number" in html and "<code>?b</code>" not in html


def test_the_400_and_403_pages_extend_the_site_layout(rf, author):
    request = rf.get("/anything/")
    request.user = author
    bad = defaults.bad_request(request, Exception("boom"))
    assert bad.status_code == 400 and _is_site_page(bad.content.decode(), 400)
    assert "boom" not in bad.content.decode()  # nothing from the exception leaks
    denied = defaults.permission_denied(request, Exception("secret detail"))
    assert denied.status_code == 403 and _is_site_page(denied.content.decode(), 403)


def test_the_500_page_extends_the_site_layout_and_reads_no_database(rf, settings):
    settings.DEBUG = False
    # No database for this test: any query while rendering would raise instead of answering.
    response = defaults.server_error(rf.get("/tasks/"))
    assert response.status_code == 500 and _is_site_page(response.content.decode(), 500)


def test_a_form_over_the_body_cap_is_a_413_page_naming_the_cap(logged_in, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = logged_in.post("/tasks/new/", {"title": "x" * 5000})
    html = response.content.decode()
    assert response.status_code == 413 and _is_site_page(html, 413)
    assert "larger than the limit" in html and "DATA_UPLOAD_MAX_MEMORY_SIZE" in html
