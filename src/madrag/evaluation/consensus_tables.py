"""A :class:`~madrag.consensus_eval.ConsensusEvaluation` for people: consensus.md, the CSVs and the round-wise
trajectory figure (seed 002, Tables 1, 2, 8, 9 and Figures 3-4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from madrag.evaluation.agreement import wide
from madrag.evaluation.consensus import ALL, ConsensusEvaluation
from madrag.evaluation.tables import fmt, markdown_table


def _cells(frame: pd.DataFrame, value: str, digits: int = 3) -> pd.DataFrame:
    """A long (protocol, trait, value) frame as the paper's layout: protocols x traits, formatted cells."""
    if frame.empty:
        return pd.DataFrame()
    long = frame.assign(cell=[fmt(v, digits) for v in frame[value].tolist()])
    return wide(long, "cell")


def _row_cells(frame: pd.DataFrame, columns: dict[str, str], index: list[str], digits: int = 3) -> pd.DataFrame:
    """Selected columns (renamed) with formatted numbers, one row per ``index`` entry."""
    shown = {title: [fmt(_number(v), digits) for v in frame[col].tolist()] for col, title in columns.items()}
    return pd.DataFrame(shown, index=pd.Index(index))


def _number(value: Any) -> Any:
    """numpy / pandas scalars as plain Python numbers, so :func:`fmt` formats them."""
    return value.item() if hasattr(value, "item") else value


def _diff_cell(row: dict[str, Any]) -> str:
    return f"{fmt(row['diff'], 3)} [{fmt(row['ci_low'], 3)}, {fmt(row['ci_high'], 3)}] p={fmt(row['p_value'], 3)}"


def display_tables(ev: ConsensusEvaluation) -> dict[str, pd.DataFrame]:
    """The tables as formatted strings, titled after the paper's tables."""
    align = ev.alignment
    pooled = align[align["trait"] == ALL]
    tables = {
        "RMSE vs human reference (Table 1)": _cells(align, "rmse"),
        "Spearman vs human reference (Table 1)": _cells(align, "spearman"),
        "usable predictions / unusable": _cells(
            align.assign(count=[f"{n} / {u}" for n, u in zip(align["n"], align["n_unusable"], strict=True)]), "count"
        ),
        "Mean predicted score (Table 2)": _cells(align, "mean_pred"),
    }
    names = {"n": "n", "mean_pred": "mean score", "mean_ref": "human mean"}
    names |= {"shift": f"shift vs {ev.meta.get('baseline') or 'baseline'}", "shift_ref": "shift vs human"}
    names |= {"rmse": "RMSE", "spearman": "Spearman"}
    tables["Score shifts, all traits (Tables 2 and 8)"] = _row_cells(pooled, names, pooled["protocol"].tolist())
    if not ev.dominance.empty:
        dom = ev.dominance
        columns = {"shift_consensus": "consensus shift", "shift_strict": "Strict-only shift"}
        columns |= {"shift_lenient": "Lenient-only shift", "midpoint": "midpoint", "beyond_midpoint": "beyond midpoint"}
        index = [f"{c} / {t}" for c, t in zip(dom["consensus"], dom["trait"], strict=True)]
        tables["Dominance analysis (Table 9): consensus shift vs the Strict/Lenient midpoint"] = _row_cells(
            dom, columns, index
        )
    traj = ev.trajectories
    if not traj.empty:
        traj_all = traj[traj["trait"] == ALL].dropna(axis=1, how="all")
        keep = {c: c for c in traj_all.columns if c.startswith("mean_") or c in ("n", "rmse", "spearman")}
        index = [f"{p} r{r}" for p, r in zip(traj_all["protocol"], traj_all["round"], strict=True)]
        tables["Round-wise trajectories, all traits (Figures 2-4)"] = _row_cells(traj_all, keep, index)
    if not ev.comparisons.empty:
        cmp = ev.comparisons
        base = cmp["baseline"].iloc[0]
        long = cmp.assign(cell=[_diff_cell({str(k): v for k, v in r.items()}) for r in cmp.to_dict(orient="records")])
        tables[f"RMSE difference vs {base} (paired bootstrap over essays): diff [95% CI] p"] = wide(long, "cell")
    return {title: frame for title, frame in tables.items() if not frame.empty}


def render_markdown(ev: ConsensusEvaluation) -> str:
    """consensus.md: every table under a heading, then the definitions and notes."""
    meta = ev.meta
    parts = [f"# Consensus evaluation: {meta.get('n_essays')} essays, {meta.get('n_essay_traits')} essay-traits", ""]
    for title, frame in display_tables(ev).items():
        parts += [f"## {title}", "", markdown_table(frame), ""]
    parts += [
        "## Definitions",
        "",
        f"- Prediction: {meta.get('prediction')}; unusable when an agent's score is unusable (counted, never "
        "imputed). Metrics use essay-traits with a human reference; `all` pools every trait.",
        f"- Human mean over the evaluated essay-traits: {fmt(meta.get('human_mean'), 3)}.",
        f"- Shift vs baseline: {meta.get('shift')}. Shift vs human: {meta.get('shift_ref')}.",
        "- Dominance: beyond midpoint = consensus shift - (Strict-only shift + Lenient-only shift) / 2 (shifts vs "
        "human); negative = the consensus lands below the midpoint (strict dominance).",
        "- Gap: |agent a - agent b| at a round (strict vs lenient, or the two neutral agents).",
        f"- Bootstrap: {meta.get('bootstrap')} resamples of essays (traits kept together), seed "
        f"{meta.get('seed')}, percentile CIs, two-sided p.",
        *(f"- Note: {n}" for n in ev.notes),
        "",
    ]
    return "\n".join(parts)


def plot_trajectories(trajectories: pd.DataFrame, path: Path, human_mean: float | None = None) -> Path:
    """Two panels over rounds, one line per MAD protocol (all traits pooled): the mean predicted score with the
    human mean dashed (Figure 3), and the mean gap between the two agents (Figure 4). Agg canvas, no pyplot."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    pooled = trajectories[trajectories["trait"] == ALL]
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    FigureCanvasAgg(fig)
    score_ax, gap_ax = fig.subplots(1, 2)
    for protocol, rows in pooled.groupby("protocol", sort=False):
        score_ax.plot(rows["round"], rows["mean_pred"], marker="o", label=str(protocol))
        gap_ax.plot(rows["round"], rows["mean_gap"], marker="o", label=str(protocol))
    if human_mean is not None and pd.notna(human_mean):
        score_ax.axhline(human_mean, color="black", linestyle="--", linewidth=1, label="human mean")
    score_ax.set_title("mean predicted score per round")
    score_ax.set_ylabel("mean score")
    gap_ax.set_title("mean gap between the two agents")
    gap_ax.set_ylabel("mean |a - b|")
    for ax in (score_ax, gap_ax):
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
        if len(pooled):
            ax.set_xticks(sorted(pooled["round"].unique().tolist()))
        ax.legend(fontsize="small")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=120)
    return path


def save_consensus(ev: ConsensusEvaluation, out_dir: Path) -> list[Path]:
    """Write alignment.csv, trajectories.csv, dominance.csv, comparisons.csv, consensus.md and, when there are
    MAD protocols, trajectories.png; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = {
        "alignment.csv": ev.alignment,
        "trajectories.csv": ev.trajectories,
        "dominance.csv": ev.dominance,
        "comparisons.csv": ev.comparisons,
    }
    written = []
    for name, frame in frames.items():
        frame.to_csv(out_dir / name, index=False)
        written.append(out_dir / name)
    (out_dir / "consensus.md").write_text(render_markdown(ev), encoding="utf-8")
    written.append(out_dir / "consensus.md")
    if not ev.trajectories.empty:
        written.append(plot_trajectories(ev.trajectories, out_dir / "trajectories.png", ev.meta.get("human_mean")))
    return written
