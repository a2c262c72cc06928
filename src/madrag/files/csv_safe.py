"""The one CSV writer of madrag: every CSV it writes (exports, gradebooks, feedback, evaluation tables) goes
through here, so a text cell a spreadsheet would run as a formula (``=HYPERLINK(...)``, ``+cmd``, ``-2+3``,
``@SUM``, or one starting with a tab or carriage return) is written with a leading ``'`` and shown as text. Numbers
stay numbers (a negative score is not text), and so does text that is exactly a number (``"-1.5"``). OWASP's "CSV
Injection" page is the definition followed.

Pandas frames are written with :func:`write_frame` (the frame is duck-typed: this module imports no pandas, so the
scoring core's store can use it).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from madrag.files.atomic import open_atomic

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""The first characters that make a spreadsheet read a cell as a formula (OWASP, "CSV Injection")."""


PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
"""Text that is exactly a number (``-1.5``, ``+2``, ``-3e-2``): a spreadsheet reads it as that number, never runs
it, so it is written as it is (and read back as a number by pandas)."""


def safe_cell(value: Any) -> Any:
    """A cell a spreadsheet shows as it is: formula-like text prefixed with ``'``, None as empty, others (numbers,
    and text that is exactly a number) unchanged.

    >>> [safe_cell(v) for v in ["=HYPERLINK(1)", "-2+3", "-1.5", -3, None, "ok"]]
    ["'=HYPERLINK(1)", "'-2+3", '-1.5', -3, '', 'ok']
    """
    if isinstance(value, str) and value.startswith(FORMULA_START) and not PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return "" if value is None else value


def safe_row(row: Iterable[Any]) -> list[Any]:
    """Every cell of ``row`` through :func:`safe_cell`."""
    return [safe_cell(v) for v in row]


def csv_text(rows: Iterable[Sequence[Any]]) -> str:
    """Rows (the header first, if any) as CSV text, every cell formula-safe."""
    buf = io.StringIO()
    csv.writer(buf).writerows(safe_row(r) for r in rows)
    return buf.getvalue()


def dict_rows(rows: Sequence[Mapping[str, Any]], fields: Sequence[str] | None = None) -> list[list[Any]]:
    """Dict rows as the header (``fields``, default: the first row's keys) and one list per row."""
    names = list(fields if fields is not None else (rows[0] if rows else []))
    return [names, *([row.get(name) for name in names] for row in rows)]


def write_csv(path: str | Path, rows: Iterable[Sequence[Any]]) -> None:
    """Write rows (the header first) to ``path`` as UTF-8 CSV, every cell formula-safe; complete or not at all
    (:mod:`madrag.files.atomic`), streamed row by row."""
    with open_atomic(path, newline="") as fh:
        csv.writer(fh).writerows(safe_row(r) for r in rows)


def write_frame(frame: Any, path: str | Path, *, index: bool = True) -> None:
    """Write a pandas DataFrame to ``path`` as pandas' ``to_csv`` does, with its text cells, column names and
    index labels formula-safe; complete or not at all (:mod:`madrag.files.atomic`)."""
    safe = frame.copy()
    text_columns = [c for c in safe.columns if safe[c].dtype.kind not in "biufcmM"]  # not numbers or times
    for column in text_columns:
        safe[column] = safe[column].map(lambda v: safe_cell(v) if isinstance(v, str) else v)
    safe.columns = _safe_labels(safe.columns)
    if index:
        safe.index = _safe_labels(safe.index)
    with open_atomic(path, newline="") as fh:
        safe.to_csv(fh, index=index)


def _safe_labels(labels: Any) -> Any:
    """Column names or index labels (a MultiIndex's tuples too) formula-safe, in the same kind of index."""
    if getattr(labels, "nlevels", 1) > 1:
        return labels.set_levels([level.map(_label) for level in labels.levels])
    return labels.map(_label)


def _label(value: Any) -> Any:
    return safe_cell(value) if isinstance(value, str) else value


def raw_csv_text(rows: Iterable[Sequence[Any]]) -> str:
    """Rows as CSV text with every cell kept exactly: only for a file madrag itself reads back (a class file's
    columns mapped, an upload split in rows), never one a person opens in a spreadsheet."""
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    return buf.getvalue()
