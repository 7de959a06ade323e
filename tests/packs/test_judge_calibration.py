"""A pack's calibration.json carries each judge check's TPR / TNR, label counts and the preview's pass rate
corrected by them, and its card explains them: the judge with a known error rate of
tests/review/test_judge_calibration.py (TPR 0.9, TNR 0.8) on a model preview where it passes half."""

import json
import tarfile

import pytest
from django.core.files.storage import default_storage

from packs import services
from packs.models import PackVersion
from sandbox.models import PreviewRun, Rollout
from tests.packs.conftest import build_and_verify, make_approved
from tests.review.conftest import finished_preview
from tests.review.test_agreement_and_evidence import JUDGED_RUBRIC
from tests.review.test_judge_calibration import CORRECTED, grade, label


def test_calibration_json_carries_the_judges_rates_and_corrected_pass_rates(lab, author, reviewer):
    task = make_approved(author=author, reviewer=reviewer, slug="judged", rubric=JUDGED_RUBRIC)
    version = task.latest_version
    for i in range(10):
        label(grade(version, author, met=i < 9), reviewer, True)
        label(grade(version, author, met=i >= 8), reviewer, False)
    run = finished_preview(version, author, "model", [1.0] * 5 + [0.5] * 5)
    PreviewRun.objects.filter(pk=run.pk).update(
        summary={"graded": 10, "pass_rate": 1.0, "pass_at_k": {"1": 1.0}, "mean_reward": 0.75}
    )
    for rollout, met in zip(run.rollouts.order_by("index"), [True] * 5 + [False] * 5, strict=True):
        Rollout.objects.filter(pk=rollout.pk).update(grade=grade(version, author, met))

    pack = services.pack_create(slug="judged-pack", user=lab, licence="CC-BY-4.0")
    started = services.pack_version_start(pack=pack, user=lab, selection=services.Selection(), enqueue=False)
    pack_version = build_and_verify(started.pk)
    assert pack_version.status == PackVersion.Status.READY, pack_version.failure_reason
    with default_storage.open(pack_version.archive.name) as handle, tarfile.open(fileobj=handle) as tar:
        calibration = json.loads(tar.extractfile("judged-pack-1.0.0/calibration.json").read())
        card = tar.extractfile("judged-pack-1.0.0/README.md").read().decode()
    entry = calibration["tasks"]["judged"]
    assert entry["mean_reward"] == 0.75 and entry["policy"] == "model"  # the existing fields stay as they were
    judge = entry["judge"]
    clear = judge["checks"]["clear"]
    assert (clear["tpr"], clear["tnr"]) == (0.9, 0.8)
    assert clear["labels"] == {"answers": 20, "met": 10, "not_met": 10, "contested": 0}
    assert clear["validated"] is False  # 20 answers of the default 50
    assert (clear["n"], clear["raw_pass_rate"]) == (10, 0.5)
    assert clear["corrected_pass_rate"] == pytest.approx(CORRECTED)
    assert clear["corrected_pass_rate_ci95"][0] < CORRECTED < clear["corrected_pass_rate_ci95"][1]
    assert judge["corrected_mean_reward"] == pytest.approx(0.75 + (CORRECTED - 0.5) / 2)
    assert judge["bootstrap"] == {"resamples": 400, "seed": 20240531} and judge["rule"]["min_labels"] == 50
    assert "## How far to trust the judge" in card and "(raw + TNR − 1) / (TPR + TNR − 1)" in card
