"""Reading data files, shared by every loader (:mod:`madrag.data.loaders`, :mod:`madrag.data.summeval`,
:mod:`madrag.data.nikl`, :mod:`madrag.data.class_files`): text in the first encoding that fits, or in the encoding
detected in its bytes (:func:`decode_text`: a BOM, UTF-8, else charset-normalizer's guess, named for the user),
JSON lines, score cells, the field-size limit, the checks every loaded set passes (unique ids, scores in the
trait's range) and warnings logged once per file. Every problem is a one-line :class:`InputError` naming the file
and line.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import charset_normalizer

from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.rubric import Rubric

MAX_FIELD_CHARS = 1_000_000
"""The largest field (an essay's text) a data file may hold, in characters: about 150,000 words."""


log = logging.getLogger("madrag.data")
_REPORTED: set[tuple[str, str]] = set()


def report_once(path: Path, message: str) -> None:
    """Log ``message`` about ``path`` as a warning, once per process (data files are read more than once)."""
    key = (str(path.resolve()), message)
    if key not in _REPORTED:
        _REPORTED.add(key)
        log.warning("warning: %s: %s", path, message)


def too_long(path: Path, line: int) -> InputError:
    """The error of a field over :data:`MAX_FIELD_CHARS` at ``path:line``."""
    return InputError(f"{path}:{line}: a field is longer than {MAX_FIELD_CHARS:,} characters, the maximum essay size")


def check_text(text: str, where: str) -> None:
    """An essay's text is at most :data:`MAX_FIELD_CHARS` characters and valid Unicode (a JSON ``\\ud800`` escape
    or a Python string can hold a lone surrogate, which no file can store): a one-line InputError otherwise."""
    if len(text) > MAX_FIELD_CHARS:
        raise InputError(
            f"{where}: the text has {len(text):,} characters, over the maximum essay size of {MAX_FIELD_CHARS:,}"
        )
    bad = _SURROGATE.search(text)
    if bad is not None:
        raise InputError(
            f"{where}: the text holds a lone surrogate (U+{ord(bad.group()):04X}) at character {bad.start():,}, "
            "which is not valid Unicode; fix its encoding"
        )


_SURROGATE = re.compile("[\ud800-\udfff]")


def read_text(path: Path, encodings: Iterable[str]) -> str:
    """The file's text in the first of ``encodings`` that decodes it."""
    if not path.is_file():
        raise InputError(f"data file not found: {path}")
    last: Exception | None = None
    for enc in encodings:
        try:
            return path.read_text(encoding=enc)
        except UnicodeDecodeError as exc:
            last = exc
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc}") from exc
    raise InputError(f"{path} is not valid text in any of {list(encodings)}: {last}")


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
ENCODING_NAMES = {
    "utf-8": "UTF-8",
    "utf-8-sig": "UTF-8 with a byte-order mark",
    "utf-16": "UTF-16",
    "utf-16-le": "UTF-16 (little-endian)",
    "utf-16-be": "UTF-16 (big-endian)",
    "utf-32": "UTF-32",
    "cp1252": "Windows-1252 (Western European)",
    "cp1250": "Windows-1250 (Central European)",
    "cp1251": "Windows-1251 (Cyrillic)",
    "iso8859-1": "Latin-1 (ISO-8859-1)",
    "iso8859-15": "Latin-9 (ISO-8859-15)",
    "mac-roman": "Mac Roman",
    "cp437": "DOS (code page 437)",
    "cp850": "DOS (code page 850)",
    "ascii": "ASCII",
}
"""Python's codec names (as :func:`codecs.lookup` spells them) as a teacher knows the encodings: a page says which
one a file was read in."""


def encoding_name(codec: str) -> str:
    """A codec's name as a user knows it (``cp1252`` -> ``Windows-1252 (Western European)``)."""
    try:
        key = codecs.lookup(codec).name
    except LookupError:
        return codec
    return ENCODING_NAMES.get(key, key)


def decode_text(data: bytes, where: str) -> tuple[str, str]:
    """``(text, codec)`` of bytes in whatever common encoding they are in: a byte-order mark decides first
    (UTF-8, UTF-16, UTF-32), then strict UTF-8, else charset-normalizer's best guess (Windows-1252, Latin-1,
    UTF-16 without a mark ...). The text never starts with a BOM. Bytes that are no text at all are a one-line
    :class:`InputError` saying what to do."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec).lstrip("\ufeff"), codec
            except UnicodeDecodeError:
                break
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    found = _likeliest(list(charset_normalizer.from_bytes(data)))
    if found is None:
        raise InputError(
            f"{where}: not text in any encoding madrag recognises: save it from Excel or Google Sheets as "
            "CSV UTF-8 (or upload the .xlsx itself)"
        )
    return found[0].lstrip("\ufeff"), found[1]


PREFERRED = ("cp1252", "latin_1", "iso8859_15", "mac_roman", "cp1250", "cp1251")
"""Among the encodings charset-normalizer finds equally likely (a short text in Windows-1252 decodes as well in
Windows-1250, which turns ``ñ`` into ``ń``), the one chosen: Windows-1252 first, what Excel on a US or
Western-European Windows saves a CSV in."""


def _likeliest(matches: list[Any]) -> tuple[str, str] | None:
    """``(text, codec)`` of charset-normalizer's best match, a tie broken by :data:`PREFERRED` (a match stands
    for every codec in its ``could_be_from_charset``: they decode the bytes alike)."""
    if not matches:
        return None
    best = matches[0]
    tied = [m for m in matches if abs(m.chaos - best.chaos) < 0.01 and abs(m.coherence - best.coherence) < 0.01]
    for codec in PREFERRED:
        for match in tied:
            if codec == match.encoding or codec in match.could_be_from_charset:
                return str(match), codec
    return str(best), str(best.encoding)


def unique_header(cells: list[str]) -> list[str]:
    """Column names from a header row: trimmed, an empty one named by its place (``Column 3``), a repeated one
    numbered (``Score (2)``); trailing empty ones (a spreadsheet's stray commas) left out."""
    out: list[str] = []
    for i, cell in enumerate(cells, 1):
        name = str(cell).strip() or f"Column {i}"
        base, n = name, 2
        while name in out:
            name, n = f"{base} ({n})", n + 1
        out.append(name)
    while out and out[-1] == f"Column {len(out)}":
        out.pop()
    return out


def parse_score(raw: str, where: str) -> float | None:
    """A score cell as a number; None when empty (or ``nan``, ``na``, ``none``)."""
    raw = raw.strip()
    if raw == "" or raw.lower() in {"nan", "na", "none"}:
        return None
    try:
        return float(raw)
    except ValueError as exc:
        raise InputError(f"{where}: score {raw!r} is not a number") from exc


def check_unique(essays: list[Essay], where: str | Path) -> None:
    """Refuse essays (of a file, or what ``where`` names) with the same essay id twice."""
    seen: set[str] = set()
    for essay in essays:
        if essay.id in seen:
            raise InputError(f"{where}: duplicate essay id {essay.id!r}")
        seen.add(essay.id)


def read_bytes(path: Path) -> bytes:
    """The data file's bytes; an InputError when there is no such file or it cannot be read."""
    if not path.is_file():
        raise InputError(f"data file not found: {path}")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc


def check_range(essay: Essay, rubric: Rubric, where: str) -> None:
    """Refuse a rater's score outside its trait's scale."""
    for trait in rubric.traits:
        for score in essay.rater_scores.get(trait.name, []):
            if not trait.contains(score):
                raise InputError(
                    f"{where}: essay {essay.id}: {trait.name} score {score:g} outside [{trait.min}, {trait.max}]"
                )


def jsonl_rows(text: str, p: Path) -> list[tuple[str, dict[str, Any]]]:
    """The ``(path:line, object)`` of each non-empty line of a JSON-lines text."""
    rows: list[tuple[str, dict[str, Any]]] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(line) > MAX_FIELD_CHARS:
            raise too_long(p, line_no)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{p}:{line_no}: not valid JSON: {exc.msg}") from exc
        except RecursionError:
            raise InputError(f"{p}:{line_no}: JSON nested too deeply to be an essay row") from None
        if not isinstance(obj, dict):
            raise InputError(f"{p}:{line_no}: each line must be a JSON object")
        rows.append((f"{p}:{line_no}", obj))
    return rows
