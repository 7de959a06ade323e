"""place_files: exact bytes back at their paths whatever an agent left there, never through a link."""

from __future__ import annotations

import os

import pytest

from grading.engine.safe_files import place_files


@pytest.fixture
def outside(tmp_path):
    path = tmp_path / "outside"
    path.mkdir()
    (path / "t.py").write_bytes(b"host file\n")
    return path


def test_it_replaces_links_directories_and_linked_parents_without_following_them(tmp_path, outside):
    root = tmp_path / "ws"
    (root / "a").mkdir(parents=True)
    os.symlink(outside / "t.py", root / "a" / "link.py")  # a link at the path
    (root / "a" / "dir.py" / "deep").mkdir(parents=True)  # a directory, locked
    os.chmod(root / "a" / "dir.py" / "deep", 0o000)
    os.chmod(root / "a" / "dir.py", 0o500)
    os.symlink(outside, root / "b")  # a linked parent
    (root / "c").write_bytes(b"a file for a parent")
    found = place_files(
        root, {"a/link.py": b"1", "a/dir.py": b"2", "b/t.py": b"3", "c/x.py": b"4", "new/deeper/y.py": b"5"}
    )
    assert found == {
        "a/link.py": "link",
        "a/dir.py": "dir",
        "b/t.py": "missing",
        "c/x.py": "missing",
        "new/deeper/y.py": "missing",
    }
    for rel, data in {
        "a/link.py": b"1",
        "a/dir.py": b"2",
        "b/t.py": b"3",
        "c/x.py": b"4",
        "new/deeper/y.py": b"5",
    }.items():
        assert not os.path.islink(root / rel) and (root / rel).read_bytes() == data
    assert not os.path.islink(root / "b") and (outside / "t.py").read_bytes() == b"host file\n"


def test_it_refuses_paths_that_leave_the_root(tmp_path):
    with pytest.raises(ValueError):
        place_files(tmp_path, {"../x": b""})
