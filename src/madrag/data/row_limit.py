"""The one limit on the rows (essays) of a data file, however it is read: the web server's (``madrag serve
--max-essays``, its default) and the loaders' (``madrag score --max-rows``). A file is counted as it streams and
refused at the first row past the limit, before it is read whole: a million-row CSV costs the first 20,001 rows'
reading, not gigabytes.
"""

from __future__ import annotations

import codecs
import csv
import io
from collections.abc import Iterable, Iterator
from pathlib import Path

from madrag.errors import InputError

MAX_ROWS = 20_000
"""The most rows one data file may hold unless the caller raises it (``--max-rows``, ``--max-essays``)."""
JSONL_SUFFIXES = (".jsonl", ".ndjson")
_CHUNK = 4 * 1024 * 1024  # a line is read in pieces of at most this many characters (a field is at most 1,000,000)
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def count_rows(lines: Iterable[str], suffix: str, stop_after: int | None = None) -> int:
    """The data rows of a CSV / TSV (without the header) or the lines of a JSONL text, blank ones not counted;
    at most ``stop_after`` + 1 (counting stops there). A file the CSV reader cannot get through counts the rows
    before the problem (the loader then names it)."""
    stop = None if stop_after is None else stop_after + 1
    if suffix in JSONL_SUFFIXES:
        return _count_lines(lines, stop)
    rows = 0
    try:
        for row in csv.reader(lines, delimiter="\t" if suffix == ".tsv" else ","):
            rows += any(cell.strip() for cell in row)
            if stop is not None and rows > stop:  # the header is one of them
                break
    except csv.Error:
        pass
    return max(0, rows - 1)


def _count_lines(lines: Iterable[str], stop: int | None) -> int:
    rows, filled = 0, False
    for piece in lines:
        filled = filled or bool(piece.strip())
        if piece.endswith("\n"):
            rows, filled = rows + filled, False
            if stop is not None and rows >= stop:
                return rows
    return rows + filled


def _pieces(stream: io.TextIOBase) -> Iterator[str]:
    """The stream's lines, a line longer than :data:`_CHUNK` in pieces (never a whole huge line in memory)."""
    while piece := stream.readline(_CHUNK):
        yield piece


def check_rows(path: Path, suffix: str, max_rows: int | None) -> None:
    """Refuse the data file at ``path`` when it holds more than ``max_rows`` rows (None: no limit), counted as
    it streams. Its bytes are read as Latin-1 (every byte one character: the commas, tabs, quotes and line ends
    of UTF-8 and of every 8-bit code page are where they are), UTF-16 and UTF-32 by their byte-order mark."""
    if max_rows is None or not path.is_file():
        return  # a missing file: the loader says so
    try:
        with path.open("rb") as raw:
            head = raw.read(4)
            raw.seek(0)
            codec = next((name for bom, name in _WIDE_BOMS if head.startswith(bom)), "latin-1")
            text = io.TextIOWrapper(raw, encoding=codec, errors="replace", newline="")
            found = count_rows(_pieces(text), suffix, stop_after=max_rows)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    refuse_rows(path, found, max_rows)


def refuse_rows(path: Path, rows: int, max_rows: int | None) -> None:
    """Refuse the data file at ``path`` when its ``rows`` are more than ``max_rows`` (None: no limit)."""
    if max_rows is not None and rows > max_rows:
        raise InputError(
            f"{path}: more than {max_rows:,} rows, the limit: score the file in parts, or raise the limit with "
            "--max-rows"
        )
