"""The Django apps depend in a line, the product's flow: each may import the apps to its left,
never to its right. The pure cores (grading.engine, sandbox.runtime) are libraries every app may use.

The line holds in templates and settings too: a template of app X (templates/X/; the site's own templates are
gymwright's) may only {% load %} tags, {% include %} or {% extends %} templates and {% url %} URL names of apps at or
left of X, and an app's Python names only such URL names. An app that adds a panel to a page to its left registers
it (gymwright.pages). Settings list every app in INSTALLED_APPS; beyond that they name only the bottom of the line
(gymwright, accounts), the parts every page relies on."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Apps added later (review decides, packs ship) join at the end of the line.
LINE = ["gymwright", "accounts", "authoring", "grading", "sandbox", "review", "packs"]
PURE_CORES = ("grading.engine", "sandbox.runtime")


def _apps() -> list[str]:
    return sorted(path.parent.name for path in ROOT.glob("*/apps.py")) + ["gymwright"]


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):  # every import, including those inside functions
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, node.module)] + [
                (node.lineno, f"{node.module}.{alias.name}") for alias in node.names
            ]
    return found


def _violations(app: str) -> list[str]:
    position = LINE.index(app)
    problems = set()
    for path in (ROOT / app).rglob("*.py"):
        relative = path.relative_to(ROOT)
        if any(str(relative).startswith(core.replace(".", "/")) for core in PURE_CORES):
            continue  # the cores are checked by their own purity tests
        for line, module in _imported_modules(path):
            if module.startswith(PURE_CORES):
                continue
            target = module.split(".")[0]
            if target in LINE and LINE.index(target) > position:
                problems.add(
                    f"{relative}:{line} imports {module.rsplit('.', 1)[0] if module.count('.') > 1 else module}"
                    f" ({app} may only import {', '.join(LINE[: position + 1])})"
                )
    return sorted(problems)


def test_every_app_has_a_place_in_the_line():
    missing = [app for app in _apps() if app not in LINE]
    assert not missing, f"add {missing} to LINE (after the apps it imports) in {__file__}"


def test_apps_import_only_the_apps_to_their_left():
    problems = [problem for app in _apps() for problem in _violations(app)]
    assert not problems, "\n".join(problems)


def test_the_checker_sees_an_import_against_the_line(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from sandbox.models import Rollout\n", encoding="utf-8")
    assert (2, "sandbox.models") in _imported_modules(module)


# ---------------------------------------------------------------------------------------------
# Templates, URL names and settings

TEMPLATES = ROOT / "templates"
BOTTOM = [app for app in LINE if app in ("gymwright", "accounts")]
_TAG = re.compile(r"{%\s*(load|include|extends|url)\s+(.*?)\s*%}", re.S)
_QUOTED = re.compile(r"""^["']([^"']+)["']""")


def _template_owner(name: str) -> str:
    """The app a template belongs to: its folder under templates/, else the site's (gymwright)."""
    first = name.split("/", 1)[0]
    return first if "/" in name and first in LINE else "gymwright"


def _tag_libraries() -> dict[str, str]:
    """Each {% load %} name and the app whose templatetags module it is."""
    from django.conf import settings

    found = {path.stem: path.parent.parent.name for path in ROOT.glob("*/templatetags/*.py") if path.stem != "__init__"}
    for name, module in settings.TEMPLATES[0]["OPTIONS"].get("libraries", {}).items():
        found[name] = module.split(".")[0]
    return found


def _url_owners() -> dict[str, str]:
    """Each URL name ('ns:name' or a plain name) and the app whose view answers it."""
    from django.urls import URLPattern, URLResolver, get_resolver

    owners: dict[str, str] = {}

    def walk(patterns, namespace):
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, f"{namespace}{entry.namespace}:" if entry.namespace else namespace)
            elif isinstance(entry, URLPattern) and entry.name:
                view = entry.callback
                view = getattr(view, "cls", None) or getattr(view, "view_class", None) or view
                owners[f"{namespace}{entry.name}"] = view.__module__.split(".")[0]

    walk(get_resolver().url_patterns, "")
    return owners


def _template_uses(text: str, libraries: dict[str, str], urls: dict[str, str]) -> list[tuple[str, str]]:
    """(what, its app) for each tag library loaded, template included or extended and URL name reversed."""
    uses = []
    for tag, rest in _TAG.findall(text):
        if tag == "load":
            names = rest.split(" from ")[-1].split() if " from " in rest else rest.split()
            uses += [(f"{{% load {name} %}}", libraries.get(name, "")) for name in names]
        elif (quoted := _QUOTED.match(rest)) is not None:
            name = quoted.group(1)
            owner = _template_owner(name) if tag in ("include", "extends") else urls.get(name, "")
            uses.append((f"{{% {tag} '{name}' %}}", owner))
    return uses


def _placed_right(owner: str, used_by: str) -> bool:
    return owner in LINE and LINE.index(owner) > LINE.index(used_by)


def test_templates_use_only_the_apps_to_their_left():
    libraries, urls = _tag_libraries(), _url_owners()
    problems = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        name = path.relative_to(TEMPLATES).as_posix()
        app = _template_owner(name)
        for what, owner in _template_uses(path.read_text(encoding="utf-8"), libraries, urls):
            if _placed_right(owner, app):
                problems.append(
                    f"templates/{name}: {what} is {owner}'s ({app} may only use {', '.join(LINE[: LINE.index(app) + 1])})"
                )
    assert not problems, "\n".join(problems)


_URL_NAME = re.compile(r"^([a-z_]+):[a-z0-9_-]+$")


def test_python_names_only_the_urls_of_apps_to_its_left():
    problems = []
    for app in _apps():
        for path in (ROOT / app).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    match = _URL_NAME.match(node.value)
                    if match and _placed_right(match.group(1), app):
                        problems.append(f"{path.relative_to(ROOT)}:{node.lineno} names the URL {node.value!r}")
    assert not problems, "\n".join(problems)


def test_settings_name_only_the_bottom_of_the_line():
    """INSTALLED_APPS lists every app; every other setting (context processors, authentication, URLs) names only
    gymwright or accounts, so a page of any app may rely on it."""
    tree = ast.parse((ROOT / "gymwright" / "settings.py").read_text(encoding="utf-8"))
    installed = {
        id(node)
        for statement in tree.body
        if isinstance(statement, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == "INSTALLED_APPS" for target in statement.targets)
        for node in ast.walk(statement.value)
    }
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in installed:
            first = re.split(r"[.:]", node.value, maxsplit=1)[0]
            if first != node.value and first in LINE and first not in BOTTOM:
                problems.append(f"gymwright/settings.py:{node.lineno} names {node.value!r}")
    assert not problems, "\n".join(problems)


def test_the_template_checker_sees_a_use_against_the_line():
    libraries = {"review_tags": "review", "pages": "gymwright"}
    urls = {"review:queue": "review"}
    text = '{% load pages review_tags %}{% include "sandbox/_x.html" %}<a href="{% url \'review:queue\' %}">'
    uses = _template_uses(text, libraries, urls)
    assert [owner for _, owner in uses] == ["gymwright", "review", "sandbox", "review"]
    assert _placed_right("review", "authoring") and not _placed_right("authoring", "review")
