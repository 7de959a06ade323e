"""Calibration maths against values computed by hand."""

import math

import pytest

from grading.engine import calibration


def test_wilson_interval_matches_the_hand_computed_interval():
    # 8 of 10, z = 1.96: centre = (0.8 + 0.19208) / 1.38416, half = 1.96 * sqrt(0.016 + 0.009604) / 1.38416
    low, high = calibration.wilson_interval(8, 10)
    centre = (0.8 + 1.96**2 / 20) / (1 + 1.96**2 / 10)
    half = 1.96 * math.sqrt(0.8 * 0.2 / 10 + 1.96**2 / 400) / (1 + 1.96**2 / 10)
    assert (low, high) == pytest.approx((centre - half, centre + half))
    assert (low, high) == pytest.approx((0.4902, 0.9433), abs=1e-4)


def test_wilson_interval_is_none_without_samples_and_clipped_at_the_ends():
    assert calibration.wilson_interval(0, 0) is None
    low, high = calibration.wilson_interval(0, 5)
    assert low == 0.0 and high == pytest.approx(0.4345, abs=1e-4)
    low, high = calibration.wilson_interval(5, 5)
    assert high == 1.0 and low == pytest.approx(0.5655, abs=1e-4)
    with pytest.raises(ValueError):
        calibration.wilson_interval(6, 5)


def test_pass_at_k_is_the_unbiased_estimator():
    # n=5, c=2: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass@4 = 1 (n - c < k)
    assert calibration.pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert calibration.pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert calibration.pass_at_k(5, 2, 4) == 1.0
    assert calibration.pass_at_k(5, 0, 3) == 0.0
    assert calibration.pass_at_ks(3, 1) == {"1": pytest.approx(1 / 3), "2": pytest.approx(2 / 3)}
    with pytest.raises(ValueError):
        calibration.pass_at_k(3, 1, 4)


def test_cohen_kappa_against_a_hand_computed_table():
    # 10 pairs: judge yes/human yes 4, yes/no 2, no/yes 1, no/no 3.
    # observed 0.7; p_judge 0.6, p_human 0.5; expected 0.3 + 0.2 = 0.5; kappa = 0.2 / 0.5 = 0.4
    pairs = [(True, True)] * 4 + [(True, False)] * 2 + [(False, True)] + [(False, False)] * 3
    assert calibration.cohen_kappa(pairs) == pytest.approx(0.4)
    assert calibration.cohen_kappa([(True, True)] * 3) is None
    assert calibration.cohen_kappa([]) is None
    stats = calibration.agreement(pairs)
    assert (stats.labels, stats.agreed, stats.rate) == (10, 7, pytest.approx(0.7))
    assert stats.needs_rewording()  # 70 % over 10 labels
    assert not calibration.agreement(pairs[:9]).needs_rewording()  # too few labels to say


@pytest.mark.parametrize(
    ("kind", "rate", "ok"),
    [
        ("oracle", 1.0, True),
        ("oracle", 0.9, False),
        ("nop", 0.0, True),
        ("nop", 0.1, False),
        ("probe", 0.0, True),
        ("hack", 0.5, False),
        ("model", 0.19, False),
        ("model", 0.2, True),
        ("model", 0.5, True),
        ("model", 0.51, False),
    ],
)
def test_band_verdict(kind, rate, ok):
    assert calibration.band_verdict(kind, rate).ok is ok


def test_non_discriminating_flags_checks_met_by_all_or_none_or_mostly_unscored():
    rollouts = [
        {"always": 1.0, "never": 0.0, "useful": float(i % 2), "flaky": None if i < 5 else 1.0} for i in range(8)
    ]
    flags = {row.check_id: row.flag for row in calibration.non_discriminating(rollouts)}
    assert flags == {"always": "always_met", "never": "never_met", "useful": None, "flaky": "mostly_unscored"}
    # fewer rollouts than the minimum: nothing flagged
    assert all(row.flag is None for row in calibration.non_discriminating(rollouts[:7]))


def test_reward_histogram_buckets_by_tenths_with_one_in_the_last_bucket():
    from grading.engine.calibration import reward_histogram

    assert reward_histogram([0.0, 0.05, 0.1, 0.55, 0.99, 1.0, None]) == [2, 1, 0, 0, 0, 1, 0, 0, 0, 2]
    assert reward_histogram([], bins=4) == [0, 0, 0, 0]
