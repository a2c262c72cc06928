"""A class's gradebook: one row per student with a column per criterion and the total (points and percent),
the student's identifiers carried from the import, whether a teacher reviewed every score, and which backend
scored it; and the CSV layouts two gradebooks import.

* **Canvas** (Grades > Import): ``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section``, then one
  column per assignment, its second row ``Points Possible``, as Canvas's own gradebook export has them; a
  student is matched by ID, SIS User ID or SIS Login ID (here the SIS id and the email), a new assignment
  column (a name without Canvas's ``(id)``) creates the assignment.
* **Google Classroom** (a grade import from a sheet, and Classroom's own grade download): ``Last Name``,
  ``First Name``, ``Email Address``, then one column per assignment; a student is matched by email address.

Both carry the total as the assignment's grade (one column, points) and the criteria as columns beside it,
named ``<assignment>: <criterion>``. A score that is missing stays empty, and so does any total it is part of.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from madrag.csv_safe import csv_text

CANVAS_ID_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CLASSROOM_ID_COLUMNS = ("Last Name", "First Name", "Email Address")


@dataclass(frozen=True)
class Criterion:
    name: str
    min: int
    max: int


@dataclass(frozen=True)
class StudentRow:
    """One student's line of the gradebook (``points[c]`` None: no valid score for criterion c)."""

    essay_id: str
    name: str
    email: str
    sis_id: str
    points: dict[str, int | None]
    total: int | None
    possible: int
    percent: float | None
    reviewed: bool
    scored_by: str


def student_row(
    essay_id: str,
    who: dict[str, str],
    criteria: list[Criterion],
    finals: dict[str, int | None],
    reviewed: bool,
    scored_by: str,
) -> StudentRow:
    """A student's row from the scores in force (overrides applied) per criterion."""
    points = {c.name: finals.get(c.name) for c in criteria}
    possible = sum(c.max for c in criteria)
    known = [p for p in points.values() if p is not None]
    total = sum(known) if len(known) == len(points) and points else None
    percent = None if total is None or possible <= 0 else round(100 * total / possible, 1)
    return StudentRow(
        essay_id,
        who.get("name", ""),
        who.get("email", ""),
        who.get("sis_id", ""),
        points,
        total,
        possible,
        percent,
        reviewed,
        scored_by,
    )


def _csv(rows: list[list[Any]]) -> str:
    return csv_text(rows)


def _tail(r: StudentRow) -> list[Any]:
    return [r.total, r.possible, r.percent, "yes" if r.reviewed else "no", r.scored_by]


def plain_csv(rows: list[StudentRow], criteria: list[Criterion]) -> str:
    """madrag's gradebook: identifiers, a column per criterion, total points, possible, percent, reviewed."""
    head = ["student", "email", "sis_id", "essay_id", *[c.name for c in criteria]]
    head += ["total", "possible", "percent", "reviewed", "scored_by"]
    body = [[r.name, r.email, r.sis_id, r.essay_id, *[r.points[c.name] for c in criteria], *_tail(r)] for r in rows]
    return _csv([head, *body])


def _split(name: str) -> tuple[str, str]:
    first, _, last = name.strip().rpartition(" ")
    return (last, first) if first else (name.strip(), "")


def canvas_csv(rows: list[StudentRow], criteria: list[Criterion], assignment: str) -> str:
    """Canvas's gradebook import layout (see the module's docstring)."""
    columns = [assignment, *[f"{assignment}: {c.name}" for c in criteria]]
    possible = [rows[0].possible if rows else sum(c.max for c in criteria), *[c.max for c in criteria]]
    out: list[list[Any]] = [[*CANVAS_ID_COLUMNS, *columns], ["Points Possible", "", "", "", "", *possible]]
    for r in rows:
        last, first = _split(r.name)
        student = f"{last}, {first}" if first else last
        out.append([student or r.essay_id, "", r.sis_id, r.email, "", r.total, *[r.points[c.name] for c in criteria]])
    return _csv(out)


def classroom_csv(rows: list[StudentRow], criteria: list[Criterion], assignment: str) -> str:
    """Google Classroom's grade layout (see the module's docstring)."""
    out: list[list[Any]] = [[*CLASSROOM_ID_COLUMNS, assignment, *[f"{assignment}: {c.name}" for c in criteria]]]
    for r in rows:
        last, first = _split(r.name)
        out.append([last, first, r.email, r.total, *[r.points[c.name] for c in criteria]])
    return _csv(out)
