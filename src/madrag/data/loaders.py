"""Loaders for the Kaggle ASAP layout and for generic CSV / JSONL / Excel files of ``id, text[, trait scores]``
(a CSV in any common encoding, detected); a folder or ZIP of submitted documents, one per student
(:func:`load_submissions`); SummEval is read by :mod:`madrag.data.summeval`.

Every problem with the input is raised as a one-line :class:`InputError`. A trait's scores are read from the
columns named by its rubric ``column`` field (or, in CSV / JSONL, by its name): ``<column>`` for one rater,
``rater<i>_<column>`` for several. A CSV / JSONL column that is neither known nor a trait's is kept as essay
metadata and reported once (a warning on the ``madrag.data`` logger). No field may exceed
:data:`MAX_FIELD_CHARS` characters, and no file more than ``max_rows`` rows (:data:`MAX_ROWS` unless raised; None:
none), counted as the file streams, before it is read (:mod:`madrag.data.row_limit`). The data format is documented
in ``docs/data-and-rubric-formats.md``.
"""

from __future__ import annotations

import csv
import math
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from madrag.data.class_files import read_class_path
from madrag.data.essay import Essay, essay_id
from madrag.data.nikl import load_nikl, sample_nikl
from madrag.data.reading import (
    MAX_FIELD_CHARS,
    check_range,
    check_text,
    check_unique,
    decode_text,
    encoding_name,
    jsonl_rows,
    parse_score,
    read_bytes,
    read_text,
    report_once,
    too_long,
)
from madrag.data.row_limit import JSONL_SUFFIXES, MAX_ROWS, check_rows, refuse_rows
from madrag.data.spreadsheets import XLSX_SUFFIXES
from madrag.data.submissions import ArchiveLimits
from madrag.data.summeval import load_summeval, looks_like_summeval, sample_summeval
from madrag.errors import InputError
from madrag.rubric import Rubric

ASAP_REQUIRED = ("essay_id", "essay_set", "essay")
_RATER_COL = re.compile(r"^rater(\d+)_(.+)$")
TABLE_KNOWN = ("id", "text", "prompt", "fold", "essay_set", "source")
"""The CSV / JSONL columns every data file may have besides trait scores (``source``: a text the essay is
written from, e.g. the article a summary summarises, which the prompts show)."""
DATA_FORMATS = ("auto", "asap", "csv", "jsonl", "summeval", "summeval-sample", "nikl", "nikl-all", "submissions")
"""The values of ``--format`` (``submissions``: a folder or ZIP of documents, one per student; ``auto`` picks it
for a folder, a ``.zip``, ``.docx`` or ``.pdf``). ``summeval-sample`` is the consensus paper's B.2's 100 articles
(seed 42) x
every system, or ``summeval-sample:<system>,<system>...`` x those systems; ``nikl`` is the consensus paper's B.1's
100 essays
per prompt (seed 42) of the NIKL layout, ``nikl-all`` every essay of it."""


def _csv_table(lines: list[str], path: Path, delimiter: str) -> tuple[list[str], Iterator[tuple[int, dict[str, str]]]]:
    """The header and the (line number, row) pairs of a CSV / TSV; a field over :data:`MAX_FIELD_CHARS` or a
    broken row is a one-line InputError."""
    csv.field_size_limit(MAX_FIELD_CHARS)
    reader = csv.DictReader(lines, delimiter=delimiter)

    def fail(exc: csv.Error) -> InputError:
        line = reader.line_num + 1  # the line being parsed is not counted yet
        if "field limit" in str(exc):
            return too_long(path, line)
        return InputError(f"{path}:{line}: not valid CSV: {exc}")

    try:
        header = list(reader.fieldnames or [])
    except csv.Error as exc:
        raise fail(exc) from exc

    def rows() -> Iterator[tuple[int, dict[str, str]]]:
        try:
            for row in reader:
                yield reader.line_num, row
        except csv.Error as exc:
            raise fail(exc) from exc

    return header, rows()


def _rater_score(raw: str, essay: str, column: str, where: str) -> float | None:
    """One rater's score from a cell (None when empty): a number, and a whole one - a point of the trait's
    integer scale. Only the reference label (the raters' mean, the MADRAG paper's B.5) is rounded; a single score of
    ``1.5`` is an error, never silently rounded."""
    score = parse_score(raw, f"{where} {column}")
    if score is not None and math.isfinite(score) and not score.is_integer():
        raise InputError(
            f"{where}: essay {essay!r} {column}: score {score:g} is not a whole number (each rater's score "
            "is a point of the trait's scale; give several raters as rater1_<column>, rater2_<column>: "
            "their mean is rounded half up)"
        )
    return score


def load_asap(
    path: str | Path, rubric: Rubric, essay_set: int | None = None, max_rows: int | None = MAX_ROWS
) -> list[Essay]:
    """Load essays in the Kaggle ``training_set_rel3.tsv`` layout.

    Works on the shared UTF-8 file of sets 7 and 8 and on the original full file (latin-1). Rater trait
    columns ``rater{i}_{column}`` are mapped to rubric traits by each trait's ``column`` field; only rows of
    ``essay_set`` (default: the rubric's ``essay_set``) are kept.
    """
    p = Path(path)
    check_rows(p, ".tsv", max_rows)
    text = read_text(p, ("utf-8", "latin-1"))
    header, rows = _csv_table(text.splitlines(), p, "\t")
    missing = [c for c in ASAP_REQUIRED if c not in header]
    if missing:
        raise InputError(f"{p}: missing column(s) {missing}; is this the ASAP training_set_rel3.tsv layout?")
    wanted_set = essay_set if essay_set is not None else rubric.essay_set
    columns = _asap_rater_columns(header, rubric, p)
    essays: list[Essay] = []
    for line_no, row in rows:
        where = f"{p}:{line_no}"
        try:
            row_set = int(row["essay_set"])
        except (TypeError, ValueError) as exc:
            raise InputError(f"{where}: essay_set {row.get('essay_set')!r} is not an integer") from exc
        if wanted_set is not None and row_set != wanted_set:
            continue
        essays.append(_asap_essay(row, row_set, columns, rubric, where))
    if not essays:
        raise InputError(f"{p}: no essays of set {wanted_set}")
    check_unique(essays, p)
    return essays


def _asap_rater_columns(header: Sequence[str], rubric: Rubric, path: Path) -> dict[str, list[tuple[int, str]]]:
    """Trait name -> its (0-based rater index, column) pairs, from the ``rater{i}_{trait.column}`` columns."""
    columns: dict[str, list[tuple[int, str]]] = {}
    for trait in rubric.traits:
        if trait.column is None:
            raise InputError(f"rubric trait {trait.name!r} has no 'column' to map ASAP scores from")
        cols = sorted(
            (int(m.group(1)) - 1, c) for c in header if (m := _RATER_COL.match(c)) and m.group(2) == trait.column
        )
        if not cols:
            raise InputError(f"{path}: no rater columns for trait {trait.name!r} (rater*_{trait.column})")
        columns[trait.name] = cols
    return columns


def _asap_essay(
    row: dict[str, str], essay_set: int, columns: dict[str, list[tuple[int, str]]], rubric: Rubric, where: str
) -> Essay:
    """One ASAP row as an Essay, its rater scores in range."""
    the_id = essay_id(row.get("essay_id"), where)
    body = (row.get("essay") or "").strip()
    if not body:
        raise InputError(f"{where}: essay {the_id!r} is empty")
    scores: dict[str, list[float]] = {}
    ids: dict[str, list[int]] = {}
    for trait_name, cols in columns.items():
        for rater_idx, col in cols:
            value = _rater_score(row.get(col) or "", the_id, f"column {col}", where)
            if value is not None:
                scores.setdefault(trait_name, []).append(value)
                ids.setdefault(trait_name, []).append(rater_idx)
    fold_raw = (row.get("fold") or "").strip()
    essay = Essay(
        id=the_id,
        text=body,
        prompt=rubric.prompt,
        essay_set=essay_set,
        fold=int(fold_raw) if fold_raw else None,
        rater_scores=scores,
        rater_ids=ids,
    )
    check_range(essay, rubric, where)
    return essay


def trait_columns(rubric: Rubric) -> dict[str, str]:
    """Casefolded column base name -> trait name: each trait's ``column`` field and its name."""
    keys = {t.name.casefold(): t.name for t in rubric.traits}
    keys.update({t.column.casefold(): t.name for t in rubric.traits if t.column})
    return keys


def _trait_of(key: str, columns: dict[str, str]) -> tuple[str | None, int]:
    """(trait name or None, 0-based rater index) a CSV / JSONL column holds."""
    base, rater_idx = key, 0
    if m := _RATER_COL.match(key):
        rater_idx, base = int(m.group(1)) - 1, m.group(2)
    return columns.get(base.casefold()), rater_idx


def _int_field(raw: dict[str, Any], name: str, where: str) -> int | None:
    """An integer field (``fold``, ``essay_set``): None when absent or empty; ``2``, ``"2"`` and ``2.0`` are 2."""
    value = raw.get(name)
    if value is None or str(value).strip() == "":
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return int(str(value).strip())
    except ValueError as exc:
        raise InputError(f"{where}: {name} {value!r} is not an integer") from exc


def essay_from_row(raw: dict[str, Any], rubric: Rubric, where: str, columns: dict[str, str] | None = None) -> Essay:
    """One essay from a row of a CSV/JSONL data file (or a dict given to the Python API); ``where`` names the row
    in error messages, ``columns`` maps its score columns to traits (default: :func:`trait_columns`)."""
    columns = trait_columns(rubric) if columns is None else columns
    if "id" not in raw or "text" not in raw:
        raise InputError(f"{where}: needs 'id' and 'text' fields, got {sorted(raw)}")
    the_id = essay_id(raw["id"], where)
    if raw["text"] is not None and not isinstance(raw["text"], str):
        raise InputError(f"{where}: essay {the_id!r}: the text must be a string, not a {type(raw['text']).__name__}")
    body = str(raw["text"] or "").strip()
    if not body:
        raise InputError(f"{where}: essay {the_id!r} is empty")
    check_text(body, f"{where}: essay {the_id!r}")
    scores: dict[str, list[float]] = {}
    ids: dict[str, list[int]] = {}
    metadata: dict[str, Any] = {}
    for key, value in raw.items():
        if key in TABLE_KNOWN:
            continue
        trait, rater_idx = _trait_of(key, columns)
        if trait is None:
            metadata[key] = value
            continue
        score = _rater_score(str(value) if value is not None else "", the_id, f"field {key}", where)
        if score is not None:
            scores.setdefault(trait, []).append(score)
            ids.setdefault(trait, []).append(rater_idx)
    source = str(raw.get("source") or "").strip()
    essay = Essay(
        id=the_id,
        text=body,
        source=source or None,
        prompt=str(raw.get("prompt") or rubric.prompt),
        essay_set=_int_field(raw, "essay_set", where),
        fold=_int_field(raw, "fold", where),
        rater_scores=scores,
        rater_ids=ids,
        metadata=metadata,
    )
    check_range(essay, rubric, where)
    return essay


def _report_columns(p: Path, keys: Iterable[str], columns: dict[str, str]) -> None:
    """Report once the columns that are neither known nor a trait's; and the traits no column maps."""
    unused = [k for k in dict.fromkeys(keys) if k not in TABLE_KNOWN and _trait_of(k, columns)[0] is None]
    if unused:
        report_once(
            p,
            f"column(s) {', '.join(unused)} match no rubric trait name or 'column' (kept as essay metadata, "
            "not used as scores)",
        )


def load_table(path: str | Path, rubric: Rubric, max_rows: int | None = MAX_ROWS) -> list[Essay]:
    """Load a generic CSV, JSONL or Excel workbook of ``id, text[, prompt, fold, essay_set, <column>,
    rater<i>_<column>...]``.

    ``<column>`` is a trait's rubric ``column`` field or its name (either matches, case-insensitively): one
    score per essay; ``rater1_<column>``, ``rater2_<column>`` are several raters' scores. A CSV is read in the
    encoding detected in it (UTF-8 with or without a BOM, UTF-16, Windows-1252 ...; one not UTF-8 is reported
    once); a workbook's first sheet with data is read with every cell as text.
    """
    p = Path(path)
    columns = trait_columns(rubric)
    suffix = p.suffix.lower()
    if suffix not in XLSX_SUFFIXES:
        check_rows(p, suffix if suffix in JSONL_SUFFIXES else ".csv", max_rows)
    if suffix in JSONL_SUFFIXES:
        rows = jsonl_rows(read_text(p, ("utf-8",)), p)
        keys = [k for _, raw in rows for k in raw]
    else:
        keys, rows = _xlsx_rows(p, max_rows) if suffix in XLSX_SUFFIXES else _csv_rows(p)
        if "id" not in keys or "text" not in keys:
            raise InputError(f"{p}: missing column(s) {[c for c in ('id', 'text') if c not in keys]}")
    _report_columns(p, keys, columns)
    essays = [essay_from_row(raw, rubric, where, columns) for where, raw in rows]
    if not essays:
        raise InputError(f"{p}: no essays")
    check_unique(essays, p)
    return essays


def _csv_rows(p: Path) -> tuple[list[str], list[tuple[str, dict[str, Any]]]]:
    """The header and ``(path:line, row)`` pairs of a CSV in the encoding detected in its bytes."""
    text, codec = decode_text(read_bytes(p), str(p))
    if codec not in ("utf-8", "utf-8-sig", "ascii"):
        report_once(p, f"read as {encoding_name(codec)} (detected)")
    keys, lines = _csv_table(text.splitlines(keepends=True), p, ",")
    return keys, [(f"{p}:{line}", dict(r)) for line, r in lines]


def _xlsx_rows(p: Path, max_rows: int | None) -> tuple[list[str], list[tuple[str, dict[str, Any]]]]:
    """The header and ``(path row N, row)`` pairs of a workbook's first sheet with data (read up to the row past
    ``max_rows``, then refused)."""
    table = read_class_path(p, max_rows if max_rows is not None else sys.maxsize)
    refuse_rows(p, len(table.rows), max_rows)
    return table.header, [(f"{p} row {i}", dict(r)) for i, r in enumerate(table.rows, 2)]


def load_submissions(
    path: str | Path, rubric: Rubric, limits: ArchiveLimits | None = None, max_rows: int | None = MAX_ROWS
) -> list[Essay]:
    """Load a folder or ZIP of submitted documents (``.docx``, ``.pdf``, ``.txt``), one essay per student, the
    student read from the file names as Canvas and Google Classroom name them (``docs/data-and-rubric-formats.md``).
    An essay's id is the student's Canvas user id, else their name; the name, file and late flag are its
    metadata. A file that cannot be read (a scanned PDF) is reported, with what to do, and left out."""
    p = Path(path)
    table = read_class_path(p, limits=limits)
    refuse_rows(p, len(table.rows), max_rows)
    for file, why in table.refused:
        report_once(p, f"{file}: {why} (left out)")
    if not table.rows:
        raise InputError(f"{p}: no essay could be read: {table.refused[0][0]}: {table.refused[0][1]}")
    essays = []
    for row in table.rows:
        metadata = {k: v for k, v in row.items() if k not in ("ID", "Essay") and v}
        raw = {"id": row.get("ID") or row["Student"], "text": row["Essay"], **metadata}
        essays.append(essay_from_row(raw, rubric, f"{p}: {row['File']}", {}))
    check_unique(essays, p)
    return essays


def load_essays(path: str | Path, rubric: Rubric, fmt: str = "auto", max_rows: int | None = MAX_ROWS) -> list[Essay]:
    """Load essays, picking the format from ``fmt`` or the file (.tsv = ASAP; a .jsonl whose rows are
    SummEval's = SummEval; a folder, .zip, .docx or .pdf = submissions; other .csv / .jsonl / .xlsx = the generic
    table); a file of more than ``max_rows`` rows (None: no limit) is refused before it is read."""
    p = Path(path)
    kind = fmt
    if fmt == "auto":
        suffix = p.suffix.lower()
        jsonl = suffix in {".jsonl", ".ndjson"}
        kind = "asap" if suffix == ".tsv" else "summeval" if jsonl and looks_like_summeval(p) else "table"
        if p.is_dir() or suffix in {".zip", ".docx", ".pdf"}:
            kind = "submissions"
    if kind == "submissions":
        return load_submissions(p, rubric, max_rows=max_rows)
    if kind == "asap":
        return load_asap(p, rubric, max_rows=max_rows)
    if kind not in {"table", "csv", "jsonl"} and p.suffix.lower() in JSONL_SUFFIXES:  # SummEval's, NIKL's lines
        check_rows(p, ".jsonl", max_rows)
    if kind == "summeval":
        return load_summeval(p, rubric)
    if kind == "summeval-sample" or kind.startswith("summeval-sample:"):
        systems = [s.strip() for s in kind.partition(":")[2].split(",") if s.strip()]
        return sample_summeval(load_summeval(p, rubric), systems=systems or None)
    if kind in {"nikl", "nikl-all"}:
        essays = load_nikl(p, rubric)
        return sample_nikl(essays) if kind == "nikl" else essays
    if kind in {"table", "csv", "jsonl"}:
        return load_table(p, rubric, max_rows)
    raise InputError(f"unknown data format {fmt!r}; use {', '.join(DATA_FORMATS)}")
