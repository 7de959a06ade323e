"""What a lab member and an author see in a real Chromium matches what they may do: the navigation shows only
the links that answer them, every link on the pages they open (as the browser shows them, fragments loaded)
answers 200, and nothing loads a fragment they are refused (no console error)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import PASSWORD, TIMEOUT_MS
from tests.e2e.test_pages_browser import CSP_LISTENER, artifacts_dir
from tests.gymwright.test_links_by_role import build_world

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=TIMEOUT_MS)

PAGES = ["/", "/environments/shell/", "/packs/", "/inbox/", "/tasks/five/", "/tasks/shipped/"]
SAME_ORIGIN_LINKS = """(origin) => [...document.querySelectorAll("a[href]")]
  .map((a) => a.href.split("#")[0]).filter((href) => href.startsWith(origin + "/")
    && !href.startsWith(origin + "/static/") && !href.startsWith(origin + "/admin/"))"""


@pytest.fixture
def site(transactional_db, django_user_model):
    return build_world(django_user_model, password=PASSWORD)


@pytest.fixture
def visit(browser, live_server, site):
    """visit(role) -> a page logged in as that role; console errors and page errors fail the test."""
    contexts, problems = [], []

    def login(role: str):
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(TIMEOUT_MS)
        context.add_init_script(CSP_LISTENER)
        contexts.append(context)
        page = context.new_page()
        page.on(
            "console", lambda msg: problems.append(f"{role} {page.url}: {msg.text}") if msg.type == "error" else None
        )
        page.on("pageerror", lambda exc: problems.append(f"{role} {page.url}: {exc}"))
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", site[role].username)
        page.fill("input[name=password]", PASSWORD)
        page.click("form button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        return page

    yield login
    for context in contexts:
        context.close()
    assert not problems, problems


def refused_links(page, live_server, role: str, paths: list[str]) -> list[str]:
    """Each link the browser shows on `paths` that answers 4xx (each page opened, its fragments loaded)."""
    answers: dict[str, int] = {}
    problems = []
    for path in paths:
        response = page.goto(live_server.url + path)
        assert response.status == 200, (path, response.status)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(artifacts_dir() / f"roles-{role}{path.replace('/', '-')}.png"), full_page=True)
        for href in sorted(set(page.evaluate(SAME_ORIGIN_LINKS, live_server.url))):
            if href not in answers:
                answers[href] = page.request.get(href, max_redirects=0).status
            if answers[href] >= 400:
                problems.append(f"{path} links to {href}: {answers[href]}")
    return problems


@pytest.mark.parametrize("role", ["lab", "author"])
def test_a_lab_member_and_an_author_are_shown_only_what_answers_them(visit, live_server, site, role):
    page = visit(role)
    nav = page.locator("header.topbar nav")
    expect(nav.get_by_role("link", name="Tasks")).to_be_visible()
    expect(nav.get_by_role("link", name="Review")).to_have_count(0)
    assert refused_links(page, live_server, role, PAGES) == []
    page.goto(f"{live_server.url}/")
    tags = page.locator("select[name=tag] option").all_inner_texts()  # the task list's Tag filter
    assert tags == (["any", "maths", "shown"] if role == "lab" else ["any", "maths", "secret-tag", "shown"])
    page.goto(f"{live_server.url}/packs/")
    expect(page.get_by_role("link", name="Import tasks")).to_have_count(1 if role == "author" else 0)
    page.goto(f"{live_server.url}/tasks/five/")
    expect(page.get_by_role("button", name="Run gates")).to_have_count(0 if role == "lab" else 1)
    history = page.get_by_role("link", name=re.compile(r"^History"))
    expect(history).to_have_text("History (2)" if role == "lab" else "History (5)")  # the versions they may open
    history.click()
    expect(page.locator("tr.version-row")).to_have_count(2 if role == "lab" else 5)
    page.go_back()
    # The example answers say what changed since the version before that the reader may open: v4 (a draft)
    # for its author, none for a lab member (v2, the approved one before, did not break them), to whom no task
    # version but 2 and 5 is named.
    expect(page.locator("#example-answers .example-changed")).to_have_count(1 if role == "author" else 0)
    if role == "author":
        expect(page.locator("#example-answers .example-changed")).to_have_text("changed: was “not as expected” on v4")
    else:
        named = re.findall(r"(?<!environment shell )\bv(\d+)\b", page.inner_text("main"))  # task versions
        assert set(named) == {"2", "5"}
    page.goto(live_server.url + site["preview"])
    expect(page.get_by_role("button", name="Cancel preview")).to_have_count(0 if role == "lab" else 1)
