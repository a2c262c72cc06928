"""Length-normalised log-probability trajectories and their percentile bands (the confidence paper, Section 4.3,
Figure 2).

Responses differ in length, so each trajectory is resampled onto a 0-100% position scale by linear
interpolation; per role, the mean trajectory and the 25-75 and 10-90 percentile bands across responses
show where in the response confidence varies most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from madrag.evaluation.tables import new_figure, save_png
from madrag.paper.confidence.features import as_logprobs

PERCENTILES: tuple[int, ...] = (10, 25, 50, 75, 90)
BAND_COLUMNS: tuple[str, ...] = ("position_pct", "mean", *(f"p{q}" for q in PERCENTILES), "n")


def normalised_trajectory(logprobs: Sequence[float] | NDArray[np.float64], points: int = 101) -> NDArray[np.float64]:
    """A trajectory resampled onto ``points`` evenly spaced relative positions 0..1 (Section 4.3).

    Token ``t`` of ``T`` sits at position ``(t - 1) / (T - 1)``; values in between are linearly interpolated
    (``np.interp``). A one-token response is constant; an empty one raises ValueError.
    """
    if points < 2:
        raise ValueError(f"points must be at least 2, not {points}")
    values = as_logprobs(logprobs)
    if values.size == 0:
        raise ValueError("cannot normalise an empty trajectory")
    if values.size == 1:
        return np.full(points, values[0], dtype=np.float64)
    grid = np.linspace(0.0, 1.0, points)
    return np.interp(grid, np.linspace(0.0, 1.0, values.size), values).astype(np.float64)


def trajectory_bands(trajectories: Sequence[Sequence[float]], points: int = 101) -> pd.DataFrame:
    """Mean and 10/25/50/75/90th percentiles across normalised trajectories, per position (Section 4.3).

    Columns: ``position_pct`` (0..100), ``mean``, ``p10``, ``p25``, ``p50``, ``p75``, ``p90`` and ``n`` (how
    many trajectories). Percentiles use numpy's default linear interpolation. No trajectories: ValueError.
    """
    if len(trajectories) == 0:
        raise ValueError("no trajectories to summarise")
    matrix = np.vstack([normalised_trajectory(t, points) for t in trajectories])
    quantiles = np.percentile(matrix, PERCENTILES, axis=0)
    return pd.DataFrame(  # the columns of BAND_COLUMNS, in order
        {
            "position_pct": np.linspace(0.0, 100.0, points),
            "mean": matrix.mean(axis=0),
            **{f"p{q}": quantiles[i] for i, q in enumerate(PERCENTILES)},
            "n": np.full(points, matrix.shape[0], dtype=np.int64),
        }
    )


def plot_trajectories(groups: Mapping[str, pd.DataFrame], path: Path, title: str | None = None) -> Path:
    """Draw Figure 2: one panel per group (e.g. role) of :func:`trajectory_bands`, written as a PNG.

    Each panel shows the mean trajectory with shaded 25-75 and 10-90 percentile bands; panels share the
    y axis. Uses a bare :class:`matplotlib.figure.Figure` (Agg canvas, no pyplot state). Returns ``path``.
    """
    if not groups:
        raise ValueError("no groups to plot")
    fig = new_figure(figsize=(4.5 * len(groups), 3.6), layout="constrained")
    axes = fig.subplots(1, len(groups), sharey=True, squeeze=False)[0]
    for ax, (name, bands) in zip(axes, groups.items(), strict=True):
        x = bands["position_pct"].to_numpy()
        ax.fill_between(x, bands["p10"], bands["p90"], alpha=0.18, color="C0", linewidth=0, label="10-90%")
        ax.fill_between(x, bands["p25"], bands["p75"], alpha=0.35, color="C0", linewidth=0, label="25-75%")
        ax.plot(x, bands["mean"], color="C0", linewidth=1.6, label="mean")
        n = int(bands["n"].iloc[0]) if "n" in bands and len(bands) else 0
        ax.set_title(f"{name} (n={n})")
        ax.set_xlabel("position in response (%)")
        ax.set_xlim(0, 100)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("token log-probability")
    axes[0].legend(loc="lower right", fontsize="small")
    if title:
        fig.suptitle(title)
    return save_png(fig, path, dpi=150)
