"""Page composition (gymwright.pages, gymwright/templatetags/pages.py): panels other apps register for a page, and
hot tables rendered once per content."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.template import engines
from django.test import RequestFactory

from gymwright import pages
from gymwright.process_cache import Kept
from gymwright.templatetags import pages as page_tags


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(pages, "_REGISTERED", {})
    return pages


def test_a_page_gets_the_panels_registered_for_it_in_order_and_without_those_that_show_nothing(registry):
    registry.panel_register("demo.side", template="_filter_options.html", selector=lambda *, request, n, **_: {"n": n})
    registry.panel_register("demo.side", template="_pagination.html", selector=lambda **_: None)
    registry.panel_register("demo.top", template="error.html", selector=lambda *, request, n, **_: {"n": n + 1})
    registry.panel_register("other.top", template="error.html", selector=lambda **_: {})
    shown = registry.panels("demo", request=None, n=1)
    assert shown == {
        "side": [pages.Panel("_filter_options.html", {"n": 1})],
        "top": [pages.Panel("error.html", {"n": 2})],
    }


def test_a_slot_is_page_dot_name(registry):
    with pytest.raises(ValueError, match="page.name"):
        registry.panel_register("nodot", template="x.html", selector=lambda **_: {})


def test_a_panel_renders_with_its_own_context_and_the_csrf_token_only():
    template = engines["django"].from_string("{% load pages %}[{% render_panels shown %}]")
    shown = [pages.Panel("_filter_options.html", {"values": ["a", "<b>"], "selected": "a"})]
    request = RequestFactory().get("/")
    html = template.render({"shown": shown, "values": ["leaked"], "csrf_token": "t"}, request)
    assert html == "[<option selected>a</option><option>&lt;b&gt;</option>]"
    assert template.render({"shown": None}, request) == "[]"


def test_a_kept_fragment_is_rendered_once_per_content(monkeypatch):
    monkeypatch.setattr(page_tags, "_FRAGMENTS", Kept(entries=8))
    template = engines["django"].from_string(
        '{% load pages %}{% kept_fragment "_filter_options.html" values=values selected=selected %}'
    )
    first = template.render({"values": ["x", "y"], "selected": "y"})
    assert first == "<option>x</option><option selected>y</option>"
    assert template.render({"values": ["x", "y"], "selected": "y"}) == first
    assert len(page_tags._FRAGMENTS) == 1
    assert template.render({"values": ["x", "y"], "selected": "x"}) == "<option selected>x</option><option>y</option>"
    assert len(page_tags._FRAGMENTS) == 2
    # dates are part of the key by value
    template.render({"values": [datetime.date(2026, 1, 1)], "selected": None})
    template.render({"values": [datetime.date(2026, 1, 2)], "selected": None})
    assert len(page_tags._FRAGMENTS) == 4


def test_a_kept_fragment_refuses_what_its_key_cannot_name():
    template = engines["django"].from_string(
        '{% load pages %}{% kept_fragment "_filter_options.html" values=values selected=None %}'
    )
    with pytest.raises(TypeError, match="plain values, not User"):
        template.render({"values": [User(username="a")]})


# What differs per user or per request: a kept fragment is shared by every user of the web process, so none of these
# may be read in one, directly or through an included template.
PER_REQUEST = ("request", "user", "perms", "csrf_token", "messages")


def _kept_templates() -> set[str]:
    from django.conf import settings

    names = set()
    for folder in settings.TEMPLATES[0]["DIRS"]:
        for path in Path(folder).rglob("*.html"):
            names.update(re.findall(r'{%\s*kept_fragment\s+"([^"]+)"', path.read_text(encoding="utf-8")))
    return names


def _source_with_includes(name: str, seen: set[str]) -> str:
    from django.template.loader import get_template

    if name in seen:
        return ""
    seen.add(name)
    source = Path(get_template(name).origin.name).read_text(encoding="utf-8")
    included = re.findall(r'{%\s*include\s+"([^"]+)"', source)
    return source + "".join(_source_with_includes(child, seen) for child in included)


def test_no_kept_fragment_reads_a_per_user_or_per_request_value():
    names = _kept_templates()
    assert {"authoring/_task_rows.html", "review/_queue_rows.html", "sandbox/_rollout_rows.html"} <= names
    for name in sorted(names):
        source = _source_with_includes(name, set())
        code = " ".join(re.findall(r"{[{%](.*?)[}%]}", source, flags=re.S))
        code = re.sub(r"\"[^\"]*\"|'[^']*'", "", code)  # a word in a string (a URL name) is not a variable
        read = sorted(set(re.findall(r"\b(" + "|".join(PER_REQUEST) + r")\b", code)))
        assert read == [], f"{name} reads {read}: kept fragments are shared by every user"


def test_a_kept_fragment_never_sees_the_pages_user_request_or_csrf_token(monkeypatch, tmp_path, settings):
    """Even a fragment that tried to read them gets nothing: it is rendered from the values passed to it alone."""
    (tmp_path / "_peek.html").write_text("[{{ user.username }}|{{ request.path }}|{{ csrf_token }}|{{ n }}]")
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path, *settings.TEMPLATES[0]["DIRS"]]}]
    monkeypatch.setattr(page_tags, "_FRAGMENTS", Kept(entries=8))
    template = engines["django"].from_string('{% load pages %}{% kept_fragment "_peek.html" n=1 %}')
    request = RequestFactory().get("/secret-path/")
    request.user = User(username="alice")
    assert template.render({"csrf_token": "secret-token"}, request) == "[|||1]"
