"""A run's measured figures beside the MADRAG paper's reported ones: ``madrag eval RUN --paper`` and the report.

For a run on ASAP set 7 or 8 each measured QWK (and each pooled Agree@1 / MAE of the extreme subset) is matched
with the paper's figure for the same protocol, set and trait:

* ``MADRAG``: Table 1's row of the run's model when it is one of the paper's backbones (GPT-3.5-turbo, GPT-4o-mini,
  GPT-4o, GPT-5-mini, GPT-5), else the GPT-4o-mini row (the model of the paper's ablation tables), with a note;
* ``SA`` ... ``MARAG``: Table 9 (its MADRAG row is Table 1's GPT-4o-mini row; the table names no model);
* ``MADRAG[adv_r1]``, ``[adv_r2]``, ``[both_r1]`` ...: Tables 7 and 8 (``skp_*`` read as the paper's "Skp."
  rows; their Adv. (R1) is MADRAG itself, but on set 7 its Style differs from Table 1's: 0.45, 0.47);
* ``FeatEng-RF`` (``madrag paper baseline``) and the Human-Human row on the full data file: Table 1;
* the extreme subset's pooled rows: Table 2.

The published systems madrag does not run (ProTACT, ZS-LLM, CSR-J) and Table 1's MADRAG rows of the other
models are listed as reported only. A difference is measured minus reported; a figure the paper does not report
for a cell is left out, never shown as 0.

The mechanism is every paper's: :class:`BesidePaper` (long rows of measured, reported, difference, where), its
display tables, ``paper.md`` and ``paper.csv`` (:func:`beside_display`, :func:`beside_markdown`,
:func:`save_beside`) serve the consensus paper (:mod:`madrag.paper.beside_consensus`) and the confidence paper
(:mod:`madrag.paper.confidence.beside_paper`) too; each paper only matches its figures with a run's
(:func:`beside_row`).
A figure the paper reports that the run cannot measure stands in the rows with its measured value missing (shown
"—", counted in a note), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from madrag.evaluation.agreement import HH_FULL, Evaluation
from madrag.evaluation.tables import fmt, markdown_document
from madrag.files.atomic import write_text_atomic
from madrag.files.csv_safe import write_frame
from madrag.paper.reported import FILES, PAPERS, Paper, Reported, figures

PAPER_MODELS = ("gpt-3.5-turbo", "gpt-4o-mini", "gpt-4o", "gpt-5-mini", "gpt-5")
"""The backbones of the MADRAG paper's Table 1 MADRAG rows."""
ABLATION_MODEL = "gpt-4o-mini"
"""The model of Tables 2, 7, 8 and 9 (none names one; their MADRAG rows are Table 1's GPT-4o-mini row)."""
ABLATIONS = ("SA", "SARAG", "MA", "MAD", "MARAG")
BESIDE_COLUMNS = [
    *["protocol", "trait", "metric", "measured", "reported", "diff", "table", "where", "paper_row", "model", "n"],
]
REPORTED_ONLY_COLUMNS = ["paper_row", "model", "set", "metric", "trait", "value", "where", "note"]
METRIC_TITLES = {
    "qwk": "QWK",
    "agree_at_1": "Agree@1 (Table 2)",
    "mae": "MAE (Table 2)",
    "n": "N (Table 2)",
    "rmse": "RMSE",
    "spearman": "Spearman",
    "mean_pred": "mean predicted score",
    "shift_ref": "shift from the human reference",
    "auroc": "AUROC",
    "share_at_max": "share at the maximum score",
    "pass_rate": "pass rate",
    "pass_rate_gap": "pass-rate gap",
}
"""How a display names each metric the papers report."""


@dataclass
class BesidePaper:
    """The measured figures beside the reported ones (long form), the reported-only rows and notes.

    ``essay_set``: the data the figures are about (an ASAP set, the consensus paper's "Korean Essay"); ``layout``:
    the display's panels, one per ``metric`` (columns: traits; the MADRAG paper's tables) or one per paper
    ``table`` (columns: metrics; the consensus and confidence papers, whose figures are pooled)."""

    essay_set: str | None
    model: str
    beside: pd.DataFrame
    reported_only: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    paper: Paper = "madrag"
    layout: str = "metric"

    @property
    def name(self) -> str:
        """``the MADRAG paper``: how text names the paper."""
        return PAPERS[self.paper].split(" (", 1)[0]

    @property
    def data_label(self) -> str:
        """``set 7`` for an ASAP set, else the data's own name (``Korean Essay``)."""
        return f"set {self.essay_set}" if str(self.essay_set).isdigit() else str(self.essay_set)

    def all_notes(self) -> list[str]:
        """The notes, then the count of figures the run could not measure."""
        return [*self.notes, *([m] if (m := self.missing_note()) else [])]

    def missing_note(self) -> str | None:
        """How many of the paper's figures this run could not measure (shown as missing, never 0)."""
        missing = int(self.beside["measured"].isna().sum()) if not self.beside.empty else 0
        if not missing:
            return None
        return (
            f"{missing} of the {len(self.beside)} figures of {self.name} beside this run could not be measured "
            "from it (not run, or undefined: one essay, a rater who gave one score only): shown — (missing), "
            "not 0, and not compared"
        )


def paper_model(run_model: str | None) -> tuple[str, str | None]:
    """The paper's backbone to compare a run's MADRAG with, and a note when it is not the run's own model."""
    name = (run_model or "").strip().lower().rsplit("/", 1)[-1]
    if name in PAPER_MODELS:
        return name, None
    shown = run_model or "an unrecorded model"
    return ABLATION_MODEL, f"the run's model ({shown}) is not one of the paper's; MADRAG is compared with GPT-4o-mini"


def _reference_table(protocol: str, model: str) -> tuple[str, str]:
    """(table, model) of the paper where ``protocol``'s reported row stands."""
    if protocol == "MADRAG":
        return "Table 1", model
    if protocol in ABLATIONS:
        return "Table 9", ABLATION_MODEL
    if protocol.startswith("MADRAG["):
        return "Table 7/8", ABLATION_MODEL
    return "Table 1", ""  # FeatEng-RF, Human-Human


def qwk_index(essay_set: str, model: str) -> dict[tuple[str, str], Reported]:
    """(madrag protocol, trait label) -> the paper's QWK figure for ``essay_set``."""
    index: dict[tuple[str, str], Reported] = {}
    for fig in figures("madrag", set_=essay_set):
        if fig.metric != "qwk" or not fig.protocol:
            continue
        protocol = HH_FULL if fig.protocol == "Human-Human" else fig.protocol
        table, wanted = _reference_table(protocol, model)
        if table.startswith("Table 7") and fig.table in ("Table 7", "Table 8"):
            index[protocol, fig.trait] = fig
        elif fig.table == table and (not wanted or fig.model == wanted):
            index[protocol, fig.trait] = fig
    return index


def beside_row(protocol: str, trait: str, metric: str, measured: Any, fig: Reported, n: Any) -> dict[str, Any]:
    """One row of :data:`BESIDE_COLUMNS`: ``measured`` (None / NaN: missing, and so is the difference) beside
    ``fig``, the difference measured minus reported."""
    value = None if measured is None or pd.isna(measured) else float(measured)
    diff = None if value is None else value - fig.value
    row = {"protocol": protocol, "trait": trait, "metric": metric, "measured": value, "reported": fig.value}
    row |= {"diff": diff, "table": fig.table, "where": fig.where, "paper_row": fig.row, "model": fig.model, "n": n}
    return row


def reported_only_frame(figs: list[Reported]) -> pd.DataFrame:
    """Figures a run does not measure at all, as rows of :data:`REPORTED_ONLY_COLUMNS`."""
    rows = [
        {"paper_row": f.row, "model": f.model, "set": f.set, "metric": f.metric, "trait": f.trait, "value": f.value}
        | {"where": f.where, "note": f.note}
        for f in figs
    ]
    return pd.DataFrame(rows, columns=REPORTED_ONLY_COLUMNS)


def _qwk_rows(evaluation: Evaluation, essay_set: str, model: str) -> list[dict[str, Any]]:
    index = qwk_index(essay_set, model)
    rows = []
    for cell in evaluation.qwk.to_dict(orient="records"):
        fig = index.get((str(cell["protocol"]), str(cell["label"])))
        if fig is not None:
            rows.append(beside_row(str(cell["protocol"]), str(cell["label"]), "qwk", cell["qwk"], fig, cell["n"]))
    return rows


def _extreme_rows(evaluation: Evaluation, essay_set: str) -> list[dict[str, Any]]:
    table2 = {(f.protocol, f.metric): f for f in figures("madrag", table="Table 2", set_=essay_set)}
    rows = []
    for cell in evaluation.extreme.to_dict(orient="records"):
        if cell["trait"] != "all":
            continue
        for metric in ("n", "agree_at_1", "mae"):
            fig = table2.get((str(cell["protocol"]), metric))
            if fig is not None:
                rows.append(beside_row(str(cell["protocol"]), "all", metric, cell[metric], fig, cell["n"]))
    return rows


def _reported_only(essay_set: str, model: str, measured: set[str]) -> pd.DataFrame:
    """Table 1's rows this run does not measure: the published systems (FeatEng-RF unless the run holds
    ``madrag paper baseline``'s), MADRAG with the other backbones, Human-Human when the run has no two raters."""
    return reported_only_frame(
        [
            f
            for f in figures("madrag", table="Table 1", set_=essay_set)
            if (HH_FULL if f.protocol == "Human-Human" else f.protocol) not in measured
            or (f.protocol == "MADRAG" and f.model != model)
        ]
    )


def beside_paper(evaluation: Evaluation) -> BesidePaper:
    """The run's figures beside the MADRAG paper's (see the module docstring)."""
    essay_set = evaluation.meta.get("essay_set")
    model, note = paper_model(evaluation.meta.get("model"))
    if essay_set not in (7, 8, "7", "8"):
        empty = pd.DataFrame(columns=BESIDE_COLUMNS)
        line = f"the MADRAG paper reports ASAP sets 7 and 8 only; this run's essay set is {essay_set}"
        return BesidePaper(None, model, empty, _reported_only("none", model, set()), [line])
    key = str(essay_set)
    rows = _qwk_rows(evaluation, key, model) + _extreme_rows(evaluation, key)
    measured = {str(r["protocol"]) for r in rows}
    notes = [note] if note and "MADRAG" in evaluation.protocols else []
    notes.append(
        "the paper's figures come from its whole sets (every fold; `madrag score --protocols paper-ablation --fold "
        "each`); a run on one fold or a --limit sample measures fewer essays (column n)"
    )
    beside = pd.DataFrame(rows, columns=BESIDE_COLUMNS)
    return BesidePaper(key, model, beside, _reported_only(key, model, measured), notes)


COUNTS = frozenset({"n", "essays", "rank", "count"})
"""Metrics shown whole."""


def _digits(metric: str, reported: bool = False) -> int:
    """Places a figure is shown with: counts whole, a reported QWK as the paper prints it (2), else 3."""
    return 0 if metric in COUNTS else 2 if metric == "qwk" and reported else 3


def _cell(measured: Any, reported: Any, diff: Any, metric: str) -> str:
    """``measured / reported (difference)``."""
    digits = _digits(metric)
    return f"{fmt(measured, digits)} / {fmt(reported, _digits(metric, True))} ({fmt(diff, digits)})"


def _panels(result: BesidePaper) -> list[tuple[str, pd.DataFrame, str]]:
    """(title, rows, column key) of each display panel: per metric (columns: traits) or per paper table
    (columns: metrics, with the trait when it is not pooled)."""
    frame = result.beside.assign(
        cell=[
            _cell(m, r, d, str(k))
            for m, r, d, k in zip(result.beside["measured"], result.beside["reported"], result.beside["diff"],
                                  result.beside["metric"], strict=True)
        ]
    )  # fmt: skip
    where = result.data_label
    if result.layout == "metric":
        return [
            (f"{METRIC_TITLES.get(str(k), k)}, {where}: measured / {result.name} (difference)", rows, "trait")
            for k, rows in frame.groupby("metric", sort=False)
        ]
    frame = frame.assign(
        column=[
            METRIC_TITLES.get(m, m) if t == "all" else f"{METRIC_TITLES.get(m, m)} ({t})"
            for m, t in zip(frame["metric"], frame["trait"], strict=True)
        ]
    )
    cited = frame["where"].str.rsplit(" (", n=1).str[0]  # "the consensus paper, Table 1"
    return [
        (f"{k}, {where}: measured / reported (difference)", rows, "column")
        for k, rows in frame.groupby(cited, sort=False)
    ]


def beside_display(result: BesidePaper) -> dict[str, pd.DataFrame]:
    """Display tables: per panel (:attr:`BesidePaper.layout`), protocols x traits or metrics with
    ``measured / reported (diff)`` cells; then the reported-only rows (rows x traits, per metric)."""
    tables: dict[str, pd.DataFrame] = {}
    for title, rows, column in _panels(result):
        wide = rows.pivot(index="protocol", columns=column, values="cell")
        wide = wide.reindex(index=list(dict.fromkeys(rows["protocol"])), columns=list(dict.fromkeys(rows[column])))
        tables[title] = wide.fillna("—")
    for metric, frame in result.reported_only.groupby("metric", sort=False):
        names = [f"{r} ({m})" if m else r for r, m in zip(frame["paper_row"], frame["model"], strict=True)]
        sets = list(dict.fromkeys(frame["set"].astype(str)))
        where = f"set {sets[0]}" if len(sets) == 1 and sets[0].isdigit() else ", ".join(sets)
        if len(sets) > 1:  # figures of several data sets: each row names its own
            names = [f"{n}, {s}" for n, s in zip(names, frame["set"], strict=True)]
        cells = [fmt(float(v), _digits(str(metric), True)) for v in frame["value"]]
        wide = frame.assign(name=names, cell=cells).pivot(index="name", columns="trait", values="cell")
        wide = wide.reindex(index=list(dict.fromkeys(names)), columns=list(dict.fromkeys(frame["trait"])))
        tables_named = ", ".join(dict.fromkeys(w.rsplit(", ", 1)[-1].split(" (")[0] for w in frame["where"]))
        label = "" if metric == "qwk" else f" ({METRIC_TITLES.get(str(metric), metric)})"
        tables[f"reported by {result.name}, {tables_named}{label} (not run here), {where}"] = wide
    return tables


def beside_markdown(result: BesidePaper) -> str:
    """paper.md: the display tables, then where each figure stands and the notes."""
    wheres = sorted(set(result.beside["where"])) + sorted(set(result.reported_only["where"]))
    definitions = [
        f"measured: this run's figure; {result.name}'s: the figure it reports for the same protocol, data and "
        "trait; in brackets measured minus the paper's. A cell the paper does not report is left out; a figure "
        "the run cannot measure is — (missing), never 0.",
        "Figures from: " + "; ".join(dict.fromkeys(wheres)) + f" (src/madrag/paper/reported/{FILES[result.paper]}).",
    ]
    notes = result.all_notes()
    heading = f"The run beside {result.name}"
    return markdown_document(heading, beside_display(result), definitions, notes)


def save_beside(result: BesidePaper, out_dir: Path) -> list[Path]:
    """Write ``paper.csv`` (long: measured, reported, diff, where) and ``paper.md`` under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / "paper.csv", out_dir / "paper.md"
    write_frame(result.beside, csv_path, index=False)
    write_text_atomic(md_path, beside_markdown(result))
    return [csv_path, md_path]


def paper_section(evaluation: Evaluation) -> str:
    """The run's figures beside the MADRAG paper's reported ones, as HTML: the report's ``--paper`` section
    (:data:`madrag.evaluation.report.PaperSection`)."""
    from madrag.evaluation.report import esc, html_table

    result = beside_paper(evaluation)
    tables = "".join(f"<h3>{esc(t)}</h3>{html_table(f)}" for t, f in beside_display(result).items())
    notes = "".join(f"<p class='muted'>note: {esc(n)}</p>" for n in result.all_notes())
    return f"<h2>Beside {esc(result.name)}</h2>{tables}{notes}"
