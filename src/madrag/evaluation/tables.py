"""The evaluations for people: display tables, markdown, plain text and the files the eval commands write.

* Shared formatting: :func:`fmt` (one number in a cell), :func:`markdown_table`, :func:`markdown_document`, long
  rows as a wide table of cells (:func:`cells`), CSVs (:func:`write_csvs`), a bare figure (:func:`new_figure`)
  and its PNG (:func:`save_png`).
* The MADRAG paper (:class:`~madrag.evaluation.agreement.Evaluation`): display tables, a terminal / plain-text
  rendering, evaluation.md and :func:`save` (CSVs, evaluation.json, evaluation.md).

The consensus paper's tables and figures are the research wing's (``madrag.paper.consensus.tables``), over the
shared formatting here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from madrag.evaluation.agreement import HH_EVAL, HH_FULL, Evaluation, wide
from madrag.evaluation.evidence import EVIDENCE_DEFINITION, EVIDENCE_TITLE, evidence_display
from madrag.extras import require
from madrag.files.atomic import open_atomic, write_text_atomic
from madrag.files.csv_safe import write_frame

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


def markdown_table(frame: pd.DataFrame, *, index: bool = True, digits: int = 2) -> str:
    """A DataFrame as a GitHub markdown table: the index as the first column (unless ``index`` is False), every
    cell through :func:`fmt` with ``digits``."""
    head = [*([""] if index else []), *(str(c) for c in frame.columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, row in frame.astype(object).iterrows():
        cells = [*([str(label)] if index else []), *(fmt(v, digits) for v in row.tolist())]
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


def cells(rows: list[dict[str, Any]], text: Callable[[dict[str, Any]], str]) -> pd.DataFrame:
    """Long rows (protocol, trait, ...) as a wide table of display strings."""
    long = pd.DataFrame([{"protocol": r["protocol"], "trait": r["trait"], "cell": text(r)} for r in rows])
    return wide(long, "cell") if rows else pd.DataFrame()


def diff_cell(r: dict[str, Any]) -> str:
    """A paired comparison: ``diff [ci_low, ci_high] p=p_value``."""
    return f"{fmt(r['diff'], 3)} [{fmt(r['ci_low'], 3)}, {fmt(r['ci_high'], 3)}] p={fmt(r['p_value'], 3)}"


def write_csvs(frames: dict[str, pd.DataFrame], out_dir: Path, with_index: Iterable[str] = ()) -> list[Path]:
    """Each frame as ``out_dir/name``; the index written only for the names in ``with_index``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        write_frame(frame, out_dir / name, index=name in set(with_index))
    return [out_dir / name for name in frames]


def new_figure(**kwargs: Any) -> Figure:
    """A bare matplotlib figure on an Agg canvas (no pyplot state), for every plot madrag draws; matplotlib is
    the paper extra's (and the web app's)."""
    fig: Figure = require("paper", "matplotlib.figure").Figure(**kwargs)
    require("paper", "matplotlib.backends.backend_agg").FigureCanvasAgg(fig)
    return fig


def save_png(fig: Figure, path: Path, dpi: int = 120) -> Path:
    """Write ``fig`` as a PNG at ``path`` (its folder made, the file written atomically); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_atomic(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=dpi)
    return path


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
    # a protocol shown on its paper's population (MTS[template=FILE]: its authors' sample) is named with it
    tagged = {p: f"{p} ({tag})" for p, tag in evaluation.meta.get("populations", {}).items()}
    tables = {
        "QWK vs human reference [95% bootstrap CI]": cells(qwk_rows, _qwk_cell).rename(index=tagged),
        "essays per cell / valid-score rate (+ scored essays without a human reference; unusable, truncated)": cells(
            qwk_rows, _count_cell
        ).rename(index=tagged),
        "extreme-score subset (Table 2): a rater gave the trait's min or max": _extreme_display(
            records(evaluation.extreme)
        ),
    }
    per_trait = [r for r in records(evaluation.extreme) if r["trait"] != "all"]
    tables["extreme subset per trait: Agree@1 % / MAE (N)"] = cells(per_trait, _extreme_cell)
    cmp_rows = records(evaluation.comparisons)
    if cmp_rows:
        title = f"QWK difference vs {cmp_rows[0]['baseline']} (paired bootstrap): diff [95% CI] p"
        tables[title] = cells(cmp_rows, diff_cell)
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
    written = write_csvs(frames, out_dir, with_index=["qwk_table.csv"])
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
