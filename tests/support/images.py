"""Docker images for tests, built locally (no registry needed) and cached by tag.

- `busybox_image(client)`: FROM scratch + the host's static busybox (Debian
  package busybox-static), ~2 MB: sh, cat, tar, find, sleep, kill, timeout...
- `python_image(client)`: busybox plus the host's /usr/bin/python3 with its
  shared libraries and a pruned standard library (~25 MB). Used for python
  checks and solution scripts under docker.

Both tags carry a hash of what went in, so a changed host binary makes a new
image and an unchanged one is reused across test sessions. Building by hand:

    .venv/bin/python -c "from tests.support.images import *; import docker; \
        c = docker.from_env(); print(busybox_image(c), python_image(c))"
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

BUSYBOX = Path(os.environ.get("GYMWRIGHT_TEST_BUSYBOX", "/bin/busybox"))
HOST_PYTHON = Path("/usr/bin/python3.11")
PY_STDLIB = Path("/usr/lib/python3.11")
PRUNE = {
    "test",
    "__pycache__",
    "idlelib",
    "tkinter",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
    "turtledemo",
    "config-3.11-x86_64-linux-gnu",
    "distutils",
    "site-packages",
    "dist-packages",
}
_lock = threading.Lock()


def _missing(what: str) -> None:
    # Deferred import: images.py is also usable outside pytest (bench).
    if "pytest" in sys.modules:
        from tests.support.services import missing

        missing(what, "apt-get install busybox-static (and python3 for the python image)")
    raise RuntimeError(f"{what} is not available")


def _build(client, tag: str, files: dict[str, tuple[bytes | Path | str, int]], dockerfile: str) -> str:
    import docker.errors

    with _lock:
        try:
            client.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            df = dockerfile.encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(df)
            tar.addfile(info, io.BytesIO(df))
            for name, (source, mode) in files.items():
                if isinstance(source, str):  # a symlink to this target
                    info = tarfile.TarInfo(name)
                    info.type = tarfile.SYMTYPE
                    info.linkname = source
                    tar.addfile(info)
                    continue
                data = source.read_bytes() if isinstance(source, Path) else source
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = mode
                tar.addfile(info, io.BytesIO(data))
        context.seek(0)
        client.images.build(
            fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True, labels={"gymwright.test-image": "1"}
        )
        return tag


def _busybox_files() -> dict:
    # The applet links go into the build context, so the image is one COPY
    # layer: docker's vfs driver copies every layer in full per container.
    files: dict = {"rootfs/bin/busybox": (BUSYBOX, 0o755)}
    applets = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            files[f"rootfs/bin/{applet}"] = ("busybox", 0o777)
    return files


def busybox_image(client) -> str:
    if not BUSYBOX.exists():
        _missing(f"static busybox at {BUSYBOX}")
    digest = hashlib.sha256(BUSYBOX.read_bytes() + b"v2").hexdigest()[:16]
    return _build(
        client,
        f"gymwright-test/busybox:{digest}",
        _busybox_files(),
        "FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/local/bin:/usr/bin:/bin\n",
    )


def busybox_bash_image(client) -> str:
    """busybox with /bin/bash: busybox's sh (ash) under that name, which has `set -o pipefail`, `[[`, `$'...'`
    and the rest a task's `#!/bin/bash` scripts commonly use; a real dataset's image has bash itself."""
    base = busybox_image(client)
    return _build(
        client,
        f"gymwright-test/busybox-bash:{base.rsplit(':', 1)[1]}",
        {"bash": (b'#!/bin/sh\nexec /bin/sh "$@"\n', 0o755)},
        f"FROM {base}\nCOPY bash /bin/bash\n",
    )


def _shared_libs(paths: list[Path]) -> set[Path]:
    libs: set[Path] = set()
    for path in paths:
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
        for match in re.finditer(r"(/\S+\.so[^\s]*) \(0x", out):
            libs.add(Path(match.group(1)))
    return libs


def python_image(client) -> str:
    if not BUSYBOX.exists() or not HOST_PYTHON.exists() or not PY_STDLIB.is_dir():
        _missing(f"static busybox and {HOST_PYTHON} with its standard library")
    files = _busybox_files()
    stdlib: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(PY_STDLIB):
        dirnames[:] = [d for d in dirnames if d not in PRUNE]
        for name in filenames:
            stdlib.append(Path(dirpath) / name)
    dynload = [p for p in stdlib if p.suffix == ".so"]
    libs = _shared_libs([HOST_PYTHON, *dynload])
    hasher = hashlib.sha256()
    for path in sorted([HOST_PYTHON, *stdlib, *libs]):
        real = path.resolve()
        hasher.update(str(path).encode())
        hasher.update(str(real.stat().st_size).encode() + str(int(real.stat().st_mtime)).encode())
        files[f"rootfs{path}"] = (real, 0o755 if path in libs or path == HOST_PYTHON else 0o644)

    hasher.update(BUSYBOX.read_bytes() + b"v2")
    tag = f"gymwright-test/python:{hasher.hexdigest()[:16]}"
    files["rootfs/bin/python3"] = ("/usr/bin/python3.11", 0o777)
    files["rootfs/bin/python"] = ("/usr/bin/python3.11", 0o777)
    # ldd's paths (/lib/x86_64-linux-gnu/..., /lib64/ld-linux...) are copied as is.
    return _build(
        client, tag, files, "FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8\n"
    )


def remove_test_images(client) -> None:
    for image in client.images.list(filters={"label": "gymwright.test-image=1"}):
        client.images.remove(image.id, force=True)


PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")


def pytest_image(client) -> str:
    """The python image with pytest (and what it imports) from this virtualenv's site-packages, pure Python, in
    Debian's dist-packages, and /bin/bash as busybox sh (Harbor's scripts start with #!/bin/bash)."""
    import pytest as _pytest_module

    base = python_image(client)
    site = Path(_pytest_module.__file__).resolve().parent.parent
    files: dict = {"rootfs/bin/bash": (b'#!/bin/sh\nexec /bin/sh "$@"\n', 0o755)}
    hasher = hashlib.sha256(base.encode())
    for name in PYTEST_PACKAGES:
        source = site / name
        paths = [source] if source.is_file() else sorted(source.rglob("*.py")) if source.is_dir() else []
        for path in paths:
            relative = path.relative_to(site).as_posix()
            files[f"rootfs/usr/lib/python3/dist-packages/{relative}"] = (path, 0o644)
            hasher.update(relative.encode() + path.read_bytes())
    return _build(client, f"gymwright-test/pytest:{hasher.hexdigest()[:16]}", files, f"FROM {base}\nCOPY rootfs/ /\n")
