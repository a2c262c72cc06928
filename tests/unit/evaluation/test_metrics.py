"""Metrics against scikit-learn / scipy / numpy, and the bootstrap helpers' behaviour."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from madrag.metrics import (
    bootstrap_ci,
    extreme_subset,
    extreme_targets,
    mae,
    paired_bootstrap,
    pearson,
    qwk,
    qwk_metric,
    rmse,
    round_half_up,
    round_half_up_clamped,
    spearman,
)

RNG = np.random.default_rng(7)


def _noisy(ref: np.ndarray, spread: int, lo: int, hi: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(ref + rng.integers(-spread, spread + 1, size=ref.size), lo, hi)


@pytest.mark.parametrize(("lo", "hi", "n"), [(0, 3, 50), (1, 6, 200), (0, 3, 7), (2, 12, 300)])
def test_qwk_matches_sklearn_over_full_scale(lo: int, hi: int, n: int) -> None:
    a = RNG.integers(lo, hi + 1, size=n)
    b = _noisy(a, 2, lo, hi, seed=n)
    expected = cohen_kappa_score(a, b, weights="quadratic", labels=list(range(lo, hi + 1)))
    assert qwk(a, b, lo, hi) == pytest.approx(expected, abs=1e-12)


def test_qwk_uses_the_full_scale_even_when_labels_are_missing() -> None:
    a, b = [1, 2, 2, 1, 2], [1, 2, 1, 1, 2]
    full = cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2, 3])
    observed_only = cohen_kappa_score(a, b, weights="quadratic")
    assert qwk(a, b, 0, 3) == pytest.approx(full)
    assert qwk(a, b, 1, 2) == pytest.approx(observed_only)


def test_qwk_degenerate_and_invalid_inputs() -> None:
    assert qwk([2, 2, 2], [2, 2, 2], 0, 3) != qwk([2, 2, 2], [2, 2, 2], 0, 3)  # nan: undefined, not 1.0
    assert math.isnan(qwk([], [], 0, 3))
    assert qwk([0, 3], [0, 3], 0, 3) == 1.0
    # one constant rater: observed equals chance disagreement by construction, so nothing is measured
    assert math.isnan(qwk([2, 2, 2], [1, 2, 3], 0, 3)) and math.isnan(qwk([0, 1, 3], [1, 1, 1], 0, 3))
    assert math.isnan(qwk([1], [3], 0, 3))  # one essay: undefined, not 0.000
    with pytest.raises(ValueError, match="outside"):
        qwk([0, 4], [0, 1], 0, 3)
    with pytest.raises(ValueError, match="integer"):
        qwk([0.5, 1], [0, 1], 0, 3)
    with pytest.raises(ValueError, match="length"):
        qwk([0, 1], [0], 0, 3)
    with pytest.raises(ValueError, match="finite"):
        qwk([0, float("nan")], [0, 1], 0, 3)


def test_correlations_and_errors_match_scipy_and_numpy() -> None:
    a = RNG.integers(1, 7, size=120).astype(float)
    b = a + RNG.normal(0, 1.2, size=120)
    assert pearson(a, b) == pytest.approx(stats.pearsonr(a, b).statistic)
    assert spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic)
    assert rmse(a, b) == pytest.approx(float(np.sqrt(np.mean((a - b) ** 2))))
    assert mae(a, b) == pytest.approx(float(np.mean(np.abs(a - b))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # undefined cases give nan without scipy's warnings
        assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))
        assert math.isnan(spearman([1], [2]))
        assert math.isnan(rmse([], []))


def test_extreme_targets_rule() -> None:
    assert extreme_targets([0, 1], 0, 3) == (0,)
    assert extreme_targets([2, 3], 0, 3) == (3,)
    assert extreme_targets([1, 2], 0, 3) == ()
    assert extreme_targets([0, 3], 0, 3) == (0, 3)  # tie: both, nearer one counts
    assert extreme_targets([0, 3, 3], 0, 3) == (3,)  # majority of raters


def test_extreme_subset_counts_unusable_and_measures_from_the_extreme() -> None:
    raters = [[0, 0], [1, 2], [3, 2], [0, 3], [6, 5], [0, 1]]
    preds = [1.0, 0.0, 1.0, 2.0, None, 0.0]
    summary = extreme_subset(raters, preds, 0, 6)
    # on 0-6: [3, 2] and [1, 2] hold no extreme; [0, 3] has only the min (3 is mid-scale)
    assert summary.selected == (0, 3, 4, 5)
    assert summary.n == 4 and summary.n_scored == 3 and summary.n_unusable == 1 and summary.n_conflict == 0
    assert summary.mae == pytest.approx((1 + 2 + 0) / 3)
    assert summary.agree_at_1 == pytest.approx(2 / 3)
    conflict = extreme_subset([[0, 3]], [2.0], 0, 3)
    assert conflict.n_conflict == 1 and conflict.mae == 1.0 and conflict.agree_at_1 == 1.0
    empty = extreme_subset([[1, 2]], [1.0], 0, 3)
    assert empty.n == 0 and math.isnan(empty.mae)


def test_bootstrap_ci_contains_estimate_and_is_deterministic() -> None:
    a = RNG.integers(0, 4, size=150)
    b = _noisy(a, 1, 0, 3, seed=3)
    metric = qwk_metric(0, 3)
    first = bootstrap_ci(metric, a, b, n=500, seed=11)
    again = bootstrap_ci(metric, a, b, n=500, seed=11)
    other = bootstrap_ci(metric, a, b, n=500, seed=12)
    assert first == again and first != other
    assert first.low <= first.estimate <= first.high and first.high - first.low < 0.3
    assert first.estimate == pytest.approx(qwk(a, b, 0, 3)) and first.n_valid == 500
    assert bootstrap_ci(metric, [], [], n=10).n_valid == 0


def test_paired_bootstrap_detects_a_real_difference_and_not_a_null_one() -> None:
    ref = RNG.integers(0, 4, size=200)
    good = _noisy(ref, 1, 0, 3, seed=1)
    bad = RNG.integers(0, 4, size=200)
    metric = qwk_metric(0, 3)
    real = paired_bootstrap(metric, ref, good, bad, n=1000, seed=5)
    assert real.diff == pytest.approx(qwk(ref, good, 0, 3) - qwk(ref, bad, 0, 3)) and real.diff > 0.3
    assert real.low > 0 and real.p_value < 0.01
    twin = _noisy(ref, 1, 0, 3, seed=2)  # same noise level, independent draw
    null = paired_bootstrap(metric, ref, good, twin, n=1000, seed=5)
    assert null.low < 0 < null.high and null.p_value > 0.05
    same = paired_bootstrap(metric, ref, good, good, n=200, seed=5)
    assert same.diff == 0 and same.p_value == 1.0
    assert paired_bootstrap(metric, ref, good, bad, n=1000, seed=5) == real


def test_round_half_up_rounds_halves_upwards_unlike_round() -> None:
    assert [round_half_up(v) for v in (0.5, 1.5, 2.5, 2.49, -0.5, -1.5)] == [1, 2, 3, 2, 0, -1]


def test_round_half_up_clamped_keeps_a_label_on_the_trait_scale() -> None:
    assert round_half_up_clamped(1.5, 1, 6) == 2
    assert round_half_up_clamped(0.5, 1, 6) == 1  # rounds to 1, inside the scale
    assert round_half_up_clamped(0.4, 1, 6) == 1  # rounds to 0, clamped up to the minimum
    assert round_half_up_clamped(6.5, 1, 6) == 6  # rounds to 7, clamped down to the maximum
    assert round_half_up_clamped(3.0, 3, 3) == 3
