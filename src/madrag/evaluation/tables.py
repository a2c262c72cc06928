"""The evaluations for people: display tables, markdown, plain text and the files the eval commands write.

* Shared formatting: :func:`fmt` (one number in a cell), :func:`markdown_table`, :func:`markdown_document`.
* The MADRAG paper (:class:`~madrag.evaluation.agreement.Evaluation`): display tables, a terminal / plain-text
rendering,
  evaluation.md and :func:`save` (CSVs, evaluation.json, evaluation.md).
* The consensus paper (:class:`~madrag.evaluation.consensus.ConsensusEvaluation`): display tables titled after the
  paper's Tables 1, 2, 8, 9, consensus.md, the round-wise figures (RMSE by round, Figure 2; mean score and gap,
  Figures 3-4) and :func:`save_consensus`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from madrag.atomic_files import open_atomic, write_text_atomic
from madrag.csv_safe import write_frame
from madrag.evaluation.agreement import HH_EVAL, HH_FULL, Evaluation, wide
from madrag.evaluation.consensus import ALL, ConsensusEvaluation
from madrag.evaluation.evidence import EVIDENCE_DEFINITION, EVIDENCE_TITLE, evidence_display
from madrag.extras import require

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# -- shared formatting ----------------------------------------------------------------------------------


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as JSON-ready dicts (NaN -> None)."""
    clean = frame.astype(object).where(pd.notna(frame), None)
    return [{str(k): v for k, v in row.items()} for row in clean.to_dict(orient="records")]


def fmt(value: Any, digits: int = 2) -> str:
    """A number for a table cell; NaN / None as an em dash; a value that rounds to zero as zero, not -0.00."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{round(value, digits) + 0.0:.{digits}f}" if isinstance(value, float) else str(value)


def markdown_table(frame: pd.DataFrame) -> str:
    """A DataFrame as a GitHub markdown table, index as the first column."""
    head = ["", *(str(c) for c in frame.columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for index, row in frame.iterrows():
        cells = [str(index), *(fmt(v) for v in row.tolist())]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def markdown_document(
    heading: str, tables: dict[str, pd.DataFrame], definitions: Iterable[str], notes: Iterable[str]
) -> str:
    """A markdown page: ``# heading``, every table under its ``## title``, then ``## Definitions``: the
    definitions and the notes as one list."""
    parts = [f"# {heading}", ""]
    for title, frame in tables.items():
        parts += [f"## {title}", "", markdown_table(frame), ""]
    parts += ["## Definitions", "", *(f"- {d}" for d in definitions), *(f"- Note: {n}" for n in notes), ""]
    return "\n".join(parts)


def _cells(rows: list[dict[str, Any]], text: Callable[[dict[str, Any]], str]) -> pd.DataFrame:
    """Long rows (protocol, trait, ...) as a wide table of display strings."""
    long = pd.DataFrame([{"protocol": r["protocol"], "trait": r["trait"], "cell": text(r)} for r in rows])
    return wide(long, "cell") if rows else pd.DataFrame()


def _diff_cell(r: dict[str, Any]) -> str:
    """A paired comparison: ``diff [ci_low, ci_high] p=p_value``."""
    return f"{fmt(r['diff'], 3)} [{fmt(r['ci_low'], 3)}, {fmt(r['ci_high'], 3)}] p={fmt(r['p_value'], 3)}"


def _write_csvs(frames: dict[str, pd.DataFrame], out_dir: Path, with_index: Iterable[str] = ()) -> list[Path]:
    """Each frame as ``out_dir/name``; the index written only for the names in ``with_index``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        write_frame(frame, out_dir / name, index=name in set(with_index))
    return [out_dir / name for name in frames]


# -- the MADRAG paper: agreement tables -------------------------------------------------------------------------


UNDEFINED = "undefined"
"""A cell whose metric cannot be computed from the essays it has (one essay, a rater who gave one score only)."""


def _qwk_cell(r: dict[str, Any]) -> str:
    """``QWK [low, high]``; ``undefined`` for a QWK of essays that cannot give one (``—``: no essay at all)."""
    if pd.isna(r["qwk"]) and r.get("n"):
        return UNDEFINED
    return f"{fmt(r['qwk'], 3)} [{fmt(r['ci_low'], 3)}, {fmt(r['ci_high'], 3)}]"


def _count_cell(r: dict[str, Any]) -> str:
    """Essays in the QWK / valid-score rate, ``+k no ref`` for scored essays without a human reference, and the
    unusable and truncated counts when there are any."""
    rate = r["valid_rate"]
    cell = f"{r['n']}" if rate is None else f"{r['n']} / {100 * rate:.0f}%"
    cell += f" +{r['n_no_reference']} no ref" if r.get("n_no_reference") else ""
    counts = [f"{r[k]} {label}" for k, label in (("n_unusable", "unusable"), ("n_truncated", "truncated")) if r.get(k)]
    return f"{cell} ({', '.join(counts)})" if counts else cell


def _extreme_cell(r: dict[str, Any]) -> str:
    agree = None if r["agree_at_1"] is None else 100 * r["agree_at_1"]
    return f"{fmt(agree, 1)} / {fmt(r['mae'])} ({r['n']})"


def _extreme_display(rows: list[dict[str, Any]]) -> pd.DataFrame:
    pooled = [r for r in rows if r["trait"] == "all"]
    return pd.DataFrame(
        {
            "N": [r["n"] for r in pooled],
            "scored": [r["n_scored"] for r in pooled],
            "unusable": [r["n_unusable"] for r in pooled],
            "Agree@1 %": [fmt(None if r["agree_at_1"] is None else 100 * r["agree_at_1"], 1) for r in pooled],
            "MAE": [fmt(r["mae"], 3) for r in pooled],
        },
        index=[r["protocol"] for r in pooled],
    )


def display_tables(evaluation: Evaluation) -> dict[str, pd.DataFrame]:
    """The tables as strings, titled: QWK with CI, n / valid rate, extreme subset, comparisons."""
    qwk_rows = records(evaluation.qwk)
    tables = {
        "QWK vs human reference [95% bootstrap CI]": _cells(qwk_rows, _qwk_cell),
        "essays per cell / valid-score rate (+ scored essays without a human reference; unusable, truncated)": _cells(
            qwk_rows, _count_cell
        ),
        "extreme-score subset (Table 2): a rater gave the trait's min or max": _extreme_display(
            records(evaluation.extreme)
        ),
    }
    per_trait = [r for r in records(evaluation.extreme) if r["trait"] != "all"]
    tables["extreme subset per trait: Agree@1 % / MAE (N)"] = _cells(per_trait, _extreme_cell)
    cmp_rows = records(evaluation.comparisons)
    if cmp_rows:
        title = f"QWK difference vs {cmp_rows[0]['baseline']} (paired bootstrap): diff [95% CI] p"
        tables[title] = _cells(cmp_rows, _diff_cell)
    tables[EVIDENCE_TITLE] = evidence_display(evaluation.evidence)
    return {title: frame for title, frame in tables.items() if not frame.empty}


def rich_frame(title: str, frame: pd.DataFrame) -> Any:
    """One display table as a rich Table (for a terminal); Text, not markup: "MADRAG[both_r1]" is a name."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title), title_justify="left")
    table.add_column("")
    for col in frame.columns:
        table.add_column(Text(str(col)), justify="right")
    for index, row in frame.iterrows():
        table.add_row(Text(str(index)), *(Text(fmt(v)) for v in row.tolist()))
    return table


def rich_tables(evaluation: Evaluation) -> list[Any]:
    """The display tables as rich Tables (for a terminal)."""
    return [rich_frame(title, frame) for title, frame in display_tables(evaluation).items()]


def summary_line(evaluation: Evaluation) -> str:
    """One line naming the essay set, the number of evaluated essays and the run folder."""
    meta = evaluation.meta
    where = f"essay set {meta['essay_set']}: " if meta.get("essay_set") is not None else ""
    return f"{where}{meta.get('n_essays')} evaluated essays ({meta.get('run_dir')})"


def render_text(evaluation: Evaluation, width: int = 160) -> str:
    """The tables as plain text (rich tables rendered without colour), with the run's notes."""
    from io import StringIO

    from rich.console import Console

    buffer = StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False)
    console.print(summary_line(evaluation), markup=False)
    for table in rich_tables(evaluation):
        console.print(table)
    for note in evaluation.notes:
        console.print(f"note: {note}", markup=False)
    return buffer.getvalue()


def render_markdown(evaluation: Evaluation) -> str:
    """evaluation.md: every table with a heading, then the definitions used."""
    meta = evaluation.meta
    definitions = [
        f"Reference: {meta.get('reference')}. QWK over the trait's full score range.",
        f"`{HH_FULL}`: rater 1 vs rater 2 on every essay of the set in {meta.get('data')} (the paper's row); "
        f"`{HH_EVAL}`: the same on the evaluated essays only.",
        "Unusable judge scores are excluded from every metric and counted (valid-score rate), never imputed.",
        "Extreme subset: essay-traits where a rater gave the min or max; Agree@1 = |pred - extreme| <= 1, MAE "
        "from the extreme; if raters gave both extremes equally often, the nearer one is the reference.",
        f"Bootstrap: {meta.get('bootstrap')} resamples of essays, seed {meta.get('seed')}, percentile CIs.",
        EVIDENCE_DEFINITION,
    ]
    heading = f"Evaluation: essay set {meta.get('essay_set')}, {meta.get('n_essays')} essays"
    return markdown_document(heading, display_tables(evaluation), definitions, evaluation.notes)


def save(evaluation: Evaluation, out_dir: Path) -> list[Path]:
    """Write CSVs (long and wide QWK, extreme subset, comparisons), evaluation.json and evaluation.md."""
    frames = {
        "qwk.csv": evaluation.qwk,
        "qwk_table.csv": wide(evaluation.qwk),
        "extreme.csv": evaluation.extreme,
        "comparisons.csv": evaluation.comparisons,
        "evidence.csv": evaluation.evidence,
    }
    written = _write_csvs(frames, out_dir, with_index=["qwk_table.csv"])
    payload = {
        "meta": evaluation.meta,
        "notes": evaluation.notes,
        "protocols": evaluation.protocols,
        "qwk": records(evaluation.qwk),
        "extreme": records(evaluation.extreme),
        "comparisons": records(evaluation.comparisons),
        "evidence": records(evaluation.evidence),
    }
    write_text_atomic(out_dir / "evaluation.json", json.dumps(payload, indent=2, default=str))
    write_text_atomic(out_dir / "evaluation.md", render_markdown(evaluation))
    return [*written, out_dir / "evaluation.json", out_dir / "evaluation.md"]


# -- the consensus paper: consensus tables -------------------------------------------------------------------------


def _value_cells(frame: pd.DataFrame, value: str) -> pd.DataFrame:
    """A long (protocol, trait, value) frame as the paper's layout: protocols x traits, 3-digit cells."""
    return _cells(records(frame), lambda r: fmt(r[value], 3))


def _row_cells(frame: pd.DataFrame, columns: dict[str, str], index: list[str]) -> pd.DataFrame:
    """Selected columns (renamed) with 3-digit numbers, one row per ``index`` entry."""
    shown = {title: [fmt(_number(v), 3) for v in frame[col].tolist()] for col, title in columns.items()}
    return pd.DataFrame(shown, index=pd.Index(index))


def _number(value: Any) -> Any:
    """numpy / pandas scalars as plain Python numbers, so :func:`fmt` formats them."""
    return value.item() if hasattr(value, "item") else value


def _shift_table(ev: ConsensusEvaluation) -> pd.DataFrame:
    """Tables 2 and 8, all traits pooled: one row per protocol."""
    pooled = ev.alignment[ev.alignment["trait"] == ALL]
    names = {"n": "n", "mean_pred": "mean score", "mean_ref": "human mean"}
    names |= {"shift": f"shift vs {ev.meta.get('baseline') or 'baseline'}", "shift_ref": "shift vs human"}
    names |= {"rmse": "RMSE", "spearman": "Spearman"}
    return _row_cells(pooled, names, pooled["protocol"].tolist())


def _dominance_table(dom: pd.DataFrame) -> pd.DataFrame:
    """Table 9: one row per consensus protocol and trait."""
    columns = {"shift_consensus": "consensus shift", "shift_strict": "Strict-only shift"}
    columns |= {"shift_lenient": "Lenient-only shift", "midpoint": "midpoint", "beyond_midpoint": "beyond midpoint"}
    index = [f"{c} / {t}" for c, t in zip(dom["consensus"], dom["trait"], strict=True)]
    return _row_cells(dom, columns, index)


def _trajectory_table(traj: pd.DataFrame) -> pd.DataFrame:
    """Figures 2-4 as numbers, all traits pooled: one row per protocol and round."""
    traj_all = traj[traj["trait"] == ALL].dropna(axis=1, how="all")
    keep = {c: c for c in traj_all.columns if c.startswith("mean_") or c in ("n", "rmse", "spearman")}
    index = [f"{p} r{r}" for p, r in zip(traj_all["protocol"], traj_all["round"], strict=True)]
    return _row_cells(traj_all, keep, index)


def consensus_display_tables(ev: ConsensusEvaluation) -> dict[str, pd.DataFrame]:
    """The consensus tables as formatted strings, titled after the paper's tables."""
    align = ev.alignment
    tables = {
        "RMSE vs human reference (Table 1)": _value_cells(align, "rmse"),
        "Spearman vs human reference (Table 1)": _value_cells(align, "spearman"),
        "usable predictions / unusable": _cells(records(align), lambda r: f"{r['n']} / {r['n_unusable']}"),
        "Mean predicted score (Table 2)": _value_cells(align, "mean_pred"),
        "Score shifts, all traits (Tables 2 and 8)": _shift_table(ev),
    }
    if not ev.dominance.empty:
        title = "Dominance analysis (Table 9): consensus shift vs the Strict/Lenient midpoint"
        tables[title] = _dominance_table(ev.dominance)
    if not ev.trajectories.empty:
        tables["Round-wise trajectories, all traits (Figures 2-4)"] = _trajectory_table(ev.trajectories)
    if not ev.comparisons.empty:
        base = ev.comparisons["baseline"].iloc[0]
        title = f"RMSE difference vs {base} (paired bootstrap over essays): diff [95% CI] p"
        tables[title] = _cells(records(ev.comparisons), _diff_cell)
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


def new_figure(**kwargs: Any) -> Figure:
    """A bare matplotlib figure on an Agg canvas (no pyplot state), for every plot madrag draws; matplotlib is
    the paper extra's (and the web app's)."""
    fig: Figure = require("paper", "matplotlib.figure").Figure(**kwargs)
    require("paper", "matplotlib.backends.backend_agg").FigureCanvasAgg(fig)
    return fig


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
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_atomic(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)
    return path


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
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_atomic(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)
    return path


def save_consensus(ev: ConsensusEvaluation, out_dir: Path) -> list[Path]:
    """Write alignment.csv, trajectories.csv, dominance.csv, comparisons.csv, consensus.md and, when there are
    MAD protocols, trajectories.png (Figures 3-4) and rmse_by_round.png (Figure 2); returns the paths written."""
    frames = {
        "alignment.csv": ev.alignment,
        "trajectories.csv": ev.trajectories,
        "dominance.csv": ev.dominance,
        "comparisons.csv": ev.comparisons,
    }
    written = _write_csvs(frames, out_dir)
    write_text_atomic(out_dir / "consensus.md", render_consensus_markdown(ev))
    written.append(out_dir / "consensus.md")
    if not ev.trajectories.empty:
        written.append(plot_trajectories(ev.trajectories, out_dir / "trajectories.png", ev.meta.get("human_mean")))
        written.append(plot_rmse_by_round(ev.trajectories, out_dir / "rmse_by_round.png"))
    return written
