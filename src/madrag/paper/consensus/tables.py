"""The consensus paper's evaluation of one run for people ("Beyond consensus: downward bias and role asymmetry in
multi-agent LLM judges"): display tables titled after the paper's Tables 1, 2, 8 and 9, consensus.md, the
round-wise figures (RMSE by round, Figure 2; mean score and gap, Figures 3-4) and :func:`save_consensus`, the
files ``madrag paper eval-consensus RUN`` writes; over the core's shared formatting
(:mod:`madrag.evaluation.tables`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from madrag.evaluation.tables import cells, diff_cell, fmt, markdown_document, new_figure, records, save_png, write_csvs
from madrag.files.atomic import write_text_atomic
from madrag.paper.consensus.metrics import ALL, ConsensusEvaluation


def value_cells(frame: pd.DataFrame, value: str) -> pd.DataFrame:
    """A long (protocol, trait, value) frame as the paper's layout: protocols x traits, 3-digit cells."""
    return cells(records(frame), lambda r: fmt(r[value], 3))


def row_cells(frame: pd.DataFrame, columns: dict[str, str], index: list[str]) -> pd.DataFrame:
    """Selected columns (renamed) with 3-digit numbers, one row per ``index`` entry."""
    shown = {title: [fmt(_number(v), 3) for v in frame[col].tolist()] for col, title in columns.items()}
    return pd.DataFrame(shown, index=pd.Index(index))


def _number(value: Any) -> Any:
    """numpy / pandas scalars as plain Python numbers, so :func:`fmt` formats them."""
    return value.item() if hasattr(value, "item") else value


def shift_table(alignment: pd.DataFrame, count: dict[str, str], baseline: str) -> pd.DataFrame:
    """Tables 2 and 8, all traits pooled: one row per protocol; ``count``: the column that counts (essays, or runs
    averaged) and its title."""
    pooled = alignment[alignment["trait"] == ALL]
    names = count | {"mean_pred": "mean score", "mean_ref": "human mean", "shift": f"shift vs {baseline}"}
    names |= {"shift_ref": "shift vs human", "rmse": "RMSE", "spearman": "Spearman"}
    return row_cells(pooled, names, pooled["protocol"].tolist())


def dominance_table(dom: pd.DataFrame, first: dict[str, str] | None = None) -> pd.DataFrame:
    """Table 9: one row per consensus protocol and trait; ``first``: columns shown before the shifts (the number
    of runs averaged, over several runs)."""
    columns = dict(first or {}) | {"shift_consensus": "consensus shift", "shift_strict": "Strict-only shift"}
    columns |= {"shift_lenient": "Lenient-only shift", "midpoint": "midpoint", "beyond_midpoint": "beyond midpoint"}
    index = [f"{c} / {t}" for c, t in zip(dom["consensus"], dom["trait"], strict=True)]
    return row_cells(dom, columns, index)


def trajectory_table(traj: pd.DataFrame, count: str = "n") -> pd.DataFrame:
    """Figures 2-4 as numbers, all traits pooled: one row per protocol and round; ``count``: the column that
    counts (essays, or runs averaged)."""
    pooled = traj[traj["trait"] == ALL].dropna(axis=1, how="all")
    keep = {c: c for c in pooled.columns if c.startswith("mean_") or c in (count, "rmse", "spearman")}
    index = [f"{p} r{r}" for p, r in zip(pooled["protocol"], pooled["round"], strict=True)]
    return row_cells(pooled, keep, index)


def consensus_display_tables(ev: ConsensusEvaluation) -> dict[str, pd.DataFrame]:
    """The consensus tables as formatted strings, titled after the paper's tables."""
    align = ev.alignment
    tables = {
        "RMSE vs human reference (Table 1)": value_cells(align, "rmse"),
        "Spearman vs human reference (Table 1)": value_cells(align, "spearman"),
        "usable predictions / unusable": cells(records(align), lambda r: f"{r['n']} / {r['n_unusable']}"),
        "Mean predicted score (Table 2)": value_cells(align, "mean_pred"),
        "Score shifts, all traits (Tables 2 and 8)": shift_table(
            align, {"n": "n"}, ev.meta.get("baseline") or "baseline"
        ),
    }
    if not ev.dominance.empty:
        title = "Dominance analysis (Table 9): consensus shift vs the Strict/Lenient midpoint"
        tables[title] = dominance_table(ev.dominance)
    if not ev.trajectories.empty:
        tables["Round-wise trajectories, all traits (Figures 2-4)"] = trajectory_table(ev.trajectories)
    if not ev.comparisons.empty:
        base = ev.comparisons["baseline"].iloc[0]
        title = f"RMSE difference vs {base} (paired bootstrap over essays): diff [95% CI] p"
        tables[title] = cells(records(ev.comparisons), diff_cell)
    return {title: frame for title, frame in tables.items() if not frame.empty}


_REFERENCE_TEXT = {"mean": "the raters' plain mean", "rounded": "the raters' mean rounded half up to a valid score"}


def render_consensus_markdown(ev: ConsensusEvaluation) -> str:
    """consensus.md: every table under a heading, then the definitions and notes."""
    meta = ev.meta
    definitions = [
        f"Prediction: {meta.get('prediction')}; unusable when an agent's score is unusable (counted, never "
        "imputed). Metrics use essay-traits with a human reference; `all` pools every trait.",
        f"Human reference: {_REFERENCE_TEXT.get(str(meta.get('reference', 'mean')), meta.get('reference'))}. "
        f"Human mean over the evaluated essay-traits: {fmt(meta.get('human_mean'), 3)}.",
        f"Shift vs baseline: {meta.get('shift')}. Shift vs human: {meta.get('shift_ref')}.",
        "Dominance: beyond midpoint = consensus shift - (Strict-only shift + Lenient-only shift) / 2 (shifts vs "
        "human); negative = the consensus lands below the midpoint (strict dominance).",
        "Gap: |agent a - agent b| at a round (strict vs lenient, or the two neutral agents).",
        f"Bootstrap: {meta.get('bootstrap')} resamples of essays (traits kept together), seed "
        f"{meta.get('seed')}, percentile CIs, two-sided p.",
    ]
    heading = f"Consensus evaluation: {meta.get('n_essays')} essays, {meta.get('n_essay_traits')} essay-traits"
    return markdown_document(heading, consensus_display_tables(ev), definitions, ev.notes)


def plot_trajectories(trajectories: pd.DataFrame, path: Path, human_mean: float | None = None) -> Path:
    """Two panels over rounds, one line per MAD protocol (all traits pooled): the mean predicted score with the
    human mean dashed (Figure 3), and the mean gap between the two agents (Figure 4). Agg canvas, no pyplot."""
    pooled = trajectories[trajectories["trait"] == ALL]
    fig = new_figure(figsize=(10, 3.8), layout="constrained")
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
    return save_png(fig, path)


def plot_rmse_by_round(trajectories: pd.DataFrame, path: Path, average: pd.DataFrame | None = None) -> Path:
    """Figure 2: RMSE vs the human reference by round (all traits pooled), one panel per MAD protocol. One line
    per protocol, or with a ``run`` column one line per run (its ``label``, else its name) and ``average``
    (the mean over the runs) bold. Agg canvas, no pyplot."""
    pooled = trajectories[trajectories["trait"] == ALL]
    protocols = list(dict.fromkeys(pooled["protocol"]))
    fig = new_figure(figsize=(4.2 * max(len(protocols), 1), 3.6), layout="constrained")
    axes = fig.subplots(1, max(len(protocols), 1), squeeze=False)[0]
    for ax, protocol in zip(axes, protocols, strict=False):
        rows = pooled[pooled["protocol"] == protocol]
        key = next((c for c in ("label", "run") if c in rows.columns), None)
        for name, line in rows.groupby(key, sort=False) if key else [(protocol, rows)]:
            ax.plot(line["round"], line["rmse"], marker="o", linewidth=1, label=str(name))
        if average is not None:
            mean = average[(average["protocol"] == protocol) & (average["trait"] == ALL)]
            ax.plot(mean["round"], mean["rmse"], color="black", linewidth=2.5, label="mean over the averaged models")
        ax.set_title(f"{protocol}: RMSE by round")
        ax.set_xlabel("round")
        ax.set_ylabel("RMSE vs human")
        ax.set_xticks(sorted(rows["round"].unique().tolist()))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return save_png(fig, path)


def save_consensus(ev: ConsensusEvaluation, out_dir: Path) -> list[Path]:
    """Write alignment.csv, trajectories.csv, dominance.csv, comparisons.csv, consensus.md and, when there are
    MAD protocols, trajectories.png (Figures 3-4) and rmse_by_round.png (Figure 2); returns the paths written."""
    frames = {
        "alignment.csv": ev.alignment,
        "trajectories.csv": ev.trajectories,
        "dominance.csv": ev.dominance,
        "comparisons.csv": ev.comparisons,
    }
    written = write_csvs(frames, out_dir)
    write_text_atomic(out_dir / "consensus.md", render_consensus_markdown(ev))
    written.append(out_dir / "consensus.md")
    if not ev.trajectories.empty:
        written.append(plot_trajectories(ev.trajectories, out_dir / "trajectories.png", ev.meta.get("human_mean")))
        written.append(plot_rmse_by_round(ev.trajectories, out_dir / "rmse_by_round.png"))
    return written
