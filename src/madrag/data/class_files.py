"""The one home of reading a class file's bytes into a table of rows (a header and one dict per row, every cell
text), whatever the teacher has: a CSV in any common encoding (the encoding detected and named), an Excel
workbook (``.xlsx``: the first sheet with data), a ZIP of submissions (:mod:`madrag.data.submissions`), one
document, or, from the CLI and the Python API, a folder of submissions. The web app's class upload and the
loaders both read through :func:`read_class_file` / :func:`read_class_path`; what the columns mean is the
column-mapping step's business (:mod:`madrag.teacher.columns`), not this module's.
"""

from __future__ import annotations

import csv
import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from madrag.data.documents import DOCUMENT_SUFFIXES
from madrag.data.reading import MAX_FIELD_CHARS, decode_text, encoding_name, read_bytes, unique_header
from madrag.data.spreadsheets import XLSX_SUFFIXES, read_xlsx
from madrag.data.submissions import (
    COLUMNS,
    ArchiveLimits,
    Submissions,
    read_submissions_folder,
    read_submissions_zip,
)
from madrag.errors import InputError
from madrag.files.csv_safe import raw_csv_text

_ZIP_MAGIC = b"PK\x03\x04"
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an old .xls (or .doc): a compound file, not a ZIP
TABLE_SUFFIXES = (".csv", ".tsv", ".txt")


@dataclass
class ClassTable:
    """A class file read as rows: ``header``, ``rows`` (every cell text; at most the ``max_rows`` asked for plus
    one, so the caller can refuse a file over its limit), ``read_as`` (what the file was read as, for the page:
    ``CSV in Windows-1252 (Western European)``), ``encoding`` (the codec of a text file), ``refused`` (``(file,
    why)`` of each file of an archive that could not be read) and ``text`` (a comma-separated CSV's decoded text,
    as the library's loaders read it)."""

    header: list[str]
    rows: list[dict[str, str]]
    read_as: str
    encoding: str | None = None
    refused: list[tuple[str, str]] = field(default_factory=list)
    text: str | None = None

    def csv_text(self) -> str:
        """The table as a comma-separated CSV text (header first, RFC 4180 quoting), whatever it was read from."""
        return raw_csv_text([self.header, *([row.get(h, "") for h in self.header] for row in self.rows)])


def kind_of(data: bytes, filename: str) -> str:
    """``xlsx``, ``zip``, ``document``, ``xls`` or ``text``: what a class file is, by its first bytes (an
    Excel workbook and a Word document are ZIPs too) and then its suffix."""
    suffix = PurePosixPath(filename).suffix.lower()
    if data.startswith(_OLE_MAGIC):
        return "xls"
    if data.startswith(_ZIP_MAGIC):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                names = set(archive.namelist())
        except zipfile.BadZipFile:
            return "zip"
        if "xl/workbook.xml" in names:
            return "xlsx"
        if "word/document.xml" in names:
            return "document"
        return "zip"
    if data.startswith(b"%PDF") or (suffix in DOCUMENT_SUFFIXES and suffix not in TABLE_SUFFIXES):
        return "document"
    if suffix in XLSX_SUFFIXES:
        return "xlsx"  # named .xlsx but no workbook inside: openpyxl says so
    return "text"


def read_class_file(
    data: bytes, filename: str, max_rows: int = 1_000_000, limits: ArchiveLimits | None = None
) -> ClassTable:
    """A class file's bytes as a table; a one-line :class:`InputError` saying what to do for a file that is no
    class file (an old ``.xls``, text in no known encoding, a broken ZIP ...)."""
    kind = kind_of(data, filename)
    name = filename or "the file"
    if not data.strip(b" \t\r\n\x00\xef\xbb\xbf"):
        raise InputError(f"{name} is empty: it holds no rows at all (save the class file again, with its rows)")
    if kind == "xls":
        raise InputError(
            f"{name}: an old Excel .xls (or Word .doc) file: save it as .xlsx or CSV UTF-8 (File > Save As) "
            "and upload that"
        )
    if kind == "xlsx":
        sheet = read_xlsx(data, name, max_rows, limits or ArchiveLimits())
        return ClassTable(sheet.header, sheet.rows, f"Excel workbook, sheet {sheet.title!r}")
    if kind == "zip":
        return _submissions_table(read_submissions_zip(data, limits), "ZIP of submissions")
    if kind == "document":
        return _submissions_table(_one_document(data, name, limits), "one document")
    text, codec = decode_text(data, name)
    header, rows = read_csv_text(text, name, max_rows)
    comma = delimiter_of(text) == ","
    return ClassTable(header, rows, f"CSV in {encoding_name(codec)}", encoding=codec, text=text if comma else None)


def read_class_path(path: Path, max_rows: int = 1_000_000, limits: ArchiveLimits | None = None) -> ClassTable:
    """A class file, or a folder of submissions, on disk as a table."""
    if path.is_dir():
        return _submissions_table(read_submissions_folder(path, limits), "folder of submissions")
    return read_class_file(read_bytes(path), str(path), max_rows, limits)


def _one_document(data: bytes, name: str, limits: ArchiveLimits | None) -> Submissions:
    """A single submitted document, as the archive of one file it is (its parts checked against ``limits``)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr(PurePosixPath(name.replace("\\", "/")).name, data)
    return read_submissions_zip(buf.getvalue(), limits)


def _submissions_table(found: Submissions, what: str) -> ClassTable:
    n = len(found.rows)
    named = f", read from {found.naming} file names" if found.naming else ""
    read_as = f"{what}: {n} student{'' if n == 1 else 's'}{named}"
    return ClassTable(list(COLUMNS), found.rows, read_as, refused=found.refused)


def delimiter_of(text: str) -> str:
    """``,``, ``;`` or a tab: the one the header line holds most of (a comma when it holds none)."""
    first_line = text.lstrip("\ufeff").split("\n", 1)[0]
    return max(",;\t", key=first_line.count) if any(c in first_line for c in ",;\t") else ","


def read_csv_text(
    text: str, name: str, max_rows: int = 1_000_000, delimiter: str | None = None
) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of a CSV text: comma-, semicolon- (a European Excel's CSV) or tab-separated, told by
    the header line; blank rows skipped, every header named and unique (``Column 3``, ``Name (2)``)."""
    delimiter = delimiter or delimiter_of(text)
    csv.field_size_limit(MAX_FIELD_CHARS)
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""), delimiter=delimiter)
    if not text.strip(" \t\r\n\ufeff"):
        raise InputError(f"{name} is empty: it holds no rows at all (save the class file again, with its rows)")
    try:
        header = unique_header(next(reader, []))
        if not any(header):
            raise InputError(f"{name}: the file has no header row: its first row must name the columns")
        rows: list[dict[str, str]] = []
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue
            rows.append({h: (cells[i] if i < len(cells) else "") for i, h in enumerate(header)})
            if len(rows) > max_rows:
                break
    except csv.Error as exc:
        line = reader.line_num
        if "field larger" in str(exc):
            raise InputError(f"{name}:{line}: a cell is longer than {MAX_FIELD_CHARS:,} characters") from exc
        raise InputError(f"{name}:{line}: not valid CSV ({exc}): save it again from Excel or Google Sheets") from exc
    return header, rows
