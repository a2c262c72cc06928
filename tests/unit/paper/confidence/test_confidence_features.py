"""Confidence features (the confidence paper, Section 3.3): windows, statistics, labels, the per-record frame."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from madrag.paper.confidence.features import (
    DEFAULT_WINDOWS,
    META_COLUMNS,
    STATISTICS,
    Window,
    feature_columns,
    feature_label,
    feature_names,
    features_frame,
    parse_feature,
    record_logprobs,
    trajectory_features,
    window_statistics,
    window_values,
)
from madrag.providers.base import TokenLogprob
from madrag.records import AgentRecord


def record(key: str, logprobs: list[float] | None, role: str = "advocate", round_: int = 1) -> AgentRecord:
    """A debater record whose tokens carry ``logprobs`` (None: no logprobs at all)."""
    tokens = None if logprobs is None else [TokenLogprob(token=f"t{i}", logprob=v) for i, v in enumerate(logprobs)]
    return AgentRecord(
        run_id="r",
        key=key,
        essay_id="e1",
        trait="Ideas",
        protocol="debate/both",
        role=role,
        round=round_,
        tokens=tokens,
    )


def test_window_names_and_labels() -> None:
    cases = {
        Window("full"): ("full", "full response"),
        Window("first", k=3): ("first3", "first 3 tokens"),
        Window("last", k=10): ("last10", "last 10 tokens"),
        Window("first", k=1): ("first1", "first token"),
        Window("first", fraction=0.25): ("first25pct", "first 25%"),
        Window("last", fraction=0.25): ("last25pct", "last 25%"),
        Window("first", fraction=0.5): ("first50pct", "first half"),
        Window("last", fraction=0.5): ("last50pct", "final half"),
        Window("first", fraction=0.1): ("first10pct", "first 10%"),
    }
    for window, (name, label) in cases.items():
        assert (window.name, window.label) == (name, label)


def test_default_windows() -> None:
    names = [w.name for w in DEFAULT_WINDOWS]
    assert names[0] == "full"
    expected = {"full"} | {f"{s}{k}" for s in ("first", "last") for k in (3, 5, 10, 20)}
    expected |= {f"{s}{p}pct" for s in ("first", "last") for p in (10, 25, 50)}
    assert set(names) == expected and len(names) == 15


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "full", "k": 3},
        {"kind": "first"},
        {"kind": "first", "k": 3, "fraction": 0.5},
        {"kind": "last", "k": 0},
        {"kind": "first", "fraction": 0.0},
        {"kind": "first", "fraction": 1.5},
        {"kind": "middle", "k": 3},
    ],
)
def test_invalid_windows(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Window(**kwargs)  # type: ignore[arg-type]


def test_fixed_windows_boundaries() -> None:
    lp = -np.arange(10, dtype=float)  # l_1 = 0, ..., l_10 = -9
    np.testing.assert_array_equal(window_values(lp, Window("first", k=3)), [0, -1, -2])
    np.testing.assert_array_equal(window_values(lp, Window("last", k=3)), [-7, -8, -9])
    np.testing.assert_array_equal(window_values(lp, Window("first", k=10)), lp)  # k == T is defined
    np.testing.assert_array_equal(window_values(lp, Window("last", k=10)), lp)
    assert window_values(lp, Window("first", k=11)) is None  # T < k
    assert window_values(lp, Window("last", k=20)) is None
    np.testing.assert_array_equal(window_values(lp, Window("full")), lp)
    np.testing.assert_array_equal(window_values(list(lp), Window("last", k=1)), [-9])


def test_percentage_windows_use_floor() -> None:
    lp = -np.arange(10, dtype=float)
    # floor(0.25 * 10) = 2
    np.testing.assert_array_equal(window_values(lp, Window("first", fraction=0.25)), [0, -1])
    np.testing.assert_array_equal(window_values(lp, Window("last", fraction=0.25)), [-8, -9])
    # floor(0.5 * 7) = 3
    np.testing.assert_array_equal(window_values(lp[:7], Window("first", fraction=0.5)), [0, -1, -2])
    np.testing.assert_array_equal(window_values(lp[:7], Window("last", fraction=0.5)), [-4, -5, -6])
    np.testing.assert_array_equal(window_values(lp, Window("last", fraction=1.0)), lp)
    # floor(0.1 * 9) = 0: undefined; floor(0.1 * 10) = 1
    assert window_values(lp[:9], Window("first", fraction=0.1)) is None
    np.testing.assert_array_equal(window_values(lp, Window("last", fraction=0.1)), [-9])
    # 0.29 * 100 is 28.999... in binary floating point: the paper's floor(alpha T) is 29
    assert Window("first", fraction=0.29).size(100) == 29


def test_empty_trajectory_has_no_windows() -> None:
    for window in DEFAULT_WINDOWS:
        assert window_values([], window) is None


def test_window_statistics_match_numpy() -> None:
    rng = np.random.default_rng(0)
    for size in (2, 3, 7, 50):
        w = -rng.exponential(1.0, size)
        s = window_statistics(w)
        assert list(s) == list(STATISTICS)
        assert s["mean"] == pytest.approx(np.mean(w))
        assert s["median"] == pytest.approx(np.median(w))
        assert s["min"] == np.min(w) and s["max"] == np.max(w)
        assert s["var"] == pytest.approx(np.var(w, ddof=0))
        assert s["std"] == pytest.approx(np.std(w, ddof=0))
        assert s["range"] == pytest.approx(np.ptp(w))
        assert s["slope"] == pytest.approx(np.polyfit(np.arange(1, size + 1), w, 1)[0])


def test_window_statistics_edge_cases() -> None:
    one = window_statistics(np.array([-0.5]))
    assert one["var"] == 0.0 and one["std"] == 0.0 and one["range"] == 0.0 and one["mean"] == -0.5
    assert math.isnan(one["slope"])
    assert window_statistics(np.array([-3.0, -2.0, -1.0]))["slope"] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        window_statistics(np.array([]))


def test_trajectory_features_keys_and_undefined_windows() -> None:
    lp = [-0.1, -2.0, -0.5, -1.0]  # T = 4
    feats = trajectory_features(lp)
    assert list(feats) == feature_names(DEFAULT_WINDOWS)
    assert len(feats) == 15 * len(STATISTICS)
    assert feats["first3_range"] == pytest.approx(1.9)
    assert feats["last3_mean"] == pytest.approx(np.mean(lp[1:]))
    assert feats["full_median"] == pytest.approx(np.median(lp))
    assert feats["first50pct_max"] == pytest.approx(-0.1)
    assert feats["last25pct_mean"] == pytest.approx(-1.0)  # floor(0.25 * 4) = 1 token
    assert math.isnan(feats["last25pct_slope"])  # one token: no slope
    for stat in STATISTICS:
        assert math.isnan(feats[f"first5_{stat}"]) and math.isnan(feats[f"last20_{stat}"])
        assert math.isnan(feats[f"first10pct_{stat}"])  # floor(0.4) = 0
    with pytest.raises(ValueError, match="duplicate"):
        trajectory_features(lp, [Window("full"), Window("full")])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_logprobs_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match="non-finite"):
        trajectory_features([-0.1, bad, -0.2])


def test_feature_label_wording() -> None:
    assert feature_label("first3_range") == "range of first 3 tokens"
    assert feature_label("last50pct_median") == "median of final half"
    assert feature_label("full_median") == "median of full response"
    assert feature_label("first3_max") == "max of first 3 tokens"
    assert feature_label("first5_median") == "median of first 5 tokens"
    assert feature_label("first50pct_std") == "standard deviation of first half"
    assert feature_label("first25pct_var") == "variance of first 25%"
    assert feature_label("last10pct_slope") == "slope of last 10%"
    assert feature_label("last20_min") == "min of last 20 tokens"
    for name in feature_names(DEFAULT_WINDOWS):
        window, stat = parse_feature(name)
        assert f"{window.name}_{stat}" == name


@pytest.mark.parametrize("name", ["full", "q", "critical_flag", "first3_mode", "middle3_mean", "first0_mean", "_mean"])
def test_feature_label_unknown(name: str) -> None:
    with pytest.raises(ValueError, match="unknown feature"):
        feature_label(name)


def test_record_logprobs() -> None:
    assert record_logprobs(record("a", None)) is None
    assert record_logprobs(record("b", [])) is None
    assert record_logprobs(record("c", [-0.1, -0.2])) == [-0.1, -0.2]


def test_features_frame_skips_records_without_logprobs() -> None:
    lp1 = [-0.1, -0.2, -1.5, -0.3, -0.05]
    lp2 = list(-np.linspace(0.0, 2.0, 40))
    records = [
        record("k1", lp1),
        record("k2", None),
        record("k3", lp2, role="skeptic", round_=2),
        record("k4", []),
    ]
    frame, skipped = features_frame(records)
    assert skipped == 2
    assert list(frame.columns) == [*META_COLUMNS, *feature_names(DEFAULT_WINDOWS)]
    assert frame["key"].tolist() == ["k1", "k3"]
    assert frame["role"].tolist() == ["advocate", "skeptic"]
    assert frame["round"].tolist() == [1, 2]
    assert frame["n_tokens"].tolist() == [5, 40]
    assert frame.iloc[0]["run_id"] == "r" and frame.iloc[0]["trait"] == "Ideas"
    for i, lp in enumerate((lp1, lp2)):
        expected = pd.Series(trajectory_features(lp), dtype=float)
        got = frame.iloc[i][expected.index].astype(float)
        pd.testing.assert_series_equal(got, expected, check_names=False)
    assert feature_columns(frame) == feature_names(DEFAULT_WINDOWS)


def test_features_frame_bad_logprob_names_the_record() -> None:
    with pytest.raises(ValueError, match="'bad-key'"):
        features_frame([record("ok", [-0.1]), record("bad-key", [-0.1, math.nan])])


def test_features_frame_empty_and_custom_windows() -> None:
    frame, skipped = features_frame([])
    assert skipped == 0 and frame.empty
    assert list(frame.columns) == [*META_COLUMNS, *feature_names(DEFAULT_WINDOWS)]
    windows = [Window("first", k=2), Window("last", fraction=0.5)]
    frame, skipped = features_frame([record("k", [-1.0, -2.0, -3.0]), record("n", None)], windows)
    assert skipped == 1
    assert feature_columns(frame) == [f"first2_{s}" for s in STATISTICS] + [f"last50pct_{s}" for s in STATISTICS]
    assert frame.loc[0, "first2_slope"] == pytest.approx(-1.0)
    assert frame.loc[0, "last50pct_mean"] == pytest.approx(-3.0)


def test_feature_columns_ignores_other_columns() -> None:
    frame = pd.DataFrame(columns=["key", "role", "first3_range", "q", "critical_flag", "full_median", "n_tokens"])
    assert feature_columns(frame) == ["first3_range", "full_median"]
