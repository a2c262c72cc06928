"""Reading a class file whatever its columns are called: a Google Forms or LMS export ("Email Address",
"Response", "SIS User ID", ...) is mapped onto madrag's essay layout (``id``, ``text`` and a column per trait
score) by a column-mapping step, and the student identifiers are kept apart, as the class roster the gradebook
carries (email, SIS id, name per essay id)."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

from madrag.csv_safe import raw_csv_text
from madrag.errors import InputError

ROSTER_FIELDS = ("email", "sis_id", "name")
GUESSES: dict[str, tuple[str, ...]] = {
    "text": (r"^(essay|response|answer|text|submission|your essay)\b", r"essay|response|answer"),
    "email": (r"^e-?mail( address)?$", r"e-?mail"),
    "sis_id": (r"^(sis( user)? id|student id|student number|id number)$", r"\bsis\b|student (id|number)"),
    "name": (r"^(student( name)?|name|full name)$", r"\bname\b"),
    "id": (r"^id$", r"^(essay[ _]?id)$"),
}


@dataclass
class Mapping:
    """Which column holds what (a column's header; None: not in the file). ``scores`` maps a trait to its
    column of the teacher's own scores."""

    text: str | None = None
    id: str | None = None
    email: str | None = None
    sis_id: str | None = None
    name: str | None = None
    scores: dict[str, str] = field(default_factory=dict)


def read_table(data: str) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of a CSV (or tab-separated) export."""
    sample = data[:4096]
    delimiter = "\t" if sample.count("\t") > sample.count(",") else ","
    reader = csv.DictReader(io.StringIO(data.lstrip("\ufeff")), delimiter=delimiter)
    header = [h for h in reader.fieldnames or [] if h is not None]
    if not header:
        raise InputError("the file has no header row")
    return header, [{k: (v or "") for k, v in row.items() if k is not None} for row in reader]


def _find(header: list[str], patterns: tuple[str, ...], taken: set[str]) -> str | None:
    for pattern in patterns:
        for column in header:
            if column not in taken and re.search(pattern, column.strip(), re.IGNORECASE):
                return column
    return None


def _longest(header: list[str], rows: list[dict[str, str]], taken: set[str]) -> str | None:
    """The free column with the longest answers (a Forms question's column is named by the question)."""
    free = [c for c in header if c not in taken]
    if not free or not rows:
        return None
    best = max(free, key=lambda c: sum(len(r.get(c, "")) for r in rows))
    return best if sum(len(r.get(best, "")) for r in rows) / len(rows) >= 200 else None


def guess(header: list[str], traits: list[str], rows: list[dict[str, str]] | None = None) -> Mapping:
    """A first mapping from the column names, else (the essay) from the longest answers (the teacher can
    change it)."""
    taken: set[str] = set()
    found: dict[str, str | None] = {}
    for name in ("email", "sis_id", "id", "text", "name"):
        found[name] = _find(header, GUESSES[name], taken)
        if found[name]:
            taken.add(found[name])  # type: ignore[arg-type]
    if found["text"] is None:
        found["text"] = _longest(header, rows or [], taken)
        taken.add(found["text"] or "")
    scores = {t: c for t in traits for c in header if c not in taken and c.strip().lower() == t.lower()}
    return Mapping(scores=scores, **found)


def is_native(header: list[str]) -> bool:
    """The file is in madrag's own layout already (``id`` and ``text`` columns)."""
    return "id" in header and "text" in header


def apply(rows: list[dict[str, str]], mapping: Mapping) -> tuple[str, dict[str, dict[str, str]]]:
    """(madrag CSV, roster by essay id) of the rows under ``mapping``. An essay's id is its id column, else
    the student's email, SIS id or name, else its row number."""
    if mapping.text is None:
        raise InputError("choose the column that holds the essays")
    traits = list(mapping.scores)
    table: list[list[str]] = [["id", "text", *traits]]
    roster: dict[str, dict[str, str]] = {}
    for number, row in enumerate(rows, 2):
        who = {f: row.get(getattr(mapping, f) or "", "").strip() for f in ROSTER_FIELDS}
        chosen = [row.get(mapping.id or "", "").strip(), who["email"], who["sis_id"], who["name"]]
        essay_id = next((c for c in chosen if c), f"row {number}")
        table.append([essay_id, row.get(mapping.text, ""), *(row.get(c, "") for c in mapping.scores.values())])
        roster[essay_id] = {k: v for k, v in who.items() if v}
    return raw_csv_text(table), roster  # madrag's own upload format, read back as it is
