"""The Bradley-Terry model of pairwise comparisons and the two steps that turn its strengths into scores.

Bradley-Terry (the CJ paper's model): item ``a`` beats item ``b`` with probability
``P(a beats b) = e^(la - lb) / (1 + e^(la - lb))``. :func:`fit_strengths` finds the strengths ``l`` that maximise
the likelihood of the observed comparisons, with a small Gaussian prior (``alpha * sum(l**2)`` added to the
negative log-likelihood, the penalty of the ``choix`` package's ``opt_pairwise``): it makes the strengths
unique (the likelihood alone fixes only their differences) and finite when an item wins (or loses) every
comparison. The fit is a convex minimisation solved by scipy (L-BFGS-B with the exact gradient).

:func:`score_at` is the second step: the anchors' known scores regressed on their fitted strengths (ordinary
least squares), read at an essay's strength.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

ALPHA = 0.01
"""The prior's weight: small enough that it barely moves strengths backed by comparisons."""


def _objective(params: NDArray[np.float64], wins: NDArray[np.intp], losses: NDArray[np.intp], alpha: float) -> float:
    margin = params[wins] - params[losses]
    return float(alpha * np.sum(params**2) + np.sum(np.logaddexp(0.0, -margin)))


def _gradient(
    params: NDArray[np.float64], wins: NDArray[np.intp], losses: NDArray[np.intp], alpha: float
) -> NDArray[np.float64]:
    margin = params[wins] - params[losses]
    z = 1.0 / (1.0 + np.exp(margin))  # P(the loser had won): the gradient's weight of each comparison
    grad = 2.0 * alpha * params
    np.add.at(grad, wins, -z)
    np.add.at(grad, losses, z)
    return grad


def fit_strengths(n_items: int, comparisons: Sequence[tuple[int, int]], alpha: float = ALPHA) -> NDArray[np.float64]:
    """The strengths of items ``0..n_items-1`` from ``comparisons`` (``(winner, loser)`` pairs): the penalised
    maximum-likelihood estimate of the Bradley-Terry model (see the module docstring)."""
    if alpha <= 0:
        raise ValueError("alpha must be > 0 (without the prior the strengths are not unique)")
    if n_items < 1:
        return np.zeros(0)
    pairs = np.asarray(comparisons, dtype=np.intp).reshape(-1, 2)
    wins, losses = pairs[:, 0], pairs[:, 1]
    from scipy.optimize import minimize  # here, not at the top: scipy.optimize takes ~0.5 s to import

    found = minimize(
        _objective,
        np.zeros(n_items),
        args=(wins, losses, alpha),
        jac=_gradient,
        method="L-BFGS-B",
        options={"gtol": 1e-10, "ftol": 1e-14, "maxiter": 10_000},
    )
    return np.asarray(found.x, dtype=np.float64)


def score_at(strength: float, anchor_strengths: Sequence[float], anchor_scores: Sequence[float]) -> float | None:
    """The score at ``strength`` on the line that fits the anchors' known scores to their strengths (least
    squares); None when the anchors' strengths do not vary (fewer than two distinct values: no line)."""
    x = np.asarray(anchor_strengths, dtype=np.float64)
    y = np.asarray(anchor_scores, dtype=np.float64)
    if len(x) < 2 or float(np.ptp(x)) < 1e-4:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept + slope * strength)
