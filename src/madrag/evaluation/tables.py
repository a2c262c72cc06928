"""An :class:`~madrag.evaluation.Evaluation` for people: display tables, a terminal / plain-text rendering,
evaluation.md, and the files ``madrag eval`` writes (CSVs, evaluation.json, evaluation.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from madrag.evaluation.agreement import HH_EVAL, HH_FULL, Evaluation, wide


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as JSON-ready dicts (NaN -> None)."""
    clean = frame.astype(object).where(pd.notna(frame), None)
    return [{str(k): v for k, v in row.items()} for row in clean.to_dict(orient="records")]


def save(evaluation: Evaluation, out_dir: Path) -> list[Path]:
    """Write CSVs (long and wide QWK, extreme subset, comparisons), evaluation.json and evaluation.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "qwk.csv": evaluation.qwk,
        "qwk_table.csv": wide(evaluation.qwk),
        "extreme.csv": evaluation.extreme,
        "comparisons.csv": evaluation.comparisons,
    }
    written = []
    for name, frame in paths.items():
        frame.to_csv(out_dir / name, index=name == "qwk_table.csv")
        written.append(out_dir / name)
    payload = {
        "meta": evaluation.meta,
        "notes": evaluation.notes,
        "protocols": evaluation.protocols,
        "qwk": records(evaluation.qwk),
        "extreme": records(evaluation.extreme),
        "comparisons": records(evaluation.comparisons),
    }
    (out_dir / "evaluation.json").write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    (out_dir / "evaluation.md").write_text(render_markdown(evaluation), encoding="utf-8")
    return [*written, out_dir / "evaluation.json", out_dir / "evaluation.md"]


def fmt(value: Any, digits: int = 2) -> str:
    """A number for a table cell; NaN / None as an em dash; a value that rounds to zero as zero, not -0.00."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{round(value, digits) + 0.0:.{digits}f}" if isinstance(value, float) else str(value)


def _cells(rows: list[dict[str, Any]], text: Callable[[dict[str, Any]], str]) -> pd.DataFrame:
    """Long rows (protocol, trait, ...) as a wide table of display strings."""
    long = pd.DataFrame([{"protocol": r["protocol"], "trait": r["trait"], "cell": text(r)} for r in rows])
    return wide(long, "cell") if rows else pd.DataFrame()


def _qwk_cell(r: dict[str, Any]) -> str:
    return f"{fmt(r['qwk'], 3)} [{fmt(r['ci_low'], 3)}, {fmt(r['ci_high'], 3)}]"


def _count_cell(r: dict[str, Any]) -> str:
    rate = r["valid_rate"]
    text = f"{r['n']}" if rate is None else f"{r['n']} / {100 * rate:.0f}%"
    counts = [f"{r[k]} {label}" for k, label in (("n_unusable", "unusable"), ("n_truncated", "truncated")) if r.get(k)]
    return f"{text} ({', '.join(counts)})" if counts else text


def _diff_cell(r: dict[str, Any]) -> str:
    return f"{fmt(r['diff'], 3)} [{fmt(r['ci_low'], 3)}, {fmt(r['ci_high'], 3)}] p={fmt(r['p_value'], 3)}"


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
        "essays per cell / valid-score rate (unusable, truncated)": _cells(qwk_rows, _count_cell),
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
    return {title: frame for title, frame in tables.items() if not frame.empty}


def rich_tables(evaluation: Evaluation) -> list[Any]:
    """The display tables as rich Tables (for a terminal)."""
    from rich.table import Table
    from rich.text import Text

    out = []
    for title, frame in display_tables(evaluation).items():  # Text, not markup: "MADRAG[both_r1]" is a name
        table = Table(title=Text(title), title_justify="left")
        table.add_column("")
        for col in frame.columns:
            table.add_column(Text(str(col)), justify="right")
        for index, row in frame.iterrows():
            table.add_row(Text(str(index)), *(Text(fmt(v)) for v in row.tolist()))
        out.append(table)
    return out


def summary_line(evaluation: Evaluation) -> str:
    meta = evaluation.meta
    return f"essay set {meta.get('essay_set')}: {meta.get('n_essays')} evaluated essays ({meta.get('run_dir')})"


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


def markdown_table(frame: pd.DataFrame) -> str:
    """A DataFrame as a GitHub markdown table, index as the first column."""
    head = ["", *(str(c) for c in frame.columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for index, row in frame.iterrows():
        cells = [str(index), *(fmt(v) for v in row.tolist())]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def render_markdown(evaluation: Evaluation) -> str:
    """evaluation.md: every table with a heading, then the definitions used."""
    meta = evaluation.meta
    parts = [f"# Evaluation: essay set {meta.get('essay_set')}, {meta.get('n_essays')} essays", ""]
    for title, frame in display_tables(evaluation).items():
        parts += [f"## {title}", "", markdown_table(frame), ""]
    parts += [
        "## Definitions",
        "",
        f"- Reference: {meta.get('reference')}. QWK over the trait's full score range.",
        f"- `{HH_FULL}`: rater 1 vs rater 2 on every essay of the set in {meta.get('data')} (the paper's row); "
        f"`{HH_EVAL}`: the same on the evaluated essays only.",
        "- Unusable judge scores are excluded from every metric and counted (valid-score rate), never imputed.",
        "- Extreme subset: essay-traits where a rater gave the min or max; Agree@1 = |pred - extreme| <= 1, MAE "
        "from the extreme; if raters gave both extremes equally often, the nearer one is the reference.",
        f"- Bootstrap: {meta.get('bootstrap')} resamples of essays, seed {meta.get('seed')}, percentile CIs.",
        *(f"- Note: {n}" for n in evaluation.notes),
        "",
    ]
    return "\n".join(parts)
