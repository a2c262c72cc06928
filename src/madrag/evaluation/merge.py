"""Several runs' QWK tables merged into one, as the MADRAG paper's Figure 2 merges essay sets 7 and 8.

Figure 2 reports the ablation "on the merged ASAP Sets 7 and 8, averaging results for overlapping traits":
per protocol and trait (matched by the paper's short label, so set 7's "Ideas" and set 8's "Ideas and
Content" are one trait), the mean of the runs' QWKs; a trait found in one run only keeps that run's value.
Each protocol also gets its mean over the merged traits (column ``mean``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from madrag.evaluation.agreement import Evaluation
from madrag.evaluation.tables import markdown_table, new_figure, save_png, write_csvs
from madrag.files.atomic import write_text_atomic

MERGED_COLUMNS = ["protocol", "label", "qwk", "n_runs", "n"]
"""Columns of the long merged table: the mean QWK of ``n_runs`` runs over ``n`` scored essay-traits in all."""


def merge_qwk(evaluations: Sequence[Evaluation]) -> pd.DataFrame:
    """The long merged table: per protocol and trait label, the mean QWK over the runs where it is defined
    (``n_runs`` of them, over ``n`` essays). A cell undefined in every run (one essay, a constant column) stays,
    undefined (NaN, ``n_runs`` 0), as each run's table shows it: never a number, never dropped."""
    frames = [ev.qwk.assign(run=i) for i, ev in enumerate(evaluations) if not ev.qwk.empty]
    if not frames:
        return pd.DataFrame(columns=MERGED_COLUMNS)
    long = pd.concat(frames, ignore_index=True)
    defined = long["qwk"].notna()
    long = long.assign(defined_run=long["run"].where(defined), defined_n=long["n"].where(defined, 0))
    grouped = long.groupby(["protocol", "label"], sort=False)
    merged = grouped.agg(qwk=("qwk", "mean"), n_runs=("defined_run", "nunique"), n=("defined_n", "sum"))
    return merged.reset_index()[MERGED_COLUMNS]


def merged_wide(merged: pd.DataFrame) -> pd.DataFrame:
    """Figure 2's layout: rows = protocols (first-seen order), columns = trait labels, then each protocol's
    ``mean`` over its merged traits where defined (undefined when none is)."""
    table = merged.pivot(index="protocol", columns="label", values="qwk")
    table = table.reindex(index=list(dict.fromkeys(merged["protocol"])), columns=list(dict.fromkeys(merged["label"])))
    table["mean"] = table.mean(axis=1)
    return table


def plot_merged(merged: pd.DataFrame, path: Path) -> Path:
    """Figure 2 as the paper draws it: grouped bars of the merged QWK, one group per trait label, one bar per
    protocol (first-seen order). A cell without QWK has no bar. Agg canvas, no pyplot."""
    table = merged_wide(merged).drop(columns="mean")
    protocols, labels = list(table.index), list(table.columns)
    fig = new_figure(figsize=(max(6.0, 1.3 * len(labels) + 2), 3.8), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(len(protocols), 1)
    for i, protocol in enumerate(protocols):
        values = table.loc[protocol].astype(float).tolist()
        shift = (i - (len(protocols) - 1) / 2) * width
        kept = [(j + shift, v) for j, v in enumerate(values) if pd.notna(v)]
        ax.bar([x for x, _ in kept], [v for _, v in kept], width, label=str(protocol))
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel("QWK (mean over the runs)")
    ax.set_title("Merged ablation (QWK): overlapping traits averaged")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small", ncols=min(len(protocols), 6))
    return save_png(fig, path)


def save_merged(merged: pd.DataFrame, runs: Sequence[Path], out_dir: Path) -> list[Path]:
    """Write ``merged_qwk.csv`` (long), ``merged_qwk_table.csv`` (wide), ``merged.md`` and, when a QWK is defined,
    ``figure2.png`` (the bars of Figure 2) under ``out_dir``; the paths written."""
    table = merged_wide(merged)
    wide = "merged_qwk_table.csv"
    written = write_csvs({"merged_qwk.csv": merged, wide: table}, out_dir, with_index=[wide])
    lines = [
        "# Merged QWK (the MADRAG paper's Figure 2: overlapping traits averaged over the runs)",
        "",
        "Runs: " + ", ".join(str(r) for r in runs),
        "",
        markdown_table(table) if not table.empty else "(no QWK in these runs)",
        "",
        "— : undefined (one essay, or a rater who gave one score only), never 0.",
        "",
    ]
    write_text_atomic(out_dir / "merged.md", "\n".join(lines))
    written.append(out_dir / "merged.md")
    if merged["qwk"].notna().any():
        written.append(plot_merged(merged, out_dir / "figure2.png"))
    return written
