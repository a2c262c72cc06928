"""The MADRAG paper's error-analysis tables from a hand-coded error export (``madrag errors --tabulate``).

The export (:mod:`madrag.paper.coding.errors_export`) has one row per wrong essay-trait, the computed direction
(A1 under-scoring, A2 over-scoring) and empty coding columns for reasoning quality B, failure mechanism C and
component attribution D. Once coded, this module turns it back into the paper's tables:

* Table 3: marginal distributions of C and of D (count and % of the rows coded for it, most frequent first).
* Table 4: A x C (counts and row-normalised %).
* Table 5: the B distribution, and B per trait (N, B0, B1, B2).
* Table 10: C x D (counts and row-normalised %).
* Table 11: C x B (counts and row-normalised %; the paper's "B x C" table has one row per mechanism).

A row left uncoded for a scheme is left out of the tables that need that scheme (and counted); a value that is
not a code of the scheme is an error naming the row, never guessed.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from madrag.errors import InputError
from madrag.files.atomic import write_text_atomic
from madrag.files.csv_safe import write_frame

CODES: dict[str, dict[str, str]] = {
    "A": {"A1": "Under-scoring", "A2": "Over-scoring"},
    "B": {"B0": "Misaligned / ungrounded", "B1": "Partially grounded", "B2": "Rubric-aligned and text-grounded"},
    "C": {
        "C1": "Trait-boundary confusion",
        "C2": "Debate framing capture",
        "C3": "Spurious debate claim accepted",
        "C4": "Exemplar-induced calibration error",
        "C5": "Rubric boilerplate collapse",
        "C6": "Anonymization distortion",
    },
    "D": {
        "D1": "Debate plausibly contributed",
        "D2": "Retrieval plausibly contributed",
        "D3": "Interaction plausible (debate+RAG)",
        "D4": "Not component-specific",
    },
}
COLUMN_PREFIX = {"B": "code_B", "C": "code_C", "D": "code_D"}
_CODE = re.compile(r"^\s*([A-Da-d][0-9])\b")
_DIRECTION = re.compile(r"\bA([12])\b")


@dataclass
class CodedTables:
    """The tables of one coded file (DataFrames indexed by code) and how many rows each scheme left uncoded."""

    n_rows: int
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    uncoded: dict[str, int] = field(default_factory=dict)


def _column(header: list[str], prefix: str, path: Path) -> str:
    found = [c for c in header if c.startswith(prefix)]
    if not found:
        raise InputError(f"{path}: no {prefix}... column (is it an export of madrag errors?)")
    return found[0]


def _code(value: str, scheme: str, where: str) -> str | None:
    """The code a cell holds (``"C2"`` from ``"C2"``, ``"c2 debate framing"``); None when empty."""
    if not value.strip():
        return None
    match = _CODE.match(value)
    code = match.group(1).upper() if match else None
    if code not in CODES[scheme]:
        raise InputError(f"{where}: {value.strip()!r} is not one of {', '.join(CODES[scheme])}")
    return code


def read_coded(path: Path) -> pd.DataFrame:
    """One row per coded export row: ``trait``, ``A`` (from the direction), ``B``, ``C``, ``D`` (None when
    uncoded). InputError on a missing file or column, or a value that is not a code of its scheme."""
    if not path.is_file():
        raise InputError(f"coded file not found: {path}")
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        header = list(reader.fieldnames or [])
        for needed in ("trait", "direction"):
            if needed not in header:
                raise InputError(f"{path}: no {needed!r} column (is it an export of madrag errors?)")
        columns = {s: _column(header, p, path) for s, p in COLUMN_PREFIX.items()}
        rows = []
        for line, row in enumerate(reader, start=2):
            direction = _DIRECTION.search(row["direction"] or "")
            out: dict[str, str | None] = {"trait": row["trait"], "A": f"A{direction.group(1)}" if direction else None}
            for scheme, column in columns.items():
                out[scheme] = _code(row[column] or "", scheme, f"{path} line {line}, {column}")
            rows.append(out)
    return pd.DataFrame(rows, columns=["trait", "A", "B", "C", "D"])


def marginal(coded: pd.DataFrame, scheme: str) -> pd.DataFrame:
    """Count and % of each code among the rows coded for ``scheme``, most frequent first (Tables 3 and 5)."""
    counts = coded[scheme].dropna().value_counts().reindex(list(CODES[scheme]), fill_value=0)
    frame = pd.DataFrame({"label": pd.Series(CODES[scheme]), "count": counts})
    total = int(frame["count"].sum())
    frame["%"] = (100 * frame["count"] / total).round(1) if total else float("nan")
    frame = frame.sort_values("count", ascending=False, kind="stable")
    frame.index.name = scheme
    return frame


def crosstab(coded: pd.DataFrame, rows: str, columns: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(counts, row-normalised %) of ``rows`` x ``columns`` codes over the rows coded for both, every code of
    both schemes shown (a row without any case has NaN percentages)."""
    both = coded.dropna(subset=[rows, columns])
    counts = pd.crosstab(both[rows], both[columns]).reindex(
        index=list(CODES[rows]), columns=list(CODES[columns]), fill_value=0
    )
    counts.index.name, counts.columns.name = rows, columns
    totals = counts.sum(axis=1)
    percent = (100 * counts.div(totals.where(totals > 0), axis=0)).round(1)
    return counts.astype("int64"), percent


def per_trait(coded: pd.DataFrame) -> pd.DataFrame:
    """Table 5 (right): per trait, the rows coded for B (N) and their B0, B1, B2 counts, largest N first."""
    both = coded.dropna(subset=["B"])
    counts = pd.crosstab(both["trait"], both["B"]).reindex(columns=list(CODES["B"]), fill_value=0)
    counts.insert(0, "N", counts.sum(axis=1))
    counts = counts.sort_values("N", ascending=False, kind="stable")
    counts.columns.name = None
    return counts.astype("int64")


def tabulate(path: Path) -> CodedTables:
    """Every table of a coded export (see the module docstring)."""
    coded = read_coded(path)
    out = CodedTables(n_rows=len(coded), uncoded={s: int(coded[s].isna().sum()) for s in "ABCD"})
    tables = out.tables  # in the paper's order (the assignments run left to right)
    tables["table3_C"], tables["table3_D"] = marginal(coded, "C"), marginal(coded, "D")
    tables["table4_AxC_counts"], tables["table4_AxC_pct"] = crosstab(coded, "A", "C")
    tables["table5_B"], tables["table5_B_per_trait"] = marginal(coded, "B"), per_trait(coded)
    tables["table10_CxD_counts"], tables["table10_CxD_pct"] = crosstab(coded, "C", "D")
    tables["table11_CxB_counts"], tables["table11_CxB_pct"] = crosstab(coded, "C", "B")
    return out


TITLES = {
    "table3_C": "Table 3: primary failure mechanism (C)",
    "table3_D": "Table 3: component attribution (D)",
    "table4_AxC_counts": "Table 4: A x C, counts",
    "table4_AxC_pct": "Table 4: A x C, row-normalised (%)",
    "table5_B": "Table 5: reasoning quality (B)",
    "table5_B_per_trait": "Table 5: reasoning quality (B) per trait",
    "table10_CxD_counts": "Table 10: C x D, counts",
    "table10_CxD_pct": "Table 10: C x D, row-normalised (%)",
    "table11_CxB_counts": "Table 11: C x B, counts",
    "table11_CxB_pct": "Table 11: C x B, row-normalised (%)",
}


def render(result: CodedTables) -> str:
    """The tables as plain text, each under its title, with the uncoded counts first."""
    uncoded = ", ".join(f"{s} {n}" for s, n in result.uncoded.items())
    parts = [f"{result.n_rows} coded rows (left uncoded per scheme: {uncoded})", ""]
    for name, frame in result.tables.items():
        parts += [TITLES[name], frame.to_string(), ""]
    return "\n".join(parts)


def save_tables(result: CodedTables, out_dir: Path) -> list[Path]:
    """One CSV per table and ``tables.txt`` (all of them as text) in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / f"{name}.csv" for name in result.tables]
    for frame, target in zip(result.tables.values(), written, strict=True):
        write_frame(frame, target)
    text = out_dir / "tables.txt"
    write_text_atomic(text, render(result))
    return [*written, text]
