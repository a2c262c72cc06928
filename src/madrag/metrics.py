"""Agreement metrics as small pure functions over arrays, plus bootstrap intervals and paired tests.

Conventions shared by every function here:

* Inputs are 1-D sequences of equal length, paired by position (essay i of ``a`` is essay i of ``b``).
* A metric that is undefined for its input (no pairs, constant input, no expected disagreement) returns
  ``nan`` rather than a number that looks meaningful; bootstrap helpers drop such resamples.
* Unusable predictions are never imputed: callers drop them and count them (see :func:`extreme_subset`).

It also holds the rounding of a mean onto a trait's integer scale: :func:`round_to_scale` with a tie rule
(:data:`TIE_RULES`) for the human reference label, and :func:`round_half_up_clamped` (ties up) for the average of
several judges and the feature baseline's predictions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

Metric = Callable[[NDArray[np.float64], NDArray[np.float64]], float]
NAN = float("nan")


class Rated(Protocol):
    """What :func:`rater_pairs` reads of an essay (:class:`madrag.data.essay.Essay` is one): a rater's score of a
    trait, None when that rater gave none. Typed by its shape, so this bottom module imports nothing of madrag."""

    def rater(self, trait: str, rater_index: int) -> float | None: ...


TieRule = Literal["half_up", "half_even", "half_down"]
"""How a mean exactly halfway between two scores (2.5) is rounded: up (3), to the even score (2; banker's
rounding, unbiased over many ties) or down (2)."""
TIE_RULES: tuple[TieRule, ...] = ("half_up", "half_even", "half_down")
PAPER_TIES: TieRule = "half_up"
"""The MADRAG paper's B.5 rounds "to the nearest valid integer" and names no tie rule; half up is madrag's reading."""
_TIE_TOLERANCE = 1e-9


def round_half_up(value: float) -> int:
    """Round to the nearest integer, halves upwards (2.5 -> 3), unlike Python's banker's rounding."""
    return math.floor(value + 0.5)


def is_tie(value: float) -> bool:
    """Whether ``value`` lies halfway between two integers (2.5; the mean of two raters one point apart)."""
    return abs(value - math.floor(value) - 0.5) < _TIE_TOLERANCE


def checked_ties(rule: TieRule) -> TieRule:
    """``rule``, or a ValueError when it is not a tie rule (:data:`TIE_RULES`)."""
    if rule not in TIE_RULES:
        raise ValueError(f"tie rule must be one of {', '.join(TIE_RULES)}, not {rule!r}")
    return rule


def round_ties(value: float, ties: TieRule = PAPER_TIES) -> int:
    """Round to the nearest integer; a value halfway between two (:func:`is_tie`) goes by ``ties``."""
    if not is_tie(value):
        return round_half_up(value)
    low = math.floor(value)
    if ties == "half_up":
        return low + 1
    if ties == "half_down":
        return low
    if ties == "half_even":
        return low if low % 2 == 0 else low + 1
    raise ValueError(f"tie rule must be one of {', '.join(TIE_RULES)}, not {ties!r}")


def round_to_scale(value: float, lo: int, hi: int, ties: TieRule = PAPER_TIES) -> int:
    """A mean score as a label on the integer scale ``[lo, hi]``: rounded to the nearest integer (halves by
    ``ties``), then clamped to the scale (the MADRAG paper, Appendix B.5: "rounded to the nearest valid integer")."""
    return min(max(round_ties(value, ties), lo), hi)


def round_half_up_clamped(value: float, lo: int, hi: int) -> int:
    """A mean score as a label on the integer scale ``[lo, hi]``: rounded half up, then clamped to the scale
    (:func:`round_to_scale` with ties up)."""
    return round_to_scale(value, lo, hi, "half_up")


def _pair(a: ArrayLike, b: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"paired arrays differ in length: {x.size} vs {y.size}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("scores must be finite numbers (drop unusable scores before computing a metric)")
    return x, y


def _indices(x: NDArray[np.float64], min_score: int, max_score: int) -> NDArray[np.int64]:
    """Scores as 0-based category indices of the scale [min_score, max_score]; non-integers are an error."""
    if (np.rint(x) != x).any():
        raise ValueError("QWK needs integer scores")
    if x.size and (x.min() < min_score or x.max() > max_score):
        raise ValueError(f"scores outside the scale [{min_score}, {max_score}]: {sorted(set(x.tolist()))}")
    return (x - min_score).astype(np.int64)


def kappa_from_confusion(confusion: NDArray[np.float64]) -> float:
    """Quadratic weighted kappa of a k x k confusion matrix (rows: rater a, columns: rater b).

    kappa = 1 - sum(w * O) / sum(w * E) with w_ij = (i - j)^2 and E the outer product of the marginals / n.
    Undefined (``nan``), as a correlation is with a constant input: fewer than two pairs, or a rater who used one
    category only (one essay is that case for both). Then O equals E whatever the scores, so the formula gives 0
    (or 0 / 0) by construction, not by measuring agreement; scikit-learn returns 0 there (nan with a warning when
    both raters used the same one category). A table shows such a cell as undefined, never as 0.000.
    """
    k = confusion.shape[0]
    n = confusion.sum()
    rows, columns = confusion.sum(axis=1), confusion.sum(axis=0)
    if n < 2 or np.count_nonzero(rows) < 2 or np.count_nonzero(columns) < 2:
        return NAN
    grid = np.arange(k, dtype=np.float64)
    weights = (grid[:, None] - grid[None, :]) ** 2
    expected = np.outer(rows, columns) / n
    denominator = float((weights * expected).sum())
    if denominator == 0.0:
        return NAN
    return 1.0 - float((weights * confusion).sum()) / denominator


def qwk(a: ArrayLike, b: ArrayLike, min_score: int, max_score: int) -> float:
    """Quadratic weighted kappa over the trait's FULL scale (labels = range(min_score, max_score + 1)).

    Using the full scale (not only the labels that occur) makes values comparable across subsets and matches
    ``sklearn.metrics.cohen_kappa_score(a, b, weights="quadratic", labels=range(min, max + 1))``.
    Returns ``nan`` when undefined (see :func:`kappa_from_confusion`).
    """
    if min_score > max_score:
        raise ValueError(f"min_score {min_score} > max_score {max_score}")
    x, y = _pair(a, b)
    k = max_score - min_score + 1
    ia, ib = _indices(x, min_score, max_score), _indices(y, min_score, max_score)
    confusion = np.bincount(ia * k + ib, minlength=k * k).reshape(k, k).astype(np.float64)
    return kappa_from_confusion(confusion)


def qwk_metric(min_score: int, max_score: int) -> Metric:
    """:func:`qwk` with the scale fixed, for the bootstrap helpers."""

    def metric(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
        return qwk(a, b, min_score, max_score)

    return metric


def rater_pairs(
    essays: Iterable[Rated], trait: str, first: int = 0, second: int = 1
) -> tuple[list[float], list[float]]:
    """Scores of rater ``first`` and rater ``second`` (0-based) on the essays where both scored ``trait``."""
    pairs = [
        (x, y) for e in essays if (x := e.rater(trait, first)) is not None and (y := e.rater(trait, second)) is not None
    ]
    return [x for x, _ in pairs], [y for _, y in pairs]


def rmse(a: ArrayLike, b: ArrayLike) -> float:
    """Root mean squared error; ``nan`` without pairs."""
    x, y = _pair(a, b)
    return math.sqrt(float(np.mean((x - y) ** 2))) if x.size else NAN


def mae(a: ArrayLike, b: ArrayLike) -> float:
    """Mean absolute error; ``nan`` without pairs."""
    x, y = _pair(a, b)
    return float(np.mean(np.abs(x - y))) if x.size else NAN


def _degenerate(x: NDArray[np.float64], y: NDArray[np.float64]) -> bool:
    """Correlations are undefined with fewer than 2 pairs or a constant input."""
    return x.size < 2 or bool(np.all(x == x[0])) or bool(np.all(y == y[0]))


def pearson(a: ArrayLike, b: ArrayLike) -> float:
    """Pearson's r; ``nan`` when undefined."""
    x, y = _pair(a, b)
    if _degenerate(x, y):
        return NAN
    xc, yc = x - x.mean(), y - y.mean()
    return float(np.clip((xc @ yc) / math.sqrt(float(xc @ xc) * float(yc @ yc)), -1.0, 1.0))


def spearman(a: ArrayLike, b: ArrayLike) -> float:
    """Spearman's rho: Pearson's r of average ranks (ties get the mean rank, as in scipy)."""
    x, y = _pair(a, b)
    if _degenerate(x, y):
        return NAN
    from scipy import stats  # imported on use: ``import madrag`` stays free of scipy

    return pearson(stats.rankdata(x), stats.rankdata(y))


# -- the extreme-score subset (the MADRAG paper, 4.3) -----------------------------------------------------------


def extreme_targets(rater_scores: Sequence[float], min_score: int, max_score: int) -> tuple[int, ...]:
    """The extreme reference(s) of one essay-trait instance; () when no rater gave the min or the max.

    The reference is the extreme the raters gave. If raters gave both extremes, the one given by more raters
    wins; on a tie (e.g. one rater 0, the other 3) both are kept and a prediction is measured against the
    nearer one, so the instance stays in the subset (as in the paper's N) without favouring either rater.
    """
    n_min = sum(1 for s in rater_scores if s == min_score)
    n_max = sum(1 for s in rater_scores if s == max_score)
    if n_min == 0 and n_max == 0:
        return ()
    if min_score == max_score or n_min > n_max:
        return (min_score,)
    if n_max > n_min:
        return (max_score,)
    return (min_score, max_score)


@dataclass(frozen=True)
class ExtremeSummary:
    """Agree@1 and MAE over the extreme subset; unusable predictions are counted, not scored."""

    n: int  # instances in the subset (at least one rater at min or max)
    n_scored: int  # of those, with a usable prediction
    n_unusable: int
    n_conflict: int  # raters gave both extremes equally often
    agree_at_1: float  # fraction of scored instances with |pred - extreme| <= 1; nan when none scored
    mae: float  # mean |pred - extreme| over scored instances
    selected: tuple[int, ...]  # positions (in the input) of the subset's instances


def extreme_subset(
    rater_scores: Sequence[Sequence[float]], predictions: Sequence[float | None], min_score: int, max_score: int
) -> ExtremeSummary:
    """The MADRAG paper, 4.3: instances where at least one rater gave the trait's min or max score.

    ``rater_scores[i]`` are all raters' scores of instance i, ``predictions[i]`` the model's score or None
    when unusable. Errors are measured from the extreme reference (see :func:`extreme_targets`).
    """
    if len(rater_scores) != len(predictions):
        raise ValueError(f"{len(rater_scores)} rater rows but {len(predictions)} predictions")
    selected: list[int] = []
    errors: list[float] = []
    n_conflict = n_unusable = 0
    for i, (raters, pred) in enumerate(zip(rater_scores, predictions, strict=True)):
        targets = extreme_targets(raters, min_score, max_score)
        if not targets:
            continue
        selected.append(i)
        n_conflict += len(targets) > 1
        if pred is None or not math.isfinite(pred):
            n_unusable += 1
            continue
        errors.append(min(abs(pred - t) for t in targets))
    err = np.asarray(errors, dtype=np.float64)
    return ExtremeSummary(
        n=len(selected),
        n_scored=len(errors),
        n_unusable=n_unusable,
        n_conflict=n_conflict,
        agree_at_1=float(np.mean(err <= 1.0)) if err.size else NAN,
        mae=float(err.mean()) if err.size else NAN,
        selected=tuple(selected),
    )


# -- bootstrap ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BootstrapCI:
    """A point estimate with a percentile bootstrap interval; ``n_valid`` resamples had a defined metric."""

    estimate: float
    low: float
    high: float
    n_boot: int
    n_valid: int


@dataclass(frozen=True)
class PairedComparison:
    """Metric of A minus metric of B on the same essays, with a bootstrap CI and a two-sided p-value."""

    metric_a: float
    metric_b: float
    diff: float
    low: float
    high: float
    p_value: float
    n: int
    n_boot: int


def _resamples(n_items: int, n_boot: int, seed: int) -> NDArray[np.int64]:
    """Row r holds the essay positions of bootstrap resample r (essays drawn with replacement)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_items, size=(n_boot, n_items))


def _percentiles(values: NDArray[np.float64], alpha: float) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return NAN, NAN
    low, high = np.percentile(finite, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(low), float(high)


def bootstrap_ci(
    metric: Metric, a: ArrayLike, b: ArrayLike, n: int = 2000, seed: int = 0, alpha: float = 0.05
) -> BootstrapCI:
    """Percentile bootstrap CI of ``metric(a, b)``, resampling essays (pairs) with replacement.

    Resamples where the metric is undefined (nan) are dropped; ``n_valid`` says how many remained.
    Deterministic for a given ``seed``.
    """
    x, y = _pair(a, b)
    estimate = metric(x, y) if x.size else NAN
    if x.size == 0 or n < 1:
        return BootstrapCI(estimate, NAN, NAN, n, 0)
    idx = _resamples(x.size, n, seed)
    values = np.array([metric(x[row], y[row]) for row in idx], dtype=np.float64)
    low, high = _percentiles(values, alpha)
    return BootstrapCI(estimate, low, high, n, int(np.isfinite(values).sum()))


def paired_bootstrap(
    metric: Metric,
    reference: ArrayLike,
    pred_a: ArrayLike,
    pred_b: ArrayLike,
    n: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> PairedComparison:
    """Paired bootstrap of ``metric(ref, A) - metric(ref, B)`` over the same essays.

    Each resample draws essays with replacement and recomputes both metrics on the same draw, so the
    essays' difficulty cancels. Two-sided p-value from the bootstrap distribution of the difference:
    p = min(1, 2 * (1 + #{d* on the far side of 0}) / (1 + n_valid)), the smaller tail at zero; it is below
    ``alpha`` when the percentile CI excludes 0 (up to the +1 and percentile interpolation on few resamples).
    """
    ref, a = _pair(reference, pred_a)
    _, b = _pair(reference, pred_b)
    m_a = metric(ref, a) if ref.size else NAN
    m_b = metric(ref, b) if ref.size else NAN
    diff = m_a - m_b
    if ref.size == 0 or n < 1 or not math.isfinite(diff):
        return PairedComparison(m_a, m_b, diff, NAN, NAN, NAN, int(ref.size), n)
    idx = _resamples(ref.size, n, seed)
    diffs = np.array([metric(ref[row], a[row]) - metric(ref[row], b[row]) for row in idx], dtype=np.float64)
    diffs = diffs[np.isfinite(diffs)]
    low, high = _percentiles(diffs, alpha)
    tail = min(int(np.sum(diffs <= 0)), int(np.sum(diffs >= 0)))
    p_value = min(1.0, 2 * (1 + tail) / (1 + diffs.size))
    return PairedComparison(m_a, m_b, diff, low, high, p_value, int(ref.size), n)


MIN_CI_N = 30
"""Below this many essays a table's bootstrap intervals get a warning: a percentile bootstrap over a handful of
essays resamples the same few values, so its interval is too narrow (or a single point) and its coverage falls
short of its level; 30 is the usual rule of thumb for resampling methods."""


def small_n_warning(ns: Iterable[float], what: str) -> str | None:
    """A warning when the smallest ``n`` of a table with bootstrap intervals (``what``) is below
    :data:`MIN_CI_N`; None when there is none (or no ``n``)."""
    found = [int(n) for n in ns if not math.isnan(n) and n > 0]
    if not found or min(found) >= MIN_CI_N:
        return None
    return (
        f"warning: {what} rest on as few as {min(found)} essays (fewer than {MIN_CI_N}): such bootstrap "
        "intervals are too narrow to trust; score more essays before reading them"
    )
