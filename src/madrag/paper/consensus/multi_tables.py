"""Several runs of the consensus paper for people: the averaged Tables 1, 2, 8, 9, Table 3's cross-model grid, Figure 2
over the models, and the files ``madrag paper eval-consensus RUN_A RUN_B ...`` writes (:func:`save_multi`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from madrag.evaluation.tables import fmt, markdown_document, records, write_csvs
from madrag.files.atomic import write_text_atomic
from madrag.paper.consensus.multi import MultiConsensus
from madrag.paper.consensus.tables import (
    dominance_table,
    plot_rmse_by_round,
    shift_table,
    trajectory_table,
    value_cells,
)


def grid_wide(grid: pd.DataFrame) -> pd.DataFrame:
    """Table 3's layout: rows = strict model, columns = lenient model, 3-digit cells (— where no run)."""
    table = grid.pivot(index="strict_model", columns="lenient_model", values="value")
    models = list(dict.fromkeys([*grid["strict_model"], *grid["lenient_model"]]))
    table = table.reindex(index=[m for m in models if m in table.index], columns=[m for m in models if m in table])
    return table.map(lambda v: fmt(float(v), 3))


def _runs_display(runs: pd.DataFrame) -> pd.DataFrame:
    roles = [c for c in runs.columns if c.startswith("model_")]
    shown = runs[roles].rename(columns=lambda c: c.removeprefix("model_")).astype(object)
    shown["averaged"] = ["yes" if a else "no (grid only)" for a in runs["averaged"]]
    return shown.set_index(pd.Index(runs["run"].tolist()))


def multi_display_tables(multi: MultiConsensus) -> dict[str, pd.DataFrame]:
    """The tables as strings, titled after the paper's."""
    n = len(multi.meta.get("averaged_runs", []))
    over = f"mean over {n} judge model run(s)"
    align = multi.alignment
    tables = {"Runs and the model of each judge role": _runs_display(multi.runs)}
    if not align.empty:
        tables[f"RMSE vs human reference (Table 1), {over}"] = value_cells(align, "rmse")
        tables[f"Spearman vs human reference (Table 1), {over}"] = value_cells(align, "spearman")
        tables[f"Mean predicted score (Table 2), {over}"] = value_cells(align, "mean_pred")
        tables[f"Score shifts, all traits (Tables 2 and 8), {over}"] = shift_table(
            align, {"n_runs": "runs"}, "baseline"
        )
    if not multi.dominance.empty:
        tables[f"Dominance analysis (Table 9), {over}"] = dominance_table(multi.dominance, {"n_runs": "runs"})
    if not multi.trajectories.empty:
        tables[f"Round-wise trajectories, all traits (Figures 2-4), {over}"] = trajectory_table(
            multi.trajectories, "n_runs"
        )
    metric, protocol = multi.meta.get("grid_metric"), multi.meta.get("grid_protocol")
    if not multi.single_baselines.empty:
        single = multi.single_baselines
        cells = {"SingleJudge": [fmt(float(v), 3) for v in single["value"]], "runs": single["n_runs"].tolist()}
        tables[f"Single-judge baselines (Table 3), {metric}"] = pd.DataFrame(cells, index=pd.Index(single["model"]))
    if not multi.grid.empty:
        tables[f"Cross-model grid (Table 3): {protocol} {metric}, strict model (rows) x lenient model (columns)"] = (
            grid_wide(multi.grid)
        )
    return {title: frame for title, frame in tables.items() if not frame.empty}


def render_multi_markdown(multi: MultiConsensus) -> str:
    """consensus_models.md: every table, then the definitions and notes."""
    meta = multi.meta
    models = ", ".join(dict.fromkeys(meta.get("models", []))) or "none"
    definitions = [
        f"Averaged runs: {', '.join(meta.get('averaged_runs', [])) or 'none'}; models averaged: {models}.",
        f"Average: {meta.get('average')}; a metric that is undefined (NaN) in any averaged run stays undefined.",
        f"Essays: the {meta.get('n_essays')} essays every run scored ({meta.get('n_essay_traits')} essay-traits "
        "with a human reference); the runs share one rubric and agree on the human references.",
        "Cross-model grid: the metric of each run whose strict and lenient roles used the given models (mean "
        "when several runs have the pair); a run whose roles used one model is on the diagonal.",
        "Per-run tables with bootstrap comparisons are in each run's own consensus folder.",
    ]
    heading = f"Consensus evaluation over {len(meta.get('runs', []))} runs"
    return markdown_document(heading, multi_display_tables(multi), definitions, multi.notes)


def save_multi(multi: MultiConsensus, out_dir: Path) -> list[Path]:
    """Write runs.csv, the per-run and averaged CSVs, cross_model_grid.csv, single_baselines.csv,
    consensus_models.md and (with MAD protocols) rmse_by_round.png; returns the paths written."""
    frames = {
        "runs.csv": multi.runs,
        "per_run_alignment.csv": multi.per_run_alignment,
        "per_run_trajectories.csv": multi.per_run_trajectories,
        "averaged_alignment.csv": multi.alignment,
        "averaged_trajectories.csv": multi.trajectories,
        "averaged_dominance.csv": multi.dominance,
        "cross_model_grid.csv": multi.grid,
        "single_baselines.csv": multi.single_baselines,
    }
    written = write_csvs(frames, out_dir)
    write_text_atomic(out_dir / "consensus_models.md", render_multi_markdown(multi))
    written.append(out_dir / "consensus_models.md")
    traj = multi.per_run_trajectories
    if not traj.empty:
        labels = {r["run"]: f"{r['model'] or 'mixed'} ({r['run']})" for r in records(multi.runs)}
        traj = traj.assign(label=traj["run"].map(labels))
        average = multi.trajectories if not multi.trajectories.empty else None
        written.append(plot_rmse_by_round(traj, out_dir / "rmse_by_round.png", average))
    return written
