"""Security headers: a Content-Security-Policy on every response, HSTS when SECURE_COOKIES is on.

The browser side (each main page served with the policy and no violation in Chromium) is
tests/e2e/test_pages_browser.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.users import make_user

ROOT = Path(__file__).resolve().parents[2]


def _settings_value(name: str, **env: str) -> str:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "gymwright.settings", **env}
    code = f"import django; django.setup(); from django.conf import settings; print(settings.{name})"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


def test_hsts_is_on_only_with_secure_cookies():
    assert _settings_value("SECURE_HSTS_SECONDS", SECURE_COOKIES="true") == "31536000"
    assert _settings_value("SECURE_HSTS_SECONDS", SECURE_COOKIES="false") == "0"
    assert _settings_value("SECURE_HSTS_SECONDS", SECURE_COOKIES="true", SECURE_HSTS_SECONDS="600") == "600"


@pytest.mark.django_db
def test_an_https_response_carries_hsts_when_configured(client, settings):
    settings.SECURE_HSTS_SECONDS = 31536000
    response = client.get("/accounts/login/", secure=True)
    assert response["Strict-Transport-Security"] == "max-age=31536000"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/api/schema/rubric.json", "/healthz", "/no-such-page/"])
def test_every_response_has_a_csp_without_inline_script(client, django_user_model, path):
    client.force_login(make_user(django_user_model, "ada", "author"))
    csp = client.get(path)["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/tasks/new/"])
def test_no_page_may_eval_not_even_the_rubric_editor(client, django_user_model, path):
    """The editor's schema validator is compiled ahead of time (make editor-validator), so it needs no eval."""
    client.force_login(make_user(django_user_model, "ada", "author"))
    assert "unsafe-eval" not in client.get(path)["Content-Security-Policy"]


def test_the_editor_validator_was_built_from_todays_rubric_schema():
    """static/js/rubric_editor/schema_validator.js is generated: a change to the rubric schema must rebuild it."""
    import hashlib
    import subprocess
    import sys

    schema = subprocess.run(
        [sys.executable, "-m", "grading.engine", "schema", "rubric"], capture_output=True, check=True, cwd=ROOT
    ).stdout
    header = (ROOT / "static/js/rubric_editor/schema_validator.js").read_text().splitlines()[1]
    assert header == f"// rubric-schema-sha256: {hashlib.sha256(schema).hexdigest()}", (
        "the rubric schema changed: run `make editor-validator` and commit static/js/rubric_editor/schema_validator.js"
    )
    assert "new Function" not in (ROOT / "static/js/rubric_editor/schema_validator.js").read_text()


def test_no_template_has_inline_script_style_or_event_handler():
    offenders = []
    for template in (ROOT / "templates").rglob("*.html"):
        text = template.read_text()
        for needle in ("<style", " style=", "javascript:", " hx-on", " onclick=", " onload=", " onchange="):
            if needle in text:
                offenders.append(f"{template.relative_to(ROOT)}: {needle.strip()}")
        for line in text.splitlines():
            if "<script" in line and "src=" not in line:
                offenders.append(f"{template.relative_to(ROOT)}: inline <script>")
    assert offenders == []
