import pytest


@pytest.fixture(autouse=True)
def _media_root(tmp_path, settings):
    """Each test writes uploads and blobs to its own folder."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.JUDGE_CACHE_DIR = tmp_path / "judge-cache"
    settings.SANDBOX_WORK_DIR = tmp_path / "sandboxes"
