"""The production server: gunicorn with DEBUG off serves a working, styled site by itself.

Issue: every /static/ URL answered 404 under gunicorn with DEBUG off. This starts the real
`make serve` pieces (collectstatic, then gunicorn with gymwright.gunicorn_conf) against the
test database and fetches a page and each stylesheet and script it links.
"""

from __future__ import annotations

import re

import httpx
import pytest

from tests.support.servers import gunicorn_serving, sign_in
from tests.support.users import make_user

PASSWORD = "pw-gunicorn-1"


@pytest.fixture
def gunicorn_server(transactional_db, tmp_path):
    with gunicorn_serving(tmp_path) as server:
        yield server.base


def test_gunicorn_with_debug_off_serves_hashed_cached_static_files(gunicorn_server, django_user_model):
    make_user(django_user_model, "gina", "author", password=PASSWORD)
    with httpx.Client(base_url=gunicorn_server, timeout=10) as client:
        sign_in(client, username="gina", password=PASSWORD)
        page = client.get("/tasks/new/")
        assert page.status_code == 200
        assets = re.findall(r'(?:href|src)="(/static/[^"]+)"', page.text)
        assert any(a.endswith(".css") for a in assets) and any(a.endswith(".js") for a in assets), assets
        for asset in assets:
            # Content-hashed names (name.<12 hex>.ext) that can be cached for a year.
            assert re.search(r"\.[0-9a-f]{12}\.(css|js|svg|png|ico|woff2?)$", asset), asset
            r = client.get(asset, headers={"Accept-Encoding": "gzip"})
            assert r.status_code == 200, asset
            assert "max-age=315360000" in r.headers.get("cache-control", ""), (asset, r.headers)
            assert r.content, asset
        # A static URL that does not exist is a plain 404, not a page.
        assert client.get("/static/nope.css").status_code == 404
