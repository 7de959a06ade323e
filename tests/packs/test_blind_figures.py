"""A pack's calibration.json carries a task's blind human prediction figures, and its card names the flagged task:
the scoring round of tests/review/test_blind_scores.py (Spearman 0.468 over 10 rollouts, one planted hack)."""

import json
import tarfile

import pytest
from django.core.files.storage import default_storage

from packs import services
from packs.models import PackVersion
from tests.packs.conftest import build_and_verify, make_approved
from tests.review.conftest import finished_preview
from tests.review.test_blind_scores import REWARDS, SPEARMAN, score_all


def test_the_pack_carries_the_figures_and_its_card_flags_the_task(lab, author, reviewer, admin):
    task = make_approved(author=author, reviewer=reviewer, slug="blind-pack-task")
    run = finished_preview(task.latest_version, author, "model", REWARDS)
    score_all(task, list(run.rollouts.order_by("index")), admin)
    pack = services.pack_create(slug="blind-pack", user=lab, licence="CC-BY-4.0")
    started = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    pack_version = build_and_verify(started.pk)
    assert pack_version.status == PackVersion.Status.READY, pack_version.failure_reason
    with default_storage.open(pack_version.archive.name) as handle, tarfile.open(fileobj=handle) as tar:
        calibration_json = json.loads(tar.extractfile("blind-pack-1.0.0/calibration.json").read())
        card = tar.extractfile("blind-pack-1.0.0/README.md").read().decode()
    entry = calibration_json["tasks"]["blind-pack-task"]["human_prediction"]
    assert entry["scored"] == 10 and entry["spearman"] == pytest.approx(SPEARMAN)
    assert entry["flagged"] is True and entry["hacks"] == 1 and entry["rule"]["min_correlation"] == 0.5
    assert "**1 task is flagged**: `blind-pack-task`" in card
