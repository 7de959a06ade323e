"""The grader a pack bundles: the grading engine's own files, their requirements and a zip of them."""

from __future__ import annotations

import io
import zipfile

from .info import ENGINE_DIR


def grader_files() -> list[tuple[str, bytes]]:
    """The grading engine's own source files, its subpackages' too, as they are on disk (the exact code
    that graded the previews)."""
    files = [("grading/__init__.py", b'"""Gymwright\'s grading engine, bundled with a task pack."""\n')]
    for path in sorted(ENGINE_DIR.rglob("*.py"), key=lambda path: path.relative_to(ENGINE_DIR).as_posix()):
        files.append((f"grading/engine/{path.relative_to(ENGINE_DIR).as_posix()}", path.read_bytes()))
    return files


def grader_requirements(files: list[tuple[str, bytes]]) -> str:
    """requirements.txt for the bundled grader: every third-party distribution the engine's source
    (`files`, as `grader_files()` gives them) imports (found by reading it, so a new dependency
    cannot be forgotten), pinned to the version installed here, which is the one that graded the
    previews."""
    import ast
    import importlib.metadata
    import sys

    modules: set[str] = set()
    for name, data in files:
        if not name.endswith(".py"):
            continue
        for node in _statements(ast.parse(data.decode("utf-8"))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    distributions = importlib.metadata.packages_distributions()
    pins = set()
    for module in modules - set(sys.stdlib_module_names) - {"sre_parse", "grading"}:
        for name in distributions.get(module, []):
            pins.add(f"{name.lower()}=={importlib.metadata.version(name)}")
    return "".join(f"{pin}\n" for pin in sorted(pins))


def _statements(tree):
    """Every statement of a parsed module, nested ones too: an import is a statement, so the expressions
    (most of the tree, which `ast.walk` visits node by node) need not be walked."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, field, None)
            if type(children) is list:
                stack.extend(children)


def grader_zip(files: list[tuple[str, bytes]]) -> bytes:
    """The engine as one reproducible zip (importable with zipimport) for Harbor's verifier."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return buffer.getvalue()
