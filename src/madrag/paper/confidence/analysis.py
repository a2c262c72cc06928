"""Confidence features vs judged reasoning quality (the confidence paper, Section 4.1 metrics, Section 4.2, Appendix B).

For every role (or other group), every judge target and every confidence feature this computes the
paper's association metrics: Spearman's rho and Kendall's tau for the ordinal targets (the three 1-3
dimensions and the aggregate Q), AUROC and the point-biserial correlation for the binary critical flag.
:func:`top_features` then keeps the best features per role-target pair, as in Table 1 and Appendix B.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import stats
from sklearn.metrics import roc_auc_score

from madrag.paper.confidence.features import feature_label

ORDINAL_TARGETS: tuple[str, ...] = ("instruction_following", "justification_quality", "evidence_grounding", "q")
BINARY_TARGETS: tuple[str, ...] = ("critical_flag",)
TARGET_LABELS: dict[str, str] = {
    "instruction_following": "instruction following",
    "justification_quality": "justification quality",
    "evidence_grounding": "evidence grounding",
    "q": "aggregate Q",
    "critical_flag": "critical issue",
}
ORDINAL_METRICS: tuple[str, ...] = ("spearman", "spearman_p", "kendall", "kendall_p")
BINARY_METRICS: tuple[str, ...] = ("auroc", "point_biserial", "point_biserial_p")
CORRELATION_COLUMNS: tuple[str, ...] = ("group", "target", "feature", "label", "n", *ORDINAL_METRICS, *BINARY_METRICS)
MIN_PAIRS = 3


def is_binary_target(target: str) -> bool:
    """Whether ``target`` is scored as a binary target (AUROC, point-biserial) rather than an ordinal one."""
    return target in BINARY_TARGETS


def _label(feature: str) -> str:
    try:
        return feature_label(feature)
    except ValueError:  # a column that is not a log-probability feature (e.g. verbalised confidence)
        return feature


def _numeric(series: pd.Series, column: str) -> NDArray[np.float64]:
    try:
        return np.asarray(series.astype("float64").to_numpy(na_value=np.nan), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"column {column!r} is not numeric: {exc}") from None


def _pair_metrics(x: NDArray[np.float64], y: NDArray[np.float64], binary: bool) -> dict[str, float]:
    """Metrics of one complete (NaN-free) feature-target pair; NaN for a degenerate pair.

    Degenerate: fewer than :data:`MIN_PAIRS` pairs, a constant feature, or a constant target (for a binary
    target: only one class present).
    """
    out = dict.fromkeys((*ORDINAL_METRICS, *BINARY_METRICS), math.nan)
    if x.size < MIN_PAIRS or np.ptp(x) == 0 or np.ptp(y) == 0:
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's near-constant-input warnings
        if binary:
            pb = stats.pointbiserialr(y, x)
            out.update(
                auroc=float(roc_auc_score(y.astype(np.int64), x)),
                point_biserial=float(pb.statistic),
                point_biserial_p=float(pb.pvalue),
            )
        else:
            rho = stats.spearmanr(x, y)
            tau = stats.kendalltau(x, y)
            out.update(
                spearman=float(rho.statistic),
                spearman_p=float(rho.pvalue),
                kendall=float(tau.statistic),
                kendall_p=float(tau.pvalue),
            )
    return out


def correlations(
    frame: pd.DataFrame,
    features: Sequence[str],
    targets: Sequence[str] = (*ORDINAL_TARGETS, *BINARY_TARGETS),
    group_by: str | None = "role",
) -> pd.DataFrame:
    """Association of every feature with every judge target, per group (Section 4.1 metrics, Appendix B).

    ``frame`` has one row per debater response with the feature and target columns; a NaN target means
    "not judged". Rows are dropped pairwise: a row missing one feature or target only leaves that pair.
    Ordinal targets get Spearman's rho and Kendall's tau (with p-values); binary targets (those in
    :data:`BINARY_TARGETS`, valued 0/1) get AUROC of the feature as a score for the positive class and the
    point-biserial correlation. Metrics not applicable to a target, and every metric of a degenerate pair
    (``n < 3``, constant feature or target, one class), are NaN. ``group_by=None`` puts all rows in group
    ``"all"``. Returns long format: one row per (group, target, feature), columns :data:`CORRELATION_COLUMNS`.
    """
    needed = [*features, *targets, *([group_by] if group_by is not None else [])]
    missing = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if missing:
        raise ValueError(f"columns not in the frame: {missing}")
    values = {c: _numeric(frame[c], c) for c in dict.fromkeys([*features, *targets])}
    for target in targets:
        observed = values[target][np.isfinite(values[target])]
        if is_binary_target(target) and not np.isin(observed, (0.0, 1.0)).all():
            raise ValueError(f"binary target {target!r} must be 0/1, got {sorted(set(observed.tolist()))}")
    if group_by is None:
        groups: list[tuple[object, NDArray[np.intp]]] = [("all", np.arange(len(frame)))]
    else:
        codes, uniques = pd.factorize(frame[group_by], sort=True)
        groups = [(g, np.flatnonzero(codes == i)) for i, g in enumerate(uniques)]
    rows: list[dict[str, object]] = []
    for group, idx in groups:
        for target in targets:
            y_all = values[target][idx]
            for feature in features:
                x_all = values[feature][idx]
                keep = np.isfinite(x_all) & np.isfinite(y_all)
                metrics = _pair_metrics(x_all[keep], y_all[keep], is_binary_target(target))
                row = {"group": group, "target": target, "feature": feature, "label": _label(feature)}
                rows.append({**row, "n": int(keep.sum()), **metrics})
    return pd.DataFrame(rows, columns=list(CORRELATION_COLUMNS))


RankBy = Literal["signed", "abs"]
RANK_BY: tuple[RankBy, ...] = ("signed", "abs")
PAPER_RANK_BY: RankBy = "signed"
"""The confidence paper, Appendix B: "features are ranked by Spearman correlation ... ranked by AUROC", highest
first."""


def top_features(corr: pd.DataFrame, k: int = 3, rank_by: RankBy = PAPER_RANK_BY) -> pd.DataFrame:
    """The ``k`` best features per (group, target) of a :func:`correlations` frame (Table 1, Appendix B).

    Ordinal targets are ranked by Spearman's rho, binary targets by AUROC. By default (``rank_by="signed"``,
    the paper's: "features are ranked by Spearman correlation with the LLM-as-judge score ... For critical
    failure detection, features are ranked by AUROC") by ``rho`` and ``AUROC`` themselves, highest first.
    ``rank_by="abs"`` ranks by strength regardless of direction: ``|rho|`` and ``|AUROC - 0.5|`` (a feature
    whose *low* values flag the critical issue is as informative as one whose high values do). NaN metrics
    are never ranked; ties keep the order of ``corr``. Groups and targets keep their order in ``corr``; a
    ``rank`` column (1..k) follows ``target``.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    if rank_by not in RANK_BY:
        raise ValueError(f"rank_by must be 'signed' or 'abs', not {rank_by!r}")
    binary = corr["target"].map(is_binary_target).astype(bool)
    metric = corr["auroc"].where(binary, corr["spearman"]).astype("float64")
    score = (metric - 0.5 * binary).abs() if rank_by == "abs" else metric
    ranked = corr.assign(
        _pair=corr.groupby(["group", "target"], sort=False).ngroup(),
        _score=score,
        _pos=np.arange(len(corr)),
    )
    ranked = ranked[ranked["_score"].notna()]
    ranked = ranked.sort_values(["_pair", "_score", "_pos"], ascending=[True, False, True], kind="stable")
    ranked = ranked.groupby("_pair", sort=False).head(k)
    ranked.insert(list(ranked.columns).index("target") + 1, "rank", ranked.groupby("_pair").cumcount() + 1)
    return ranked.drop(columns=["_pair", "_score", "_pos"]).reset_index(drop=True)
