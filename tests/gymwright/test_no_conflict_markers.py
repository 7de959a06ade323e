"""No merge conflict left in the tree: a `<<<<<<<` block once landed in BENCHMARKS.md, and a Python or template file
with one would fail elsewhere, but a document or a fixture would not."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {".git", ".venv", "node_modules", "var", "__pycache__", ".pytest_cache", ".ruff_cache"}
TEXT = {
    ".py",
    ".md",
    ".html",
    ".js",
    ".mjs",
    ".css",
    ".toml",
    ".txt",
    ".json",
    ".jsonl",
    ".yml",
    ".yaml",
    ".sh",
    ".tmpl",
}
MARKER = re.compile(r"^(<{7} |>{7} |={7}$)", re.M)


def _files():
    stack = [ROOT]
    while stack:
        folder = stack.pop()
        for path in folder.iterdir():
            if path.is_dir() and not path.is_symlink():
                if path.name not in SKIP:
                    stack.append(path)
            elif path.is_file() and (path.suffix in TEXT or path.name in {"Makefile", "run"}):
                yield path


def test_no_file_holds_a_merge_conflict_marker():
    found = []
    for path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in MARKER.finditer(text):
            found.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}")
    assert len(list(_files())) > 100  # the walk found the tree
    assert found == []
