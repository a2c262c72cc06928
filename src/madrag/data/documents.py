"""The text of one submitted document: ``.docx`` (python-docx), ``.pdf`` (pypdf), ``.txt`` (in whatever
encoding it is in) and the ``.html`` page of a Canvas text entry. A file that holds no text madrag can read (a
scanned PDF, a photo, an old ``.doc``) is a one-line :class:`InputError` that says what to do instead; the caller
refuses that one file, not the upload it came in.

python-docx and pypdf are imported when a document of theirs is read (``pip install 'madrag[documents]'``).
"""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser
from pathlib import PurePosixPath
from typing import Any

from madrag.data.reading import MAX_FIELD_CHARS, decode_text
from madrag.data.zip_parts import PartLimits, open_checked
from madrag.errors import InputError

DOCUMENT_SUFFIXES = (".docx", ".pdf", ".txt", ".html", ".htm")
"""The suffixes of the files read as one student's submission."""
MIN_TEXT_CHARS = 20
"""Fewer letters and digits than this in a PDF means it has no text layer (a scan or a photo)."""
SCANNED = (
    "this PDF has no text layer (it is a scan or a photo): export the essay from Google Docs or Word as .docx "
    "(or as PDF), or paste its text"
)
_OTHER_FORMATS = {
    ".doc": "an old Word .doc: open it in Word or Google Docs and save it as .docx",
    ".odt": "an OpenDocument text: save it as .docx (File > Save As / Download > .docx)",
    ".rtf": "a rich-text file: save it as .docx or .txt",
    ".pages": "an Apple Pages file: export it as Word (.docx) or PDF",
    ".gdoc": "a Google Docs shortcut, not the document: download it as .docx (File > Download > Microsoft Word)",
}
_PICTURES = (".jpg", ".jpeg", ".png", ".gif", ".heic", ".heif", ".webp", ".tif", ".tiff", ".bmp")
_SENTENCE_ENDS = (".", "!", "?", ":", '"', "\u201d", "'", "\u2019")
_NOT_DOCX = "cannot be read as a Word document: open it and save it again as .docx"
_DOCX_TOO_BIG = "refused; save the essay without its pictures (or paste its text)"
_NEEDS = "reading {what} needs {package}: pip install 'madrag[documents]'"


def document_text(data: bytes, name: str, parts: PartLimits | None = None) -> str:
    """The text of a submitted document named ``name`` (its suffix says how to read it); an InputError that
    names the file and what to do when it holds none. A ``.docx`` is a ZIP: its parts are checked against
    ``parts`` before python-docx, which reads every one into memory, opens it."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix == ".docx":
        text = _docx_text(data, name, parts or PartLimits())
    elif suffix == ".pdf":
        text = _pdf_text(data, name)
    elif suffix == ".txt":
        text = decode_text(data, name)[0]
    elif suffix in (".html", ".htm"):
        text = html_text(decode_text(data, name)[0])[1]
    elif suffix in _OTHER_FORMATS:
        raise InputError(f"{name}: {_OTHER_FORMATS[suffix]}")
    elif suffix in _PICTURES:
        raise InputError(f"{name}: a picture, not text: ask for the essay as .docx, or paste its text")
    else:
        raise InputError(f"{name}: not a document madrag reads: use .docx, .pdf (with text) or .txt")
    text = _tidy(text)
    if not text:
        raise InputError(f"{name}: the document is empty: check it is the essay, or paste its text")
    if len(text) > MAX_FIELD_CHARS:
        raise InputError(
            f"{name}: longer than {MAX_FIELD_CHARS:,} characters, the maximum essay size: check it holds one essay"
        )
    return text


def _tidy(text: str) -> str:
    """Line ends as ``\\n``, tabs as spaces (a class table's reader guesses tab-separated files by their tabs),
    at most one blank line in a row, no blank edges."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ").replace("\x00", "")
    return re.sub(r"\n[ \u00a0]*\n(\s*\n)+", "\n\n", text).strip()


def _docx_text(data: bytes, name: str, limits: PartLimits) -> str:
    """The body of a Word document in reading order: paragraphs, and table rows as cells joined by `` | ``
    (headers and footers, which hold names and page numbers, are left out)."""
    try:
        import docx
        from docx.table import Table
    except ImportError as exc:  # pragma: no cover - the documents extra is missing
        raise InputError(_NEEDS.format(what=".docx files", package="python-docx")) from exc
    open_checked(data, name, limits, _DOCX_TOO_BIG, _NOT_DOCX).close()
    try:
        document: Any = docx.Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises zip, XML and key errors for a file that is no .docx
        raise InputError(f"{name}: {_NOT_DOCX}") from exc
    parts: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                parts.append(" | ".join(cell.text.strip() for cell in row.cells))
        else:
            parts.append(block.text)
    return "\n".join(parts)


def _pdf_text(data: bytes, name: str) -> str:
    """The text layer of a PDF, its lines joined back into paragraphs; refused when it has none."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError as exc:  # pragma: no cover - the documents extra is missing
        raise InputError(_NEEDS.format(what="PDF files", package="pypdf")) from exc
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InputError(f"{name}: the PDF is password-protected: save it again without a password, or as .docx")
        pages = [page.extract_text() or "" for page in reader.pages]
    except InputError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise InputError(f"{name}: cannot be read as a PDF (damaged?): export it again as PDF or .docx") from exc
    text = "\n\n".join(_reflow(page) for page in pages)
    if len(re.findall(r"\w", text)) < MIN_TEXT_CHARS:
        raise InputError(f"{name}: {SCANNED}")
    return text


def _reflow(page: str) -> str:
    """A PDF page's lines joined back into paragraphs (a PDF breaks every line at the margin): a line goes on
    with the next unless it is blank, or ends a sentence well short of the page's longest line (a paragraph's
    last line)."""
    lines = [line.strip() for line in page.splitlines()]
    width = max((len(line) for line in lines), default=0)
    out: list[str] = []
    for line in lines:
        if not line:
            out.append("\n\n")
            continue
        if out and not out[-1].endswith("\n"):
            out.append(" ")
        out.append(line)
        if line.endswith(_SENTENCE_ENDS) and len(line) < 0.8 * width:
            out.append("\n\n")
    return "".join(out)


class _PageText(HTMLParser):
    """The text of an HTML page, blocks on lines of their own; the ``<title>``, scripts and styles left out,
    and the first ``<h1>`` kept apart (a Canvas text entry's page starts with ``<h1>Assignment: Student</h1>``)."""

    BLOCKS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre"})
    SKIPPED = frozenset({"title", "script", "style", "head"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.heading: list[str] = []
        self._skip = 0
        self._in_h1 = False
        self._seen_h1 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIPPED:
            self._skip += 1
        elif tag == "h1" and not self._seen_h1:
            self._in_h1 = self._seen_h1 = True
        if tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIPPED:
            self._skip = max(0, self._skip - 1)
        elif tag == "h1":
            self._in_h1 = False
        if tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        (self.heading if self._in_h1 else self.parts).append(data)


def html_text(page: str) -> tuple[str, str]:
    """``(first <h1>, the rest of the text)`` of an HTML page."""
    parser = _PageText()
    parser.feed(page)
    parser.close()
    body = "\n".join(re.sub(r"[ \t\u00a0]+", " ", line).strip() for line in "".join(parser.parts).split("\n"))
    return " ".join("".join(parser.heading).split()), body
