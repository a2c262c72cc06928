"""The confidence paper's Table 1 over several essay sets: the confidence study of one run per set (each with its own
meta-evaluation), its top features per role and target side by side, Figure 3 over all of them, and Table 2
(the sets themselves: :mod:`madrag.paper.confidence.subsets`).

Table 1 reports its top-3 features per role-target pair *for each* of Essay Sets 7 and 8 ("In Essay Set 7, the
strongest predictors are ... In contrast, Essay Set 8 shows ..."), never pooled: each set is ranked on its own
run, and ``table1.csv`` stacks them under a ``set`` column. Figure 3 is one figure over the judged responses of
both sets; ``figure3_distribution.csv`` and ``pass_rates.csv`` give each set too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from madrag.errors import InputError
from madrag.evaluation.run import distinct_runs
from madrag.evaluation.tables import markdown_table
from madrag.files.atomic import write_text_atomic
from madrag.files.csv_safe import write_frame
from madrag.paper.confidence.analysis import PAPER_RANK_BY, RankBy
from madrag.paper.confidence.figure3 import PASS_MIN, save_figure3
from madrag.paper.confidence.study import ConfidenceStudy, run_study, save_study, top_display
from madrag.paper.confidence.subsets import subsets_markdown, subsets_table


@dataclass
class SetsStudy:
    """One study per set (by label, in the order given), Table 1 over them and their judgments pooled."""

    studies: dict[str, ConfidenceStudy]
    table1: pd.DataFrame
    judgments: pd.DataFrame
    table2: pd.DataFrame


def _labels(runs: list[Path], labels: list[str] | None) -> list[str]:
    names = labels or [run.name for run in runs]
    if len(names) != len(runs):
        raise InputError(f"{len(names)} labels for {len(runs)} runs: give one label per run")
    if len(set(names)) != len(names):
        raise InputError(f"set labels must differ, got {', '.join(names)} (name them with --labels)")
    return names


def run_sets(
    runs: list[Path],
    meta_dirs: list[Path] | None = None,
    labels: list[str] | None = None,
    roles: list[str] | None = None,
    rank_by: RankBy = PAPER_RANK_BY,
    top_k: int = 3,
) -> SetsStudy:
    """The study of each run with its meta-evaluation (``meta_dirs`` in the runs' order, default
    ``<run>/meta``), Table 1 (each set's top ``top_k`` per role and target) and the pooled judgments."""
    if len(runs) < 2:
        raise InputError("give two or more runs (one per essay set) to compare their Table 1")
    distinct_runs(runs)  # one set's run given twice would be compared with itself
    names = _labels(runs, labels)
    metas = meta_dirs or [run / "meta" for run in runs]
    if len(metas) != len(runs):
        raise InputError(f"{len(metas)} meta-evaluation folders for {len(runs)} runs: give one per run")
    studies: dict[str, ConfidenceStudy] = {}
    for name, run, meta in zip(names, runs, metas, strict=True):
        if not (meta / "store.sqlite").is_file():
            raise InputError(f"{meta}: no meta-evaluation of {run} (run madrag paper confidence meta-eval first)")
        studies[name] = run_study(run, meta, roles, rank_by=rank_by, top_k=top_k)
    tables, judged = [], []
    for name, study in studies.items():
        assert study.top is not None and study.judgments is not None  # a meta-evaluation was given
        tables.append(top_display(study.top).assign(set=name))
        judged.append(study.judgments.assign(set=name))
    table1 = pd.concat(tables, ignore_index=True)
    table1 = table1[["set", *[c for c in table1.columns if c != "set"]]]
    judgments = pd.concat(judged, ignore_index=True)
    table2 = subsets_table(dict(zip(names, runs, strict=True)))
    return SetsStudy(studies=studies, table1=table1, judgments=judgments, table2=table2)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "set"


def _markdown(result: SetsStudy, figure: list[Path]) -> str:
    """Table 1 per set (a set without a ranked feature says so, no empty table), then the Figure 3 files that
    were written (``figure``), or why none was."""
    lines = [
        "# The confidence paper's Table 1 over " + ", ".join(result.studies),
        "",
        "Each set's top features per role and target, ranked on its own run (the seed reports them per set).",
        "",
    ]
    for name, study in result.studies.items():
        frame = result.table1[result.table1["set"] == name].drop(columns="set")
        lines += [f"## {name} ({study.meta['run_dir']}, evaluator {study.meta.get('evaluator')})", ""]
        if frame.empty:
            lines += [NO_TOP, ""]
            continue
        lines += [markdown_table(frame, index=False, digits=3), ""]
    lines += [figure_line(result, figure), "", "Each set's full study is in its own folder.", ""]
    return "\n".join(lines)


NO_TOP = "(no feature could be ranked: no judged response with both a usable judgment and confidence features)"
"""What Table 1 says of a set without any ranked feature, instead of an empty table."""


def figure_line(result: SetsStudy, figure: list[Path]) -> str:
    """Which Figure 3 files were written, or why none was (no usable judgment in any set)."""
    if not figure:
        usable = int(result.judgments["ok"].sum()) if "ok" in result.judgments else 0
        return (
            f"Figure 3 was not drawn: {usable} of the {len(result.judgments)} judgments over every set are usable "
            "(no figure3.png, figure3_distribution.csv or pass_rates.csv written)."
        )
    names = ", ".join(f"`{p.name}`" for p in figure)
    return f"Figure 3 over every set: {names} (a pass: a score of {PASS_MIN} or more, madrag's reading)."


def save_sets(result: SetsStudy, out_dir: Path) -> list[Path]:
    """Write ``table1.csv``, ``table1.md``, ``table2.csv``, ``table2.md``, Figure 3 over all sets (when a judgment
    is usable), and each set's study in ``<out>/<set>/``; the paths written, and only those."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figure = save_figure3(
        result.judgments, out_dir, "Meta-evaluator scores per dimension, " + ", ".join(result.studies)
    )
    written = [out_dir / "table1.csv", out_dir / "table1.md", out_dir / "table2.csv", out_dir / "table2.md"]
    write_frame(result.table1, written[0], index=False)
    write_text_atomic(written[1], _markdown(result, figure))
    write_frame(result.table2, written[2], index=False)
    write_text_atomic(written[3], subsets_markdown(result.table2))
    written += figure
    for name, study in result.studies.items():
        save_study(study, out_dir / _slug(name))
        written.append(out_dir / _slug(name))
    return written
