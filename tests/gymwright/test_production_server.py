"""The production server: gunicorn with DEBUG off serves a working, styled site by itself.

Issue: every /static/ URL answered 404 under gunicorn with DEBUG off. This starts the real
`make serve` pieces (collectstatic, then gunicorn with gymwright.gunicorn_conf) against the
test database and fetches a page and each stylesheet and script it links, compressed; follows the rubric
editor's ES-module imports; and opens the editor in headless Chromium.
"""

from __future__ import annotations

import importlib.util
import re
from urllib.parse import urljoin

import httpx
import pytest

from tests.support.servers import ROOT, gunicorn_serving, sign_in
from tests.support.users import make_user

PASSWORD = "pw-gunicorn-1"


@pytest.fixture(scope="module")
def gunicorn_server(django_db_setup, tmp_path_factory):
    """One server for the module (collectstatic and two workers' boot take seconds); each test makes its users."""
    with gunicorn_serving(tmp_path_factory.mktemp("gunicorn")) as server:
        yield server.base


@pytest.fixture(autouse=True)
def _committed(transactional_db):
    """Rows the tests make are committed, so the server's own connections see them."""


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


def test_gunicorn_sends_static_files_compressed_to_a_client_that_accepts_it(gunicorn_server, django_user_model):
    """WhiteNoise serves the gzip copy collectstatic wrote (and brotli's, when the brotli package made one), with
    `Vary: Accept-Encoding`; a client that accepts neither gets the file as it is."""
    make_user(django_user_model, "gina", "author", password=PASSWORD)
    brotli = importlib.util.find_spec("brotli") is not None
    with httpx.Client(base_url=gunicorn_server, timeout=10) as client:
        sign_in(client, username="gina", password=PASSWORD)
        assets = re.findall(r'(?:href|src)="(/static/[^"]+\.(?:css|js))"', client.get("/tasks/new/").text)
        assert len(assets) >= 3, assets
        for asset in assets:
            plain = client.get(asset, headers={"Accept-Encoding": "identity"})
            assert plain.status_code == 200 and "content-encoding" not in plain.headers, (asset, plain.headers)
            gzipped = client.get(asset, headers={"Accept-Encoding": "gzip"})
            if len(plain.content) < 200:  # too small to gain from compressing: collectstatic keeps no copy
                continue
            assert gzipped.headers.get("content-encoding") == "gzip", (asset, gzipped.headers)
            assert "accept-encoding" in gzipped.headers.get("vary", "").lower(), (asset, gzipped.headers)
            assert int(gzipped.headers["content-length"]) < len(plain.content), asset
            assert gzipped.content == plain.content, asset  # httpx decoded it: the same file
            if brotli:
                both = client.get(asset, headers={"Accept-Encoding": "gzip, br"})
                assert both.headers.get("content-encoding") == "br", (asset, both.headers)


def _module_imports(source: str) -> list[str]:
    """The specifiers of a module's static imports and re-exports (`import ... from "x"`, `import "x"`)."""
    return re.findall(r'^(?:import|export)\s+(?:[\w*{}\s,$]+?\s+from\s+)?["\']([^"\']+)["\'];?\s*$', source, re.M)


def test_the_rubric_editor_s_modules_import_each_other_by_their_hashed_names(gunicorn_server, django_user_model):
    """The editor is native ES modules that import each other by relative URL: under collectstatic's hashed names
    each import must name a hashed file that answers 200 (a plain name would mix a new main.js with a year-cached
    old module, or 404)."""
    make_user(django_user_model, "gina", "author", password=PASSWORD)
    with httpx.Client(base_url=gunicorn_server, timeout=10) as client:
        sign_in(client, username="gina", password=PASSWORD)
        page = client.get("/tasks/new/")
        entries = re.findall(r'<script type="module" src="([^"]+)"', page.text)
        # The editor's one entry, beside the page's own small modules (file roles, the error summary, the copilot's
        # panel on a saved task's form).
        assert (
            [url for url in entries if "/rubric_editor/" in url]
            == [url for url in entries if "/rubric_editor/main." in url]
            != []
        ), entries
        seen, todo = {}, list(entries)
        while todo:
            url = todo.pop()
            if url in seen:
                continue
            response = client.get(url)
            assert response.status_code == 200, f"{url} answered {response.status_code}"
            assert "javascript" in response.headers["content-type"], (url, response.headers)
            assert re.search(r"\.[0-9a-f]{12}\.js$", url), f"{url} is not a content-hashed name"
            imports = _module_imports(response.text)
            seen[url] = imports
            todo += [urljoin(url, specifier) for specifier in imports]
    served = {
        re.sub(r"\.[0-9a-f]{12}\.js$", ".js", url.rsplit("/", 1)[1]): imports
        for url, imports in seen.items()
        if "/rubric_editor/" in url
    }
    sources = {
        path.name: _module_imports(path.read_text()) for path in (ROOT / "static" / "js" / "rubric_editor").glob("*.js")
    }
    assert served.keys() == sources.keys(), (served, sources)  # every module of the editor, reached by its imports
    for name, imports in sources.items():  # each import of the source, rewritten to its hashed name
        assert [re.sub(r"\.[0-9a-f]{12}\.js$", ".js", specifier) for specifier in served[name]] == imports, name


def test_the_rubric_editor_loads_in_a_browser_under_gunicorn(gunicorn_server, django_user_model):
    """Headless Chromium signs in and opens the task form under the production server: the editor becomes ready,
    with no console error, no failed request and no response of 400 or more."""
    from tests.sandbox.test_preview_browser import in_browser

    make_user(django_user_model, "gina", "author", password=PASSWORD)
    problems: list[str] = []

    def steps(page):
        page.on(
            "console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None
        )
        page.on("requestfailed", lambda request: problems.append(f"failed: {request.url} {request.failure}"))
        page.on(
            "response",
            lambda response: problems.append(f"{response.status}: {response.url}") if response.status >= 400 else None,
        )
        page.goto(f"{gunicorn_server}/accounts/login/")
        page.fill("input[name=username]", "gina")
        page.fill("input[name=password]", PASSWORD)
        page.click("form button[type=submit]")
        page.wait_for_url(f"{gunicorn_server}/")
        page.goto(f"{gunicorn_server}/tasks/new/")
        page.wait_for_selector("#rubric-editor[data-ready=true]")
        page.wait_for_load_state("networkidle")
        assert page.locator("#rubric-structured").inner_text().strip(), "the editor rendered nothing"
        scripts = page.evaluate("Array.from(performance.getEntriesByType('resource'), (e) => e.name)")
        loaded = [url for url in scripts if "/rubric_editor/" in url]
        assert len(loaded) == len(list((ROOT / "static" / "js" / "rubric_editor").glob("*.js"))), loaded
        assert all(re.search(r"\.[0-9a-f]{12}\.js$", url) for url in loaded), loaded

    in_browser(steps)
    assert not problems, "\n".join(problems)
