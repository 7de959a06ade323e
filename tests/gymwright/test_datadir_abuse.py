"""Abuse suite for the data directory: the SQLite file, the secret key and uploaded media are not
readable by any other user (the sandbox's uid 65534 included), and the sandbox work directory is
refused when another user could write to it or owns it."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gymwright.datadir import WorkDirError, sandbox_work_dir_check
from tests.support.services import missing, require_root

ROOT = Path(__file__).resolve().parents[2]
SETUP = (
    "import django; django.setup(); from django.core.files.storage import default_storage; "
    "from django.core.files.base import ContentFile; default_storage.save('blobs/ab/x.txt', ContentFile(b'x'))"
)


def start(data_dir: Path, **extra: str) -> None:
    """Start the app's settings as `make run` would, on a data directory, and store one upload."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in (
            "DATABASE_URL",
            "SECRET_KEY",
            "MEDIA_ROOT",
            "GYMWRIGHT_SANDBOX_DIR",
            "GYMWRIGHT_JUDGE_CACHE_DIR",
            "CELERY_BROKER_URL",
        )
    }
    env.update({"GYMWRIGHT_DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "gymwright.settings", **extra})
    subprocess.run([sys.executable, "-c", SETUP], cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_data_dir_is_private(tmp_path):
    data = tmp_path / "data"
    start(data)
    assert mode(data) == 0o711  # the sandbox work dir is inside: its user may pass through, not list
    assert mode(data / "secret_key") == 0o600
    assert mode(data / "gymwright.sqlite3") == 0o600
    for folder in ("media", "media/blobs", "media/blobs/ab", "broker", "judge-cache"):
        assert mode(data / folder) == 0o700, folder
    assert mode(data / "media/blobs/ab/x.txt") == 0o600


def test_an_old_loose_data_dir_is_tightened_at_start(tmp_path):
    data = tmp_path / "data"
    (data / "media").mkdir(parents=True)
    (data / "broker").mkdir()
    for name in ("secret_key", "gymwright.sqlite3"):
        (data / name).write_text("")
        (data / name).chmod(0o644)
    (data / "secret_key").write_text("an-old-key")
    for folder in (data, data / "media", data / "broker"):
        folder.chmod(0o755)
    start(data)
    assert mode(data / "secret_key") == 0o600 and (data / "secret_key").read_text() == "an-old-key"
    assert mode(data / "gymwright.sqlite3") == 0o600
    assert mode(data / "media") == 0o700 and mode(data / "broker") == 0o700 and mode(data) == 0o711


def test_with_the_sandbox_dir_elsewhere_the_data_dir_is_0700(tmp_path):
    data = tmp_path / "data"
    start(data, GYMWRIGHT_SANDBOX_DIR=str(tmp_path / "boxes"))
    assert mode(data) == 0o700


def test_the_sandbox_user_cannot_read_the_secrets(tmp_path):
    require_root("to act as the sandbox user")
    if not shutil.which("setpriv"):
        missing("setpriv", "apt-get install util-linux")
    tmp_path.chmod(0o755)
    data = tmp_path / "data"
    start(data)
    for target in ("secret_key", "gymwright.sqlite3", "media/blobs/ab/x.txt"):
        result = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(data / target)],
            capture_output=True,
            timeout=30,
        )
        assert result.returncode != 0 and b"Permission denied" in result.stderr, target
    listing = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "ls", str(data)],
        capture_output=True,
        timeout=30,
    )
    assert listing.returncode != 0


def test_a_new_sandbox_work_dir_is_created_traverse_only(tmp_path):
    path = sandbox_work_dir_check(tmp_path / "boxes")
    assert mode(path) == 0o711


def test_a_world_writable_sandbox_work_dir_is_refused(tmp_path):
    boxes = tmp_path / "boxes"
    boxes.mkdir()
    boxes.chmod(0o777)
    with pytest.raises(WorkDirError, match="writable by other users.*GYMWRIGHT_SANDBOX_DIR"):
        sandbox_work_dir_check(boxes)


def test_a_symlinked_sandbox_work_dir_is_refused(tmp_path):
    (tmp_path / "real").mkdir(mode=0o711)
    (tmp_path / "boxes").symlink_to(tmp_path / "real")
    with pytest.raises(WorkDirError, match="not a directory"):
        sandbox_work_dir_check(tmp_path / "boxes")


def test_a_sandbox_work_dir_owned_by_another_user_is_refused_and_the_rollout_says_why(tmp_path, settings):
    require_root("to give the folder to another user")
    from sandbox.runtime import SandboxError
    from sandbox.worker import _backend_options

    boxes = tmp_path / "boxes"
    boxes.mkdir(mode=0o711)
    os.chown(boxes, 65534, 65534)
    settings.SANDBOX_WORK_DIR = boxes
    with pytest.raises(SandboxError) as caught:
        _backend_options("bubblewrap")
    assert caught.value.permanent and "owned by uid 65534" in str(caught.value)
