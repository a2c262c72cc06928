"""The confidence paper's Figure 3 and Section 4.4: the meta-evaluator's score distribution per dimension, and the
pass rates
per role.

The seed reports, over its judged responses, the share of each dimension at its maximum (3): "76.5% for
instruction following, 79.3% for justification quality, and 93.1% for evidence grounding", and per role "pass
rates" (instruction following: Skeptic 84.2% vs Advocate 93.6%) without defining a pass. A pass cannot be the
maximum (the pooled 76.5% at 3 lies below both roles' pass rates), so madrag reads a pass as a score of at least
:data:`PASS_MIN` (2: not the lowest level) - madrag's choice, stated in every output.

Only usable judgments count; an unusable one is neither a pass nor a fail.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from madrag.evaluation.tables import new_figure, save_png
from madrag.files.csv_safe import write_frame
from madrag.paper.confidence.judgment import RANGES, SCORE_FIELDS

PASS_MIN = 2
"""A dimension passes at this score or above (madrag's reading of Section 4.4's pass rates)."""
ALL_ROLES = "all"
DISTRIBUTION_COLUMNS = ("set", "role", "dimension", "score", "count", "share")
PASS_COLUMNS = ("set", "role", "dimension", "judged", "passed", "pass_rate", "at_max", "at_max_rate")


def _usable(judgments: pd.DataFrame) -> pd.DataFrame:
    """The usable judgments, with a ``set`` column (``all`` when the frame has none)."""
    judged = judgments[judgments["ok"].fillna(False).astype(bool)]
    return judged if "set" in judged.columns else judged.assign(set=ALL_ROLES)


def _groups(judged: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """(set, role, rows): each set and role, each set over its roles, and every set pooled (set ``all``)."""
    sets = [(str(s), g) for s, g in judged.groupby("set", sort=False)]
    if [name for name, _ in sets] != [ALL_ROLES]:
        sets.append((ALL_ROLES, judged))
    out = []
    for name, frame in sets:
        out += [(name, str(role), g) for role, g in frame.groupby("evaluated_role", sort=True)]
        out.append((name, ALL_ROLES, frame))
    return out


def score_distribution(judgments: pd.DataFrame) -> pd.DataFrame:
    """Figure 3's numbers: per set, role (and ``all``) and dimension, the count and share of each score 1-3."""
    rows = []
    for set_name, role, group in _groups(_usable(judgments)):
        for dim in SCORE_FIELDS:
            low, high = RANGES[dim]
            values = group[dim].dropna()
            for score in range(low, high + 1):
                count = int((values == score).sum())
                share = count / len(values) if len(values) else float("nan")
                rows.append((set_name, role, dim, score, count, share))
    return pd.DataFrame(rows, columns=list(DISTRIBUTION_COLUMNS))


def pass_rates(judgments: pd.DataFrame, pass_min: int = PASS_MIN) -> pd.DataFrame:
    """Per set, role (and ``all``) and dimension: judged, passed (score >= ``pass_min``), the pass rate, and the
    count and share at the dimension's maximum."""
    rows = []
    for set_name, role, group in _groups(_usable(judgments)):
        for dim in SCORE_FIELDS:
            values = group[dim].dropna()
            n, top = len(values), RANGES[dim][1]
            passed, at_max = int((values >= pass_min).sum()), int((values == top).sum())
            share = (passed / n, at_max / n) if n else (float("nan"), float("nan"))
            rows.append((set_name, role, dim, n, passed, share[0], at_max, share[1]))
    return pd.DataFrame(rows, columns=list(PASS_COLUMNS))


def plot_figure3(distribution: pd.DataFrame, path: Path, title: str | None = None) -> Path:
    """Draw Figure 3: one pie per dimension of the pooled (``all`` set, ``all`` roles) score shares, as a PNG."""
    pooled = distribution[(distribution["set"] == ALL_ROLES) & (distribution["role"] == ALL_ROLES)]
    if pooled.empty or not pooled["count"].sum():
        raise ValueError("no usable judgment to plot")
    fig = new_figure(figsize=(4.0 * len(SCORE_FIELDS), 4.0), layout="constrained")
    axes = fig.subplots(1, len(SCORE_FIELDS))
    colours = {1: "#d62728", 2: "#ff7f0e", 3: "#2ca02c"}
    for ax, dim in zip(axes, SCORE_FIELDS, strict=True):
        part = pooled[(pooled["dimension"] == dim) & (pooled["count"] > 0)]
        ax.pie(
            part["count"],
            labels=[f"score {s}" for s in part["score"]],
            colors=[colours.get(int(s), "#999999") for s in part["score"]],
            autopct="%1.1f%%",
            startangle=90,
        )
        ax.set_title(f"{dim.replace('_', ' ')} (n={int(part['count'].sum())})")
    fig.suptitle(title or "Meta-evaluator scores per dimension (the confidence paper, Figure 3)")
    return save_png(fig, path)


def save_figure3(judgments: pd.DataFrame, out_dir: Path, title: str | None = None) -> list[Path]:
    """Write ``figure3.png``, ``figure3_distribution.csv`` and ``pass_rates.csv`` (none when nothing is usable)."""
    distribution = score_distribution(judgments)
    if distribution.empty or not distribution["count"].sum():
        return []
    paths = [out_dir / "figure3_distribution.csv", out_dir / "pass_rates.csv"]
    write_frame(distribution, paths[0], index=False)
    write_frame(pass_rates(judgments), paths[1], index=False)
    paths.append(plot_figure3(distribution, out_dir / "figure3.png", title))
    return paths
