"""Normalised trajectories, percentile bands and the trajectory figure (the confidence paper, Section 4.3, Figure 2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from madrag.paper.confidence.trajectory import normalised_trajectory, plot_trajectories, trajectory_bands

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_normalised_trajectory_hand_example() -> None:
    # tokens at positions 0, 0.5, 1; grid 0, 0.25, 0.5, 0.75, 1
    np.testing.assert_allclose(normalised_trajectory([0.0, -1.0, -3.0], points=5), [0.0, -0.5, -1.0, -2.0, -3.0])
    # 4 tokens at 0, 1/3, 2/3, 1; grid point 0.5 lies halfway between tokens 2 and 3
    out = normalised_trajectory([-1.0, -2.0, -4.0, -4.0], points=3)
    np.testing.assert_allclose(out, [-1.0, -3.0, -4.0])


def test_normalised_trajectory_defaults_and_edges() -> None:
    lp = -np.random.default_rng(1).exponential(1.0, 37)
    out = normalised_trajectory(lp)
    assert out.shape == (101,) and out.dtype == np.float64
    assert out[0] == lp[0] and out[-1] == lp[-1]
    np.testing.assert_allclose(normalised_trajectory([-0.7], points=11), np.full(11, -0.7))
    with pytest.raises(ValueError, match="empty"):
        normalised_trajectory([])
    with pytest.raises(ValueError):
        normalised_trajectory([-1.0, -2.0], points=1)
    with pytest.raises(ValueError, match="non-finite"):
        normalised_trajectory([-1.0, float("nan")])


def test_trajectory_bands_match_numpy_percentiles() -> None:
    rng = np.random.default_rng(2)
    trajectories = [list(-rng.exponential(1.0, int(n))) for n in rng.integers(1, 80, 25)]
    bands = trajectory_bands(trajectories, points=21)
    assert list(bands.columns) == ["position_pct", "mean", "p10", "p25", "p50", "p75", "p90", "n"]
    assert len(bands) == 21
    np.testing.assert_allclose(bands["position_pct"], np.linspace(0, 100, 21))
    matrix = np.vstack([normalised_trajectory(t, 21) for t in trajectories])
    np.testing.assert_allclose(bands["mean"], matrix.mean(axis=0))
    for q in (10, 25, 50, 75, 90):
        np.testing.assert_allclose(bands[f"p{q}"], np.percentile(matrix, q, axis=0))
    assert (bands["n"] == 25).all()
    assert (bands["p10"] <= bands["p25"]).all() and (bands["p75"] <= bands["p90"]).all()
    with pytest.raises(ValueError):
        trajectory_bands([])


def test_plot_trajectories_writes_png(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    groups = {
        role: trajectory_bands([list(-rng.exponential(1.0, 30)) for _ in range(10)]) for role in ("advocate", "skeptic")
    }
    path = tmp_path / "figs" / "trajectories.png"
    assert plot_trajectories(groups, path, title="Essay set 7") == path
    assert path.is_file() and path.read_bytes()[:8] == PNG_MAGIC
    single = plot_trajectories({"advocate": groups["advocate"]}, tmp_path / "one.png")
    assert single.read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(ValueError):
        plot_trajectories({}, tmp_path / "none.png")
