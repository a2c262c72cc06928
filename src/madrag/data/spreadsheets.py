"""An Excel workbook (``.xlsx``, as Excel and Google Sheets save it) read as a table with openpyxl: the first
sheet that holds data, its first non-empty row the header, every cell as the text a teacher sees (whole numbers
without ``.0``, percentages as ``85%``, dates as ``2026-09-14``, a formula as its last computed value; a formula
never computed is an empty cell, never 0).

A workbook is a ZIP: its parts are checked (:mod:`madrag.data.zip_parts`) and every row of every sheet counted
before openpyxl opens it, which builds a row whole (a row of millions of cells would take gigabytes).

openpyxl is imported when a workbook is read (``pip install 'madrag[documents]'``).
"""

from __future__ import annotations

import datetime as dt
import io
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any
from xml.parsers import expat

from madrag.data.reading import unique_header
from madrag.data.submissions import ArchiveLimits
from madrag.data.zip_parts import PartLimits, open_checked
from madrag.errors import InputError

XLSX_SUFFIXES = (".xlsx", ".xlsm")
MAX_COLUMNS = 1_000
"""The most cells a row of a sheet may have (Excel allows 16,384; a class sheet has a few dozen columns)."""
_SAVE_CSV = "save the class's sheet on its own as CSV UTF-8"
_NOT_XLSX = "not an Excel workbook that can be opened: save it again as .xlsx"


@dataclass
class Sheet:
    """One worksheet as a table."""

    title: str
    header: list[str]
    rows: list[dict[str, str]]


def cell_text(value: Any, number_format: str = "General") -> str:
    """A cell's value as text: ``4.0`` -> ``4``, ``0.85`` formatted as a percentage -> ``85%``, a date at
    midnight -> ``2026-09-14``, a date and time -> ``2026-09-14 08:31:02``, TRUE/FALSE, None -> ``""``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if "%" in (number_format or ""):
            return f"{value * 100:g}%"
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0, 0):
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


class _TooWide(Exception):
    """A row with more cells than :data:`MAX_COLUMNS`."""


def _check_workbook(data: bytes, name: str, parts: PartLimits) -> None:
    """Refuse a workbook whose parts unpack past ``parts``, or a sheet with a row wider than
    :data:`MAX_COLUMNS`, before openpyxl opens it: each sheet is read as a stream of tags, a cell counted and
    dropped, so the check takes no more memory than a few kilobytes of the sheet."""
    with open_checked(data, name, parts, _SAVE_CSV, _NOT_XLSX) as archive:
        for info in archive.infolist():
            if info.filename.startswith("xl/worksheets/") and info.filename.endswith(".xml"):
                _check_sheet(archive, info, name)


def _check_sheet(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> None:
    cells = 0

    def start(tag: str, _attrs: Any) -> None:
        nonlocal cells
        local = tag.rpartition(" ")[2]  # the tag without its namespace (a sheet may write <x:c>)
        if local == "row":
            cells = 0
        elif local == "c":
            cells += 1
            if cells > MAX_COLUMNS:
                raise _TooWide

    parser = expat.ParserCreate(namespace_separator=" ")
    parser.StartElementHandler = start
    try:
        with archive.open(info) as stream:
            parser.ParseFile(stream)
    except _TooWide:
        raise InputError(f"{name}: a row of a sheet has over {MAX_COLUMNS:,} cells: {_SAVE_CSV}") from None
    except (expat.ExpatError, zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as exc:
        raise InputError(f"{name}: {_NOT_XLSX}") from exc


def read_xlsx(data: bytes, name: str, max_rows: int, limits: ArchiveLimits) -> Sheet:
    """The first worksheet with a header and at least one row below it (else the first with a header); a
    one-line InputError for a file openpyxl cannot open, a workbook past ``limits.parts`` or with no data."""
    try:
        import openpyxl
    except ImportError as exc:  # pragma: no cover - the documents extra is missing
        raise InputError("reading .xlsx files needs openpyxl: pip install 'madrag[documents]'") from exc
    _check_workbook(data, name, limits.parts)
    try:
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many kinds (KeyError, ValueError, XML errors) for a broken file
        raise InputError(f"{name}: cannot be read as an Excel workbook: save it again as .xlsx") from exc
    try:
        sheets = [_sheet(ws, max_rows) for ws in book.worksheets]
    finally:
        book.close()
    found = next((s for s in sheets if s.rows), None) or next((s for s in sheets if s.header), None)
    if found is None:
        raise InputError(f"{name}: the workbook has no data: put the class on its first sheet, a header row first")
    return found


def _sheet(ws: Any, max_rows: int) -> Sheet:
    """A worksheet's header (its first non-empty row) and rows (blank ones skipped; at most ``max_rows`` + 1)."""
    header: list[str] = []
    rows: list[dict[str, str]] = []
    for cells in ws.iter_rows():
        texts = [cell_text(c.value, getattr(c, "number_format", "General")) for c in cells]
        if not any(t.strip() for t in texts):
            continue
        if not header:
            header = unique_header(texts)
            continue
        rows.append({h: (texts[i] if i < len(texts) else "") for i, h in enumerate(header)})
        if len(rows) > max_rows:
            break
    return Sheet(str(ws.title), header, rows)
