"""Bootstrap intervals for the audit's figures (resampling essays, :func:`madrag.metrics.bootstrap_ci`), and the
paired scores they are computed on. A figure that cannot be computed (no pairs, a constant reference) is None,
never 0."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from madrag.metrics import bootstrap_ci
from madrag.protocols.base import TraitScore

ScoreKey = tuple[str, str, str]
"""(protocol, essay id, trait)."""
Scores = Mapping[ScoreKey, TraitScore]
Pair = Callable[[NDArray[np.float64], NDArray[np.float64]], float]


class Interval(BaseModel):
    """An estimate with its 95% percentile bootstrap interval over essays; None where undefined."""

    estimate: float | None
    low: float | None
    high: float | None

    def excludes(self, value: float) -> bool:
        """Whether the whole interval lies on one side of ``value`` (False when undefined)."""
        if self.low is None or self.high is None:
            return False
        return self.low > value or self.high < value


def finite(value: float) -> float | None:
    """``value``, or None where it is NaN or infinite (undefined)."""
    return value if math.isfinite(value) else None


def interval(metric: Pair, a: Sequence[float], b: Sequence[float], n_boot: int, seed: int) -> Interval:
    """``metric(a, b)`` over paired essays with its bootstrap interval (None throughout without pairs)."""
    if not a:
        return Interval(estimate=None, low=None, high=None)
    ci = bootstrap_ci(metric, a, b, n=n_boot, seed=seed)
    return Interval(estimate=finite(ci.estimate), low=finite(ci.low), high=finite(ci.high))


def mean_interval(values: Sequence[float], n_boot: int, seed: int) -> Interval:
    """The mean of ``values`` with its bootstrap interval."""
    return interval(lambda x, _y: float(np.mean(x)), values, values, n_boot, seed)


def paired(
    base: Scores, other: Scores, protocol: str, trait: str, essay_ids: Sequence[str]
) -> tuple[list[float], list[float]]:
    """(base scores, other scores) of the essays both scored with a usable score, in ``essay_ids`` order."""
    a: list[float] = []
    b: list[float] = []
    for essay_id in essay_ids:
        x, y = base.get((protocol, essay_id, trait)), other.get((protocol, essay_id, trait))
        if x is not None and y is not None and x.score is not None and y.score is not None:
            a.append(float(x.score))
            b.append(float(y.score))
    return a, b
