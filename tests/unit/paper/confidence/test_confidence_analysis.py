"""Confidence features vs judged quality (the confidence paper, Section 4.1 metrics, Appendix B rankings)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from madrag.paper.confidence.analysis import (
    BINARY_TARGETS,
    CORRELATION_COLUMNS,
    ORDINAL_TARGETS,
    PAPER_RANK_BY,
    TARGET_LABELS,
    correlations,
    top_features,
)

FEATURES = ["first3_range", "full_median", "last50pct_slope"]
ORDINAL = ["spearman", "spearman_p", "kendall", "kendall_p"]
BINARY = ["auroc", "point_biserial", "point_biserial_p"]


def random_frame(seed: int = 7, n: int = 80) -> pd.DataFrame:
    """A synthetic features + judgments frame whose ordinal targets follow ``first3_range``."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"role": rng.choice(["advocate", "skeptic"], n)})
    for f in FEATURES:
        frame[f] = rng.normal(size=n)
    for t in ("instruction_following", "justification_quality", "evidence_grounding"):
        frame[t] = np.clip(np.round(2 + frame["first3_range"] + rng.normal(size=n)), 1, 3)
    frame["critical_flag"] = (frame["full_median"] + rng.normal(size=n) > 0.8).astype(float)
    frame["q"] = np.where(frame["critical_flag"] == 1, 0, frame[list(ORDINAL_TARGETS[:3])].sum(axis=1))
    # not judged / undefined features, pairwise
    frame.loc[rng.choice(n, 8, replace=False), "q"] = np.nan
    frame.loc[rng.choice(n, 6, replace=False), "critical_flag"] = np.nan
    frame.loc[rng.choice(n, 5, replace=False), "last50pct_slope"] = np.nan
    return frame


def test_target_constants() -> None:
    assert set(TARGET_LABELS) == {*ORDINAL_TARGETS, *BINARY_TARGETS}
    assert TARGET_LABELS["q"] == "aggregate Q" and TARGET_LABELS["critical_flag"] == "critical issue"


def test_correlations_match_scipy_and_sklearn() -> None:
    frame = random_frame()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        corr = correlations(frame, FEATURES)
    assert list(corr.columns) == list(CORRELATION_COLUMNS)
    assert len(corr) == 2 * 5 * 3
    assert corr["group"].tolist()[:15] == ["advocate"] * 15
    for row in corr.itertuples(index=False):
        sub = frame[frame["role"] == row.group][[row.feature, row.target]].dropna()
        x, y = sub[row.feature].to_numpy(), sub[row.target].to_numpy()
        assert row.n == len(sub)
        if row.target in BINARY_TARGETS:
            assert row.auroc == pytest.approx(roc_auc_score(y, x))
            pb = stats.pointbiserialr(y, x)
            assert row.point_biserial == pytest.approx(pb.statistic)
            assert row.point_biserial_p == pytest.approx(pb.pvalue)
            assert all(math.isnan(getattr(row, m)) for m in ORDINAL)
        else:
            rho, tau = stats.spearmanr(x, y), stats.kendalltau(x, y)
            assert row.spearman == pytest.approx(rho.statistic)
            assert row.spearman_p == pytest.approx(rho.pvalue)
            assert row.kendall == pytest.approx(tau.statistic)
            assert row.kendall_p == pytest.approx(tau.pvalue)
            assert all(math.isnan(getattr(row, m)) for m in BINARY)
    labels = dict(zip(corr["feature"], corr["label"], strict=False))
    assert labels["first3_range"] == "range of first 3 tokens"
    assert labels["full_median"] == "median of full response"
    assert labels["last50pct_slope"] == "slope of final half"


def test_correlations_pairwise_nan_and_ungrouped() -> None:
    frame = random_frame()
    corr = correlations(frame, FEATURES, targets=["q"], group_by=None)
    assert set(corr["group"]) == {"all"}
    n = corr.set_index("feature")["n"]
    assert n["first3_range"] == frame["q"].notna().sum()
    assert n["last50pct_slope"] == (frame["q"].notna() & frame["last50pct_slope"].notna()).sum()
    whole = frame[["first3_range", "q"]].dropna()
    rho = stats.spearmanr(whole["first3_range"], whole["q"]).statistic
    assert corr.set_index("feature").loc["first3_range", "spearman"] == pytest.approx(rho)


def test_correlations_degenerate_cases_are_nan_without_warnings() -> None:
    frame = pd.DataFrame(
        {
            "role": ["advocate"] * 6 + ["skeptic"] * 2,
            "first3_range": [0.1, 0.5, 0.2, 0.9, 0.4, 0.3, 0.1, 0.2],
            "full_median": [-1.0] * 8,  # constant feature
            "q": [3, 3, 3, 3, 3, 3, 5, 7],  # constant for the advocate
            "instruction_following": [1, 2, 3, np.nan, np.nan, np.nan, 1, 2],  # n = 3 / 2
            "critical_flag": [0, 0, 0, 0, 0, 0, 0, 1],  # one class for the advocate
            "custom_confidence": [0.2, 0.4, 0.1, 0.8, 0.6, 0.3, 0.5, 0.5],
        }
    )
    features = ["first3_range", "full_median", "custom_confidence"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        corr = correlations(frame, features, targets=["q", "instruction_following", "critical_flag"])
    metrics = [*ORDINAL, *BINARY]
    idx = corr.set_index(["group", "target", "feature"])
    assert idx.loc[("advocate", "q", "first3_range"), metrics].isna().all()  # constant target
    assert idx.loc[("advocate", "critical_flag", "first3_range"), metrics].isna().all()  # one class
    assert idx.loc[("advocate", "instruction_following", "full_median"), metrics].isna().all()  # constant feature
    assert idx.loc[("skeptic", "q", "first3_range"), metrics].isna().all()  # n = 2 < 3
    assert idx.loc[("skeptic", "q", "first3_range"), "n"] == 2
    ok = idx.loc[("advocate", "instruction_following", "first3_range")]
    assert ok["n"] == 3 and ok["spearman"] == pytest.approx(stats.spearmanr([0.1, 0.5, 0.2], [1, 2, 3]).statistic)
    assert idx.loc[("advocate", "q", "custom_confidence"), "label"] == "custom_confidence"  # not a logprob feature


def test_correlations_rejects_bad_input() -> None:
    frame = random_frame()
    with pytest.raises(ValueError, match="not in the frame"):
        correlations(frame, ["first3_range", "nope"])
    frame.loc[0, "critical_flag"] = 2.0
    with pytest.raises(ValueError, match="0/1"):
        correlations(frame, FEATURES, targets=["critical_flag"])


def corr_fixture() -> pd.DataFrame:
    """A correlations table with known Spearman / AUROC values, one feature all-NaN."""
    rows = []
    for group in ("advocate", "skeptic"):
        for feature, rho, auc in [("a", 0.1, 0.2), ("b", -0.5, 0.6), ("c", 0.3, 0.55), ("d", np.nan, np.nan)]:
            rows.append({"group": group, "target": "q", "feature": feature, "spearman": rho, "auroc": np.nan})
            rows.append({"group": group, "target": "critical_flag", "feature": feature, "spearman": np.nan})
            rows[-1]["auroc"] = auc
    return pd.DataFrame(rows)


def test_top_features_rank_by_the_metric_itself_by_default_as_seed_001() -> None:
    # the confidence paper, Appendix B: "features are ranked by Spearman correlation ... ranked by AUROC"
    corr = corr_fixture()

    def order(top: pd.DataFrame, group: str, target: str) -> list[str]:
        sub = top[(top["group"] == group) & (top["target"] == target)]
        assert sub["rank"].tolist() == list(range(1, len(sub) + 1))
        return list(sub["feature"])

    top = top_features(corr, k=3)
    assert order(top, "advocate", "q") == ["c", "a", "b"]  # rho: 0.3, 0.1, -0.5
    assert order(top, "advocate", "critical_flag") == ["b", "c", "a"]  # AUROC: 0.6, 0.55, 0.2
    assert top.equals(top_features(corr, k=3, rank_by=PAPER_RANK_BY)) and PAPER_RANK_BY == "signed"
    strength = top_features(corr, k=3, rank_by="abs")
    assert order(strength, "advocate", "q") == ["b", "c", "a"]  # |rho|: 0.5, 0.3, 0.1
    assert order(strength, "skeptic", "critical_flag") == ["a", "b", "c"]  # |AUROC-0.5|: 0.3, 0.1, 0.05
    with pytest.raises(ValueError, match="rank_by"):
        top_features(corr, rank_by="loud")  # type: ignore[arg-type]
    assert list(top.columns[:3]) == ["group", "target", "rank"]
    assert list(top.drop_duplicates(["group", "target"])[["group", "target"]].itertuples(index=False, name=None)) == [
        ("advocate", "q"),
        ("advocate", "critical_flag"),
        ("skeptic", "q"),
        ("skeptic", "critical_flag"),
    ]
    # NaN never ranked, even when k asks for more; k limits
    assert "d" not in set(top_features(corr, k=10)["feature"])
    assert len(top_features(corr, k=1)) == 4
    with pytest.raises(ValueError):
        top_features(corr, k=0)


def test_top_features_ties_keep_input_order_and_end_to_end() -> None:
    tied = pd.DataFrame(
        {"group": "g", "target": "q", "feature": ["x", "y", "z"], "spearman": [0.4, -0.4, 0.4], "auroc": np.nan}
    )
    assert top_features(tied, k=3)["feature"].tolist() == ["x", "z", "y"]
    assert top_features(tied, k=3, rank_by="abs")["feature"].tolist() == ["x", "y", "z"]
    corr = correlations(random_frame(), FEATURES)
    top = top_features(corr, k=2)
    assert len(top) == 2 * 5 * 2
    for (_, target), sub in top.groupby(["group", "target"], sort=False):
        metric = sub["auroc"] if target in BINARY_TARGETS else sub["spearman"]
        assert metric.is_monotonic_decreasing
    # the planted signal: first3_range drives the ordinal dimensions, full_median the critical flag
    assert (top[(top["rank"] == 1) & (top["target"] == "instruction_following")]["feature"] == "first3_range").all()
    assert (top[(top["rank"] == 1) & (top["target"] == "critical_flag")]["feature"] == "full_median").all()
