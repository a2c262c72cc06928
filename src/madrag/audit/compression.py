"""Compression (the MADRAG paper's 4.3, middle-score bias): per protocol and trait, over every essay of the run
with a score
and a human reference (no call is made): the predicted and human score distributions, the share of each at the
scale's ends, the slope of the prediction on the reference (1: no compression, 0: one score for everything),
and the extreme-subset figures of the MADRAG paper's Table 2 (:func:`madrag.metrics.extreme_subset`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from madrag.audit.stats import Interval, Scores, finite, interval
from madrag.data.essay import Essay
from madrag.metrics import PAPER_TIES, TieRule, extreme_subset
from madrag.rubric import Rubric, Trait


class CompressionRow(BaseModel):
    """One protocol and trait. ``compressed``: the slope's interval lies below 1 and fewer predictions than human
    references are at the scale's ends (None: too few essays to tell)."""

    protocol: str
    trait: str
    n: int
    predicted: dict[int, int]
    human: dict[int, int]
    predicted_ends: float | None
    human_ends: float | None
    slope: Interval
    extreme_n: int
    extreme_scored: int
    extreme_agree_at_1: float | None
    extreme_mae: float | None
    compressed: bool | None


def _slope(ref: NDArray[np.float64], pred: NDArray[np.float64]) -> float:
    if ref.size < 2 or float(np.ptp(ref)) == 0.0:
        return float("nan")
    return float(np.polyfit(ref, pred, 1)[0])


def _ends(values: Sequence[float], trait: Trait) -> float | None:
    return float(np.mean([v in (trait.min, trait.max) for v in values])) if values else None


def compression_row(
    protocol: str, trait: Trait, essays: Sequence[Essay], scores: Scores, n_boot: int, ties: TieRule = PAPER_TIES
) -> CompressionRow:
    """The compression figures of one protocol and trait (the human reference's ties rounded by ``ties``)."""
    ref: list[float] = []
    pred: list[float] = []
    raters: list[list[float]] = []
    preds: list[float | None] = []
    for essay in essays:
        found = scores.get((protocol, essay.id, trait.name))
        if found is None:
            continue
        raters.append(essay.rater_scores.get(trait.name, []))
        preds.append(None if found.score is None else float(found.score))
        value = essay.reference(trait, ties)
        if value is not None and found.score is not None:
            ref.append(float(value))
            pred.append(float(found.score))
    slope = interval(_slope, ref, pred, n_boot, 0)
    extreme = extreme_subset(raters, preds, trait.min, trait.max)
    p_ends, h_ends = _ends(pred, trait), _ends(ref, trait)
    compressed = None
    if slope.high is not None and p_ends is not None and h_ends is not None:
        compressed = slope.high < 1.0 and p_ends < h_ends
    return CompressionRow(
        protocol=protocol,
        trait=trait.name,
        n=len(ref),
        predicted={s: int(c) for s, c in sorted(Counter(int(v) for v in pred).items())},
        human={s: int(c) for s, c in sorted(Counter(int(v) for v in ref).items())},
        predicted_ends=p_ends,
        human_ends=h_ends,
        slope=slope,
        extreme_n=extreme.n,
        extreme_scored=extreme.n_scored,
        extreme_agree_at_1=finite(extreme.agree_at_1),
        extreme_mae=finite(extreme.mae),
        compressed=compressed,
    )


def compression_table(
    rubric: Rubric,
    protocols: Sequence[str],
    essays: Sequence[Essay],
    scores: Scores,
    n_boot: int,
    ties: TieRule = PAPER_TIES,
) -> list[CompressionRow]:
    """Every protocol's and trait's compression row (the human reference's ties rounded by ``ties``, the run's
    ``reference_ties``)."""
    return [compression_row(p, t, essays, scores, n_boot, ties) for p in protocols for t in rubric.traits]
