"""`verify_pack`: check a pack archive against its manifest, streaming."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tarfile
from pathlib import Path
from typing import BinaryIO

from .manifest import manifest_digest


@dataclasses.dataclass
class Verification:
    ok: bool
    problems: list[str]
    manifest: dict | None
    files_checked: int


def verify_pack(source: str | Path | BinaryIO, *, max_bytes: int = 8 << 30) -> Verification:
    """Check a pack archive: readable gzip/tar, safe member names, no links leaving the pack, every
    file's sha256 and the manifest's content_sha256. Streams; at most `max_bytes` are unpacked."""
    problems: list[str] = []
    digests: dict[str, str] = {}
    manifest_bytes = None
    top = None
    total = 0
    try:
        tar = (
            tarfile.open(source, mode="r:gz")
            if not hasattr(source, "read")
            else tarfile.open(fileobj=source, mode="r|gz")
        )
        with tar:
            names: dict[str, str] = {}
            for member in tar:
                name = member.name
                first, _, relative = name.partition("/")
                if top is None:
                    top = first
                if name.startswith("/") or ".." in name.split("/") or first != top:
                    problems.append(f"{name}: outside the pack folder")
                    continue
                if member.isdir():
                    continue
                if member.islnk():
                    target = member.linkname
                    if target not in names:
                        problems.append(f"{name}: hard link to {target!r}, which is not an earlier file of the pack")
                    else:
                        digests[relative] = names[target]
                    continue
                if not member.isfile():
                    problems.append(f"{name}: not a regular file (symlink, device or fifo)")
                    continue
                total += member.size
                if total > max_bytes:
                    problems.append(f"{name}: the pack unpacks to more than {max_bytes} bytes; stopped")
                    break
                handle = tar.extractfile(member)
                digest = hashlib.sha256()
                data = bytearray() if relative == "manifest.json" else None
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
                    if data is not None and len(data) < (64 << 20):
                        data.extend(chunk)
                if data is not None:
                    manifest_bytes = bytes(data)
                digests[relative] = names[name] = digest.hexdigest()
    except (tarfile.TarError, OSError, EOFError, zlib_error()) as exc:
        problems.append(f"the archive is damaged: {exc}")
        return Verification(False, problems, None, len(digests))
    if manifest_bytes is None:
        problems.append("manifest.json: missing")
        return Verification(False, problems, None, len(digests))
    try:
        manifest = json.loads(manifest_bytes)
        listed = manifest["files"]
        assert isinstance(listed, dict)
    except (ValueError, KeyError, AssertionError, TypeError):
        problems.append("manifest.json: not a pack manifest")
        return Verification(False, problems, None, len(digests))
    digests.pop("manifest.json", None)
    for relative, expected in sorted(listed.items()):
        actual = digests.get(relative)
        if actual is None:
            problems.append(f"{relative}: listed in the manifest, missing from the archive")
        elif actual != expected:
            problems.append(f"{relative}: sha256 {actual} does not match the manifest's {expected}")
    for relative in sorted(set(digests) - set(listed)):
        problems.append(f"{relative}: in the archive, not in the manifest")
    if manifest.get("content_sha256") != manifest_digest(manifest):
        problems.append("manifest.json: content_sha256 does not match the manifest's content")
    expected_top = f"{manifest.get('slug')}-{manifest.get('version')}"
    if top != expected_top:  # a renamed or repacked folder: not the pack its manifest names
        problems.append(f"{top}/: the pack's folder, where its manifest names {expected_top}/")
    return Verification(not problems, problems, manifest, len(digests))


def zlib_error():
    import zlib

    return zlib.error
