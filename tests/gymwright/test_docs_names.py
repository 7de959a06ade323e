"""README.md and docs/*.md name the code's modules, functions, models and Celery tasks in backticks (`packs.archive.build_pack`,
`authoring.Task`, `sandbox.rollout_run`): each such name must still exist, so a rename or a move that forgets the
docs fails here instead of leaving a reader at a name that is gone."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
from django.apps import apps as django_apps

from gymwright.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
APPS = ("gymwright", "accounts", "authoring", "grading", "sandbox", "review", "packs")
# `a.b.c` or `a.b.c(...)`: a dotted name starting with one of the apps
NAME = re.compile(r"`((?:%s)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\([^`]*\))?`" % "|".join(APPS))


def _resolves(name: str) -> bool:
    for app_name in APPS:  # Celery finds tasks when a worker starts; here, load them to know their names
        try:
            importlib.import_module(f"{app_name}.tasks")
        except ModuleNotFoundError:
            pass
    if name in celery_app.tasks:
        return True
    app_label, _, rest = name.partition(".")
    if "." not in rest:
        try:
            django_apps.get_model(app_label, rest)
            return True
        except LookupError:
            pass
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
def test_every_name_the_docs_give_exists(doc):
    names = sorted(set(NAME.findall(doc.read_text(encoding="utf-8"))))
    assert names, f"{doc.name} names no code: the pattern no longer matches how the docs write names"
    missing = [name for name in names if not _resolves(name)]
    assert missing == [], f"{doc.name} names what the code no longer has: {missing}"
