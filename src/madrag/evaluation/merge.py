"""Several runs' QWK tables merged into one, as seed 000 Figure 2 merges essay sets 7 and 8.

Figure 2 reports the ablation "on the merged ASAP Sets 7 and 8, averaging results for overlapping traits":
per protocol and trait (matched by the paper's short label, so set 7's "Ideas" and set 8's "Ideas and
Content" are one trait), the mean of the runs' QWKs; a trait found in one run only keeps that run's value.
Each protocol also gets its mean over the merged traits (column ``mean``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from madrag.csv_safe import write_frame
from madrag.evaluation.agreement import Evaluation
from madrag.evaluation.tables import markdown_table

MERGED_COLUMNS = ["protocol", "label", "qwk", "n_runs", "n"]
"""Columns of the long merged table: the mean QWK of ``n_runs`` runs over ``n`` scored essay-traits in all."""


def merge_qwk(evaluations: Sequence[Evaluation]) -> pd.DataFrame:
    """The long merged table: per protocol and trait label, the mean QWK over the runs that have it."""
    frames = [ev.qwk.assign(run=i) for i, ev in enumerate(evaluations) if not ev.qwk.empty]
    if not frames:
        return pd.DataFrame(columns=MERGED_COLUMNS)
    long = pd.concat(frames, ignore_index=True)
    long = long[long["qwk"].notna()]
    grouped = long.groupby(["protocol", "label"], sort=False)
    merged = grouped.agg(qwk=("qwk", "mean"), n_runs=("run", "nunique"), n=("n", "sum")).reset_index()
    return merged[MERGED_COLUMNS]


def merged_wide(merged: pd.DataFrame) -> pd.DataFrame:
    """Figure 2's layout: rows = protocols (first-seen order), columns = trait labels, then each protocol's
    ``mean`` over its merged traits."""
    table = merged.pivot(index="protocol", columns="label", values="qwk")
    table = table.reindex(index=list(dict.fromkeys(merged["protocol"])), columns=list(dict.fromkeys(merged["label"])))
    table["mean"] = table.mean(axis=1)
    return table


def save_merged(merged: pd.DataFrame, runs: Sequence[Path], out_dir: Path) -> list[Path]:
    """Write ``merged_qwk.csv`` (long), ``merged_qwk_table.csv`` (wide) and ``merged.md`` under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    long_path, wide_path, md_path = out_dir / "merged_qwk.csv", out_dir / "merged_qwk_table.csv", out_dir / "merged.md"
    write_frame(merged, long_path, index=False)
    table = merged_wide(merged)
    write_frame(table, wide_path)
    lines = [
        "# Merged QWK (seed 000 Figure 2: overlapping traits averaged over the runs)",
        "",
        "Runs: " + ", ".join(str(r) for r in runs),
        "",
        markdown_table(table) if not table.empty else "(no QWK in these runs)",
        "",
    ]
    md_path.write_text("\n".join(lines), encoding="utf-8")
    return [long_path, wide_path, md_path]
