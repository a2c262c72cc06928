"""Loaders for the Kaggle ASAP layout, generic CSV / JSONL files of ``id, text[, trait scores]`` and SummEval.

Every problem with the input is raised as a one-line :class:`InputError`.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.rubric import Rubric, Trait

ASAP_REQUIRED = ("essay_id", "essay_set", "essay")
_RATER_COL = re.compile(r"^rater(\d+)_(.+)$")


def _read_text(path: Path, encodings: Iterable[str]) -> str:
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


def _parse_score(raw: str, where: str) -> float | None:
    raw = raw.strip()
    if raw == "" or raw.lower() in {"nan", "na", "none"}:
        return None
    try:
        return float(raw)
    except ValueError as exc:
        raise InputError(f"{where}: score {raw!r} is not a number") from exc


def _check_unique(essays: list[Essay], path: Path) -> None:
    seen: set[str] = set()
    for essay in essays:
        if essay.id in seen:
            raise InputError(f"{path}: duplicate essay id {essay.id!r}")
        seen.add(essay.id)


def _check_range(essay: Essay, rubric: Rubric, where: str) -> None:
    for trait in rubric.traits:
        for score in essay.rater_scores.get(trait.name, []):
            if not trait.contains(score):
                raise InputError(
                    f"{where}: essay {essay.id}: {trait.name} score {score:g} outside [{trait.min}, {trait.max}]"
                )


def load_asap(path: str | Path, rubric: Rubric, essay_set: int | None = None) -> list[Essay]:
    """Load essays in the Kaggle ``training_set_rel3.tsv`` layout.

    Works on the shared UTF-8 file of sets 7 and 8 and on the original full file (latin-1). Rater trait
    columns ``rater{i}_{column}`` are mapped to rubric traits by each trait's ``column`` field; only rows of
    ``essay_set`` (default: the rubric's ``essay_set``) are kept.
    """
    p = Path(path)
    text = _read_text(p, ("utf-8", "latin-1"))
    reader = csv.DictReader(text.splitlines(), delimiter="\t")
    header = reader.fieldnames or []
    missing = [c for c in ASAP_REQUIRED if c not in header]
    if missing:
        raise InputError(f"{p}: missing column(s) {missing}; is this the ASAP training_set_rel3.tsv layout?")
    wanted_set = essay_set if essay_set is not None else rubric.essay_set
    columns = _asap_rater_columns(header, rubric, p)
    essays: list[Essay] = []
    for line_no, row in enumerate(reader, start=2):
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
    _check_unique(essays, p)
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
    body = (row.get("essay") or "").strip()
    if not body:
        raise InputError(f"{where}: essay {row.get('essay_id')!r} is empty")
    scores: dict[str, list[float]] = {}
    ids: dict[str, list[int]] = {}
    for trait_name, cols in columns.items():
        for rater_idx, col in cols:
            value = _parse_score(row.get(col) or "", f"{where} column {col}")
            if value is not None:
                scores.setdefault(trait_name, []).append(value)
                ids.setdefault(trait_name, []).append(rater_idx)
    fold_raw = (row.get("fold") or "").strip()
    essay = Essay(
        id=str(row["essay_id"]).strip(),
        text=body,
        prompt=rubric.prompt,
        essay_set=essay_set,
        fold=int(fold_raw) if fold_raw else None,
        rater_scores=scores,
        rater_ids=ids,
    )
    _check_range(essay, rubric, where)
    return essay


def _generic_essay(raw: dict[str, Any], rubric: Rubric, where: str) -> Essay:
    if "id" not in raw or "text" not in raw:
        raise InputError(f"{where}: needs 'id' and 'text' fields, got {sorted(raw)}")
    body = str(raw["text"] or "").strip()
    if not body:
        raise InputError(f"{where}: essay {raw['id']!r} is empty")
    known = {"id", "text", "prompt", "fold", "source"}
    trait_names = {t.name.casefold(): t.name for t in rubric.traits}
    scores: dict[str, list[float]] = {}
    ids: dict[str, list[int]] = {}
    metadata: dict[str, Any] = {}
    for key, value in raw.items():
        if key in known:
            continue
        base, rater_idx = key, 0
        if m := _RATER_COL.match(key):
            rater_idx, base = int(m.group(1)) - 1, m.group(2)
        trait = trait_names.get(base.casefold())
        if trait is None:
            metadata[key] = value
            continue
        score = _parse_score(str(value) if value is not None else "", f"{where} field {key}")
        if score is not None:
            scores.setdefault(trait, []).append(score)
            ids.setdefault(trait, []).append(rater_idx)
    fold = raw.get("fold")
    source = str(raw.get("source") or "").strip()
    essay = Essay(
        id=str(raw["id"]).strip(),
        text=body,
        source=source or None,
        prompt=str(raw.get("prompt") or rubric.prompt),
        fold=int(fold) if fold not in (None, "") else None,
        rater_scores=scores,
        rater_ids=ids,
        metadata=metadata,
    )
    _check_range(essay, rubric, where)
    return essay


def _jsonl_rows(p: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    """``(where, object)`` for each non-empty line of a JSONL file; an InputError for a line that is not one."""
    rows: list[tuple[str, dict[str, Any]]] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{p}:{line_no}: not valid JSON: {exc.msg}") from exc
        if not isinstance(obj, dict):
            raise InputError(f"{p}:{line_no}: each line must be a JSON object")
        rows.append((f"{p}:{line_no}", obj))
    return rows


def load_table(path: str | Path, rubric: Rubric) -> list[Essay]:
    """Load a generic CSV or JSONL of ``id, text[, prompt, fold, source, <trait>, rater<i>_<trait>...]``.

    A column named like a rubric trait is a single score; ``rater1_<trait>``, ``rater2_<trait>`` are several.
    ``source`` is a text the essay is written from (e.g. the article a summary summarises), shown in the prompts.
    """
    p = Path(path)
    text = _read_text(p, ("utf-8",))
    rows: list[tuple[str, dict[str, Any]]] = []
    if p.suffix.lower() in {".jsonl", ".ndjson"}:
        rows = _jsonl_rows(p, text)
    else:
        reader = csv.DictReader(text.splitlines(keepends=True))
        header = reader.fieldnames or []
        if "id" not in header or "text" not in header:
            raise InputError(f"{p}: missing column(s) {[c for c in ('id', 'text') if c not in header]}")
        rows = [(f"{p}:{i}", dict(r)) for i, r in enumerate(reader, start=2)]
    essays = [_generic_essay(raw, rubric, where) for where, raw in rows]
    if not essays:
        raise InputError(f"{p}: no essays")
    _check_unique(essays, p)
    return essays


SUMMEVAL_FIELDS = ("id", "text", "decoded", "expert_annotations")
"""The fields of a row of SummEval's ``model_annotations.aligned.paired.jsonl`` that madrag reads."""

MTEB_SUMMEVAL_FIELDS = ("id", "text", "machine_summaries")
"""The fields (besides one list of scores per criterion) of a row of the ``mteb/summeval`` layout."""


def _annotation_key(trait: Trait) -> str:
    """The SummEval field of a rubric trait: its ``column``, else its name (compared case-insensitively)."""
    return (trait.column or trait.name).casefold()


def _expert_scores(
    raw: dict[str, Any], rubric: Rubric, where: str
) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """Each rubric trait's expert scores (one per annotator, in order) from ``expert_annotations``."""
    annotations = raw["expert_annotations"]
    if not isinstance(annotations, list) or not all(isinstance(a, dict) for a in annotations):
        raise InputError(f"{where}: 'expert_annotations' must be a list of objects, one per annotator")
    scores: dict[str, list[float]] = {}
    ids: dict[str, list[int]] = {}
    for trait in rubric.traits:
        key = _annotation_key(trait)
        for rater_idx, annotation in enumerate(annotations):
            found = {k.casefold(): v for k, v in annotation.items()}
            if key not in found:
                raise InputError(f"{where}: annotator {rater_idx + 1} gives no {key!r} (rubric trait {trait.name!r})")
            value = _parse_score(str(found[key]) if found[key] is not None else "", f"{where} {key}")
            if value is not None:
                scores.setdefault(trait.name, []).append(value)
                ids.setdefault(trait.name, []).append(rater_idx)
    return scores, ids


def _summary(
    raw: dict[str, Any],
    summary: Any,
    essay_id: str,
    scores: tuple[dict[str, list[float]], dict[str, list[int]]],
    metadata: dict[str, Any],
    rubric: Rubric,
    where: str,
) -> Essay:
    """One summary as an essay: its text, the row's article as ``source``, its (scores, rater ids) and
    ``metadata`` besides the article's id."""
    text, article = str(summary or "").strip(), str(raw["text"] or "").strip()
    if not text or not article:
        raise InputError(f"{where}: {essay_id!r} has an empty {'summary' if not text else 'source text'}")
    fold = raw.get("fold")
    essay = Essay(
        id=essay_id,
        text=text,
        source=article,
        prompt=rubric.prompt,
        fold=int(fold) if fold not in (None, "") else None,
        rater_scores=scores[0],
        rater_ids=scores[1],
        metadata={"article_id": str(raw["id"]), **metadata},
    )
    _check_range(essay, rubric, where)
    return essay


def _paired_summary(raw: dict[str, Any], rubric: Rubric, where: str) -> Essay:
    """A row of the paired layout: one summary, each expert's scores as one rater's."""
    missing = [f for f in SUMMEVAL_FIELDS if f not in raw]
    if missing:
        raise InputError(f"{where}: missing SummEval field(s) {missing}")
    model_id = str(raw.get("model_id") or "").strip()
    essay_id = f"{raw['id']}_{model_id}" if model_id else str(raw["id"])
    metadata = {"model_id": model_id} if model_id else {}
    return _summary(raw, raw["decoded"], essay_id, _expert_scores(raw, rubric, where), metadata, rubric, where)


def _mteb_summaries(raw: dict[str, Any], rubric: Rubric, where: str) -> list[Essay]:
    """A row of the ``mteb/summeval`` layout: an article's ``machine_summaries`` and, per criterion, a list of
    each summary's score (already the experts' average: one rater)."""
    missing = [f for f in MTEB_SUMMEVAL_FIELDS if f not in raw]
    if missing:
        raise InputError(f"{where}: missing SummEval field(s) {missing}")
    summaries = raw["machine_summaries"]
    found = {k.casefold(): v for k, v in raw.items()}
    columns: dict[str, list[Any]] = {}
    for trait in rubric.traits:
        values = found.get(_annotation_key(trait))
        if not isinstance(summaries, list) or not isinstance(values, list) or len(values) != len(summaries):
            raise InputError(f"{where}: {_annotation_key(trait)!r} must list one score per machine summary")
        columns[trait.name] = values
    essays = []
    for i, summary in enumerate(summaries):
        scores: dict[str, list[float]] = {}
        for name, values in columns.items():
            value = _parse_score(str(values[i]) if values[i] is not None else "", f"{where} {name}")
            if value is not None:
                scores[name] = [value]
        one_rater = (scores, {name: [0] for name in scores})
        essays.append(_summary(raw, summary, f"{raw['id']}_{i}", one_rater, {"summary_index": i}, rubric, where))
    return essays


def load_summeval(path: str | Path, rubric: Rubric) -> list[Essay]:
    """Load SummEval summaries from a JSONL file in either of its two layouts; each summary is an essay whose
    text is the summary and whose ``source`` is its article.

    * ``model_annotations.aligned.paired.jsonl`` (SummEval's repository): one row per (article, system
      summary) with ``id`` (the article), ``text`` (the article), ``decoded`` (the summary), ``model_id`` and
      ``expert_annotations`` (one object per expert: ``coherence``, ``consistency``, ``fluency``,
      ``relevance``; other fields are ignored). The essay id is ``<id>_<model_id>``; every expert's score is
      one rater's, so the human reference (the raters' mean) is the experts' average, as seed 002 uses it.
    * ``mteb/summeval`` (the HuggingFace copy seed 002 sampled, written as JSONL): one row per article with
      ``id``, ``text``, ``machine_summaries`` and per criterion the list of each summary's experts' average.
      The essay id is ``<id>_<index>``.

    A rubric trait is matched to a criterion by its ``column``, else by its name (case-insensitive).
    """
    p = Path(path)
    essays: list[Essay] = []
    for where, raw in _jsonl_rows(p, _read_text(p, ("utf-8",))):
        if "machine_summaries" in raw:
            essays += _mteb_summaries(raw, rubric, where)
        else:
            essays.append(_paired_summary(raw, rubric, where))
    if not essays:
        raise InputError(f"{p}: no summaries")
    _check_unique(essays, p)
    return essays


def _looks_like_summeval(path: Path) -> bool:
    """Whether the first row of a JSONL file is SummEval's: ``decoded`` and ``expert_annotations`` (paired
    layout) or ``machine_summaries`` (``mteb/summeval``)."""
    try:
        with path.open(encoding="utf-8") as fh:
            first = next((line for line in fh if line.strip()), "")
        row = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError):
        return False  # the table loader says what is wrong with the file
    if not isinstance(row, dict):
        return False
    return ("decoded" in row and "expert_annotations" in row) or "machine_summaries" in row


DATA_FORMATS = ("auto", "asap", "csv", "jsonl", "summeval")
"""The values of ``--format``."""


def load_essays(path: str | Path, rubric: Rubric, fmt: str = "auto") -> list[Essay]:
    """Load essays, picking the format from ``fmt`` or the file (.tsv = ASAP; a .jsonl whose rows are
    SummEval's = SummEval; other .csv / .jsonl = the generic table)."""
    p = Path(path)
    kind = fmt
    if fmt == "auto":
        suffix = p.suffix.lower()
        jsonl = suffix in {".jsonl", ".ndjson"}
        kind = "asap" if suffix == ".tsv" else "summeval" if jsonl and _looks_like_summeval(p) else "table"
    if kind == "asap":
        return load_asap(p, rubric)
    if kind == "summeval":
        return load_summeval(p, rubric)
    if kind in {"table", "csv", "jsonl"}:
        return load_table(p, rubric)
    raise InputError(f"unknown data format {fmt!r}; use {', '.join(DATA_FORMATS)}")
