import pytest

from tests.support.users import make_user


def test_favicon_ico_leads_anyone_to_the_shipped_icon(client, db):
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"].endswith(".svg")
    icon = client.get(response["Location"])
    assert icon.status_code == 200 and b"<svg" in b"".join(icon.streaming_content)


@pytest.mark.parametrize("url", ["/", "/accounts/login/"])
def test_every_page_links_the_icon(client, django_user_model, url):
    client.force_login(make_user(django_user_model, "alice", "author"))
    html = client.get(url, follow=True).content.decode()
    assert '<link rel="icon" href="/static/favicon' in html and 'type="image/svg+xml"' in html
