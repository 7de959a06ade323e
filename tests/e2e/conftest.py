"""Browser tests: a real headless Chromium driven by Playwright against pytest-django's live_server.

Playwright's sync API runs an asyncio loop in this thread, which makes Django refuse
ORM calls from the test body unless DJANGO_ALLOW_ASYNC_UNSAFE is set. The live
server thread has its own connections; the test only creates fixtures with the ORM.
"""

from __future__ import annotations

import os
import shutil

import pytest
from django.contrib.auth.models import Group

from authoring import services
from tests.support.services import require_chromium, require_playwright

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-quic",
    "--disable-sync",
]
PASSWORD = "pw-e2e-author-1"
# Generous enough for a loaded CI machine; the editor itself answers in well under a second.
TIMEOUT_MS = 15_000
# Collected by an init script (Playwright injects it outside the page's CSP).
CSP_LISTENER = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(e.violatedDirective + " blocked " + (e.blockedURI || "inline") +
                              " at " + e.sourceFile + ":" + e.lineNumber);
});
"""


def _chromium_path() -> str:
    if os.path.exists("/usr/bin/chromium"):
        return "/usr/bin/chromium"
    return require_chromium()  # skips with a how-to, or fails when GYMWRIGHT_REQUIRE_SERVICES=1


@pytest.fixture(scope="session")
def browser():
    sync_playwright = require_playwright()  # skips with a how-to, or fails when GYMWRIGHT_REQUIRE_SERVICES=1
    path = _chromium_path()
    if not shutil.which(path) and not os.path.exists(path):
        require_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def author(transactional_db, django_user_model):
    user = django_user_model.objects.create_user(username="ada", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="author")[0])
    return user


@pytest.fixture
def environment(author):
    return services.environment_create(slug="shell", name="Shell", author=author, spec={"network": "none"})


def sign_in(page, base_url: str, username: str, password: str = PASSWORD) -> None:
    """Sign in through the login form, as a person does, and land on the task list."""
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("form button[type=submit]")
    page.wait_for_url(f"{base_url}/")


@pytest.fixture
def logged_in(page, live_server, author):
    """The page, logged in as the author, on the task list."""
    sign_in(page, live_server.url, author.username)
    return page


@pytest.fixture
def watched(logged_in):
    """`logged_in`, failing the test on any console error or Content-Security-Policy violation."""
    page = logged_in
    page.context.add_init_script(CSP_LISTENER)
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    yield page
    if not page.is_closed():
        problems += [f"CSP: {violation}" for violation in page.evaluate("window.__cspViolations || []")]
    assert not problems, "\n".join(problems)


def wait_for_editor(page) -> None:
    """The rubric editor has loaded the schema and rendered the structured view."""
    page.wait_for_selector("#rubric-editor[data-ready=true]")
