"""Class files as teachers' tools make them, built in the tests: Word documents (python-docx), PDFs with and
without a text layer (written object by object, as a PDF writer lays them out), Excel workbooks (openpyxl), a
Windows-1252 CSV with curly quotes, a Google Forms export with first and last name columns, and ZIPs named as
Canvas's "Download Submissions" and a Google Drive folder of Classroom copies name their files."""

from __future__ import annotations

import csv
import datetime as dt
import io
import zipfile
from typing import Any

import docx
import openpyxl

ESSAYS = {
    "Ann Lee": "Patience is a skill. When my bus was late in the rain, I waited calmly and helped my little sister.",
    "Bo Chen": "My grandmother taught me patience; we sat by the lake all morning before a single fish bit.",
    "Cy Diaz": "Waiting for test results was hard, but I kept busy by reading and walking the dog twice a day.",
    "Di Evans": "I learned patience by planting tomatoes. They took weeks to grow, and every morning I checked them.",
    "Ed Fox": "When the power went out we played cards by candle light until it came back, and nobody complained.",
    "Flo Gray": "Building a model ship took me three months of careful gluing, sanding and painting every evening.",
    "Gus Hill": "Learning the violin needs patience: the first weeks sound awful, but slowly the notes get cleaner.",
}
"""One essay per student (first name, last name), each long enough to be a real paragraph."""


def docx_bytes(paragraphs: list[str], header: str = "") -> bytes:
    """A Word document with these paragraphs (and a page header, as Google Docs exports one)."""
    document = docx.Document()
    if header:
        document.sections[0].header.paragraphs[0].text = header
    for text in paragraphs:
        document.add_paragraph(text)
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF file of these objects (numbered from 1; object 1 the catalog), with its cross-reference table."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def _stream(content: bytes, extra: str = "") -> bytes:
    return f"<< /Length {len(content)}{extra} >>\nstream\n".encode() + content + b"\nendstream"


def pdf_bytes(lines: list[str]) -> bytes:
    """A one-page PDF whose text layer holds ``lines`` (Helvetica, WinAnsi encoding: curly quotes work), one
    line under the other as a word processor breaks a paragraph at the margin."""

    def literal(text: str) -> bytes:
        raw = text.encode("cp1252")
        return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"

    shown = b" T* ".join(literal(line) + b" Tj" for line in lines)
    content = b"BT /F1 12 Tf 14 TL 72 720 Td " + shown + b" ET"
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> "
            b"/Contents 5 0 R >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
            _stream(content),
        ]
    )


def scanned_pdf_bytes() -> bytes:
    """A one-page PDF that is only a picture (a scanner's or a phone's): no text layer."""
    pixels = bytes(range(0, 256, 4)) * 4  # a 16 x 16 grey image
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im1 4 0 R >> >> "
            b"/Contents 5 0 R >>",
            _stream(
                pixels,
                " /Type /XObject /Subtype /Image /Width 16 /Height 16 /ColorSpace /DeviceGray /BitsPerComponent 8",
            ),
            _stream(b"q 468 0 0 648 72 72 cm /Im1 Do Q"),
        ]
    )


def wrapped(text: str, width: int = 48) -> list[str]:
    """A paragraph broken into lines at ``width`` characters, as a PDF lays it out."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def xlsx_bytes(sheets: dict[str, list[list[Any]]], percent_cells: tuple[str, ...] = ()) -> bytes:
    """An Excel workbook with these sheets (title -> rows, the first a header); ``percent_cells`` (``"C2"``)
    get Excel's percent format."""
    book = openpyxl.Workbook()
    book.remove(book.active)
    for title, rows in sheets.items():
        sheet = book.create_sheet(title)
        for row in rows:
            sheet.append(row)
        for ref in percent_cells:
            sheet[ref].number_format = "0%"
    buf = io.BytesIO()
    book.save(buf)
    return buf.getvalue()


def forms_export_first_last() -> str:
    """A Google Forms response sheet downloaded as CSV, the form asking first and last name apart."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["Timestamp", "Email Address", "First name", "Last name", "Your essay"])
    for i, (name, essay) in enumerate(ESSAYS.items()):
        first, last = name.split()
        writer.writerow([f"2026/11/30 9:0{i}:00 AM", f"{first.lower()}@school.org", first, last, essay])
    return buf.getvalue()


def cp1252_csv() -> bytes:
    """A CSV as Excel on Windows saves "CSV (Comma delimited)": Windows-1252, curly quotes and a dash."""
    rows = [
        "Student,Email,Essay",
        'Zoë Brontë,zoe@school.org,"My aunt said \u201cpatience is bitter, but its fruit is sweet\u201d \u2013 '
        'and I didn\u2019t believe her until the garden grew."',
        'José Núñez,jose@school.org,"I waited \u2018forever\u2019 for the café to open; it was worth it."',
    ]
    return ("\r\n".join(rows) + "\r\n").encode("cp1252")


def canvas_name(name: str, user_id: int, attachment_id: int, filename: str, late: bool = False) -> str:
    """A file name in Canvas's "Download Submissions" ZIP: the student's sortable name ("Last, First") in lower
    case without its punctuation and spaces, LATE when late, the user id, the attachment id, the file's name."""
    first, last = name.split()
    sortable = f"{last}, {first}".lower().replace(",", "").replace(" ", "")
    return "_".join([sortable, *(["LATE"] if late else []), str(user_id), str(attachment_id), filename])


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buf.getvalue()


def canvas_zip() -> tuple[bytes, dict[str, tuple[str, str]]]:
    """Canvas's ZIP of an assignment's submissions: five .docx and two .pdf (text layer), the third student late.
    Returns the ZIP and, per Canvas user id, (the name as Canvas writes it, the essay)."""
    files: dict[str, bytes] = {}
    expected: dict[str, tuple[str, str]] = {}
    for i, (name, essay) in enumerate(ESSAYS.items()):
        user_id, attachment = 1000 + i, 5000 + i
        if i < 5:
            data, filename = docx_bytes([essay], header=f"{name} - Period 3"), "Persuasive Essay.docx"
        else:
            data, filename = pdf_bytes(wrapped(essay)), "essay final.pdf"
        files[canvas_name(name, user_id, attachment, filename, late=i == 2)] = data
        first, last = name.split()
        expected[str(user_id)] = (f"{last}{first}".lower(), essay)
    return zip_bytes(files), expected


def classroom_drive_zip() -> bytes:
    """A Classroom assignment's Drive folder downloaded as a ZIP: one folder, each student's copy of the
    teacher's document named "<Student Name> - <title>" (Drive converts the Google Docs to .docx)."""
    files = {
        f"Persuasive Essay/{name} - Persuasive Essay.docx": docx_bytes([essay])
        for name, essay in list(ESSAYS.items())[:3]
    }
    return zip_bytes(files)


def when(day: int) -> dt.datetime:
    return dt.datetime(2026, 11, day, 9, 30, 0)
