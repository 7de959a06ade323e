"""The Django apps depend in a line, the product's flow: each may import the apps to its left,
never to its right. The pure cores (grading.engine, sandbox.runtime) are libraries every app may use."""

from __future__ import annotations

import ast
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
