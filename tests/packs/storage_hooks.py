"""The media storage with test hooks, to land a cancel, a reap or an error at a known point of an archive's save,
and to see whether a page reads an archive."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.storage import FileSystemStorage, default_storage


class HookedStorage(FileSystemStorage):
    """FileSystemStorage (the default), with two hooks: `after_write(name)` runs once a pack archive's bytes are in
    storage and before `save` returns (the moment a cancel, a reap or a storage error can land while it is being
    saved), and `opened` lists every pack archive opened."""

    after_write = None
    opened: list[str] = []

    def _save(self, name, content):
        saved = super()._save(name, content)
        if name.startswith("packs/") and HookedStorage.after_write is not None:
            HookedStorage.after_write(saved)
        return saved

    def _open(self, name, mode="rb"):
        if name.startswith("packs/"):
            HookedStorage.opened.append(name)
        return super()._open(name, mode)


@pytest.fixture
def hooked_storage(settings):
    settings.STORAGES = {**settings.STORAGES, "default": {"BACKEND": f"{__name__}.HookedStorage"}}
    HookedStorage.after_write, HookedStorage.opened = None, []
    yield HookedStorage
    HookedStorage.after_write, HookedStorage.opened = None, []


def stored_archives() -> list[Path]:
    """Every file under the storage's packs/ folder."""
    root = Path(default_storage.path("packs"))
    return sorted(path for path in root.rglob("*") if path.is_file()) if root.exists() else []


def tamper(pack_version, replace: dict[str, bytes]) -> None:
    """Rewrite the version's stored archive with these files (paths inside the pack folder) holding other bytes;
    the manifest is left as it was."""
    import io
    import tarfile

    path = Path(default_storage.path(pack_version.archive.name))
    buffer = io.BytesIO()
    with tarfile.open(path, "r:gz") as source, tarfile.open(fileobj=buffer, mode="w:gz") as target:
        for member in source.getmembers():
            relative = member.name.partition("/")[2]
            if member.isfile() and relative in replace:
                member.size = len(replace[relative])
                target.addfile(member, io.BytesIO(replace[relative]))
            else:
                target.addfile(member, source.extractfile(member) if member.isfile() else None)
    with tarfile.open(fileobj=io.BytesIO(buffer.getvalue())) as written:
        assert set(replace) <= {name.partition("/")[2] for name in written.getnames()}  # each one was in the pack
    path.write_bytes(buffer.getvalue())
