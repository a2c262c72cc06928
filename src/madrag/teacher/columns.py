"""Reading a class file whatever its columns are called: a Google Forms or LMS export ("Email Address",
"Response", "SIS User ID", ...) is mapped onto madrag's essay layout (``id``, ``text`` and a column per trait
score) by a column-mapping step, and the student identifiers are kept apart, as the class roster the gradebook
carries (email, SIS id, name or first and last name, section per essay id). A student who sent the form twice
(the same id, email, SIS id or name) has one essay: the later row of the file (a Forms export lists answers in
the order they came), and the replacement is reported."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from madrag.errors import InputError
from madrag.files.csv_safe import raw_csv_text

ROSTER_FIELDS = ("email", "sis_id", "name", "first_name", "last_name", "section")
GUESSES: dict[str, tuple[str, ...]] = {
    "text": (r"^(essay|response|answer|text|submission|your essay)\b", r"essay|response|answer"),
    "email": (r"^e-?mail( address)?$", r"e-?mail"),
    "sis_id": (r"^(sis( user)? id|student id|student number|id number)$", r"\bsis\b|student (id|number)"),
    "id": (r"^id$", r"^(essay[ _]?id)$"),
    "first_name": (r"^(student'?s? )?(first|given)[ _]?name$", r"\b(first|given) ?name\b|forename"),
    "last_name": (r"^(student'?s? )?(last|family|sur)[ _]?name$", r"\b(last|family) ?name\b|surname"),
    "name": (r"^(student( name)?|(your |full |student'?s? )?name)$", r"\bname\b"),
    "section": (r"^(section|period|class period|course section)$", r"\bsection\b|\bperiod\b"),
}
GUESS_ORDER = ("email", "sis_id", "id", "text", "first_name", "last_name", "name", "section")


@dataclass
class Mapping:
    """Which column holds what (a column's header; None: not in the file). ``scores`` maps a trait to its
    column of the teacher's own scores."""

    text: str | None = None
    id: str | None = None
    email: str | None = None
    sis_id: str | None = None
    name: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    section: str | None = None
    scores: dict[str, str] = field(default_factory=dict)


@dataclass
class Mapped:
    """The rows read under a mapping: madrag's CSV, the roster by essay id, and each resubmission (the essay
    id, the row replaced, the row kept)."""

    text: str
    roster: dict[str, dict[str, str]]
    replaced: list[tuple[str, int, int]] = field(default_factory=list)


MIN_MEDIAN_WORDS = 5
"""An essay column whose answers have a median under this many words does not hold essays (a name, a date, a
score), unless the teacher says it does."""
_NOT_PROSE = (
    ("scores such as 5 / 10", re.compile(r"\s*-?\d+(\.\d+)?\s*(/|out of|of)\s*\d+(\.\d+)?\s*", re.IGNORECASE)),
    ("numbers", re.compile(r"\s*-?\d+([.,]\d+)?\s*%?\s*")),
    ("dates or times", re.compile(r"[\d ]*\d[\d ]*[/.\-:][\d/.\-: ]*(am|pm)?\s*", re.IGNORECASE)),
)


def prose_question(column: str, values: list[str]) -> str | None:
    """A question for the teacher when the column chosen as the essays does not hold prose: most answers are
    dates or times, numbers or scores such as ``5 / 10``, or the median answer is under
    :data:`MIN_MEDIAN_WORDS` words (empty answers left out); None when it looks like essays."""
    filled = [v.strip() for v in values if v.strip()]
    if not filled:
        return f"the column {column!r} you chose as the essays is empty in every row: choose the column with the essays"
    for what, pattern in _NOT_PROSE:
        if sum(1 for v in filled if pattern.fullmatch(v)) * 2 > len(filled):
            return (
                f"the column {column!r} you chose as the essays holds {what} (for example {filled[0][:40]!r}), not "
                "essays: choose the column with the essays, or tick 'this column holds the essays'"
            )
    words = sorted(len(v.split()) for v in filled)
    median = words[len(words) // 2]
    if median < MIN_MEDIAN_WORDS:
        return (
            f"the answers in the column {column!r} you chose as the essays are {median} "
            f"word{'s' if median != 1 else ''} long (the median): is it the essays? Choose the column with the "
            "essays, or tick 'this column holds the essays'"
        )
    return None


def split_name(who: dict[str, str]) -> tuple[str, str]:
    """(first, last) name of a roster entry: its own first and last name, else its full name split (``Last,
    First``; else the last word is the last name; a single word is a first name)."""
    first, last = who.get("first_name", "").strip(), who.get("last_name", "").strip()
    if first or last:
        return first, last
    name = " ".join(who.get("name", "").split())
    if "," in name:
        last, _, first = name.partition(",")
        return first.strip(), last.strip()
    head, _, tail = name.rpartition(" ")
    return (head, tail) if head else (tail, "")


def student_label(who: dict[str, str], fallback: str) -> str:
    """How a student is shown on every teacher page: the mapped name (or first and last name), else the email,
    else the SIS id, else ``fallback`` (the essay id)."""
    first, last = who.get("first_name", "").strip(), who.get("last_name", "").strip()
    name = who.get("name", "").strip() or " ".join(p for p in (first, last) if p)
    return name or who.get("email", "").strip() or who.get("sis_id", "").strip() or fallback


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
    for name in GUESS_ORDER:
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


def _essay_id(row: dict[str, str], mapping: Mapping, who: dict[str, str], number: int) -> str:
    full = " ".join(p for p in (who["first_name"], who["last_name"]) if p)
    chosen = [row.get(mapping.id or "", "").strip(), who["email"], who["sis_id"], who["name"], full]
    return next((c for c in chosen if c), f"row {number}")


def apply(rows: list[dict[str, str]], mapping: Mapping) -> Mapped:
    """The rows under ``mapping``. An essay's id is its id column, else the student's email, SIS id or name,
    else its row number; a later row with the same id replaces the earlier one."""
    if mapping.text is None:
        raise InputError("choose the column that holds the essays")
    kept: dict[str, tuple[int, dict[str, str]]] = {}
    roster: dict[str, dict[str, str]] = {}
    replaced: list[tuple[str, int, int]] = []
    for number, row in enumerate(rows, 2):
        who = {f: row.get(getattr(mapping, f) or "", "").strip() for f in ROSTER_FIELDS}
        essay_id = _essay_id(row, mapping, who, number)
        if essay_id in kept:
            replaced.append((essay_id, kept[essay_id][0], number))
        essay = {"id": essay_id, "text": row.get(mapping.text, "")}
        kept[essay_id] = (number, {**essay, **{t: row.get(c, "") for t, c in mapping.scores.items()}})
        roster[essay_id] = {k: v for k, v in who.items() if v}
    table = [["id", "text", *mapping.scores]]
    table += [[essay[k] for k in table[0]] for _number, essay in kept.values()]
    return Mapped(raw_csv_text(table), roster, replaced)  # madrag's own upload format, read back as it is
