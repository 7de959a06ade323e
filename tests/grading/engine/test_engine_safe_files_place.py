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


def test_what_would_shadow_a_restored_module_is_removed_and_nothing_else(tmp_path, outside):
    """remove_module_shadows (bubblewrap's restore_files, the Harbor verifier): the package folder's __init__
    and extension modules beside a restored `x.py` go; a link named like one goes without being followed; the
    agent's other modules and files stay."""
    from grading.engine.safe_files import remove_module_shadows

    root = tmp_path / "ws"
    (root / "helper").mkdir(parents=True)
    (root / "helper" / "__init__.py").write_bytes(b"VALUE = True\n")
    (root / "helper" / "__init__.pyc").write_bytes(b"")
    (root / "helper" / "data.txt").write_bytes(b"kept\n")
    (root / "helper.cpython-311-x86_64-linux-gnu.so").write_bytes(b"elf")
    (root / "helper.abi3.so").write_bytes(b"elf")
    (root / "helpers.so").write_bytes(b"another module")
    (root / "solution.cpython-311-x86_64-linux-gnu.so").write_bytes(b"the agent's own")
    (root / "lib").mkdir()
    os.symlink(outside, root / "lib" / "util")  # a package by a link: `outside` must keep its files
    (outside / "__init__.py").write_bytes(b"host package\n")
    removed = remove_module_shadows(root, {"helper.py": b"", "lib/util.py": b"", "notes.txt": b""})
    assert sorted(removed) == [
        "helper.abi3.so",
        "helper.cpython-311-x86_64-linux-gnu.so",
        "helper/__init__.py",
        "helper/__init__.pyc",
        "lib/util",
    ]
    assert sorted(os.listdir(root)) == ["helper", "helpers.so", "lib", "solution.cpython-311-x86_64-linux-gnu.so"]
    assert os.listdir(root / "helper") == ["data.txt"] and os.listdir(root / "lib") == []
    assert (outside / "__init__.py").read_bytes() == b"host package\n" and (outside / "t.py").exists()
    # A folder on the way that is a link is not walked: place_files makes it a real one.
    os.symlink(outside, root / "linked")
    (outside / "mod.abi3.so").write_bytes(b"host file")
    assert remove_module_shadows(root, {"linked/mod.py": b""}) == []
    assert (outside / "mod.abi3.so").exists()
