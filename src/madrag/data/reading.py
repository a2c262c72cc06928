"""Reading data files, shared by every loader (:mod:`madrag.data.loaders`, :mod:`madrag.data.summeval`,
:mod:`madrag.data.nikl`): text in the first encoding that fits, JSON lines, score cells, the field-size limit, the
checks every loaded set passes (unique ids, scores in the trait's range) and warnings logged once per file.
Every problem is a one-line :class:`InputError` naming the file and line.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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


def parse_score(raw: str, where: str) -> float | None:
    """A score cell as a number; None when empty (or ``nan``, ``na``, ``none``)."""
    raw = raw.strip()
    if raw == "" or raw.lower() in {"nan", "na", "none"}:
        return None
    try:
        return float(raw)
    except ValueError as exc:
        raise InputError(f"{where}: score {raw!r} is not a number") from exc


def check_unique(essays: list[Essay], path: Path) -> None:
    """Refuse a file with the same essay id twice."""
    seen: set[str] = set()
    for essay in essays:
        if essay.id in seen:
            raise InputError(f"{path}: duplicate essay id {essay.id!r}")
        seen.add(essay.id)


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
