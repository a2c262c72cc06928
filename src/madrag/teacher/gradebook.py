"""A class's gradebook: one row per student with the grade in force per criterion (the teacher's, else the AI's:
:mod:`madrag.teacher.grades`), the total (points and percent), the student's identifiers carried from the
class import, whether a teacher reviewed every score, and which backend scored it; and the files each LMS
imports as they are, one assignment column (the total) unless the teacher asks for one per criterion.

The columns and matching rules each file follows, and where they come from, are in
``docs/gradebook-formats.md``; ``tests/unit/teacher/test_gradebook_formats.py`` reads every file back by those rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from madrag.files.csv_safe import csv_text
from madrag.teacher.columns import split_name, student_label
from madrag.teacher.grades import Grade

CANVAS_ID_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CLASSROOM_ID_COLUMNS = ("Last Name", "First Name", "Email Address")
MOODLE_ID_COLUMNS = ("First name", "Last name", "ID number", "Email address")
# Canvas's importer drops every column whose title holds one of these (case-sensitive) as read-only
CANVAS_NOT_ASSIGNMENTS = re.compile(
    "Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|Override Score|"
    "Override Grade|Override Status"
)


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
    first: str
    last: str
    email: str
    sis_id: str
    section: str
    grades: dict[str, Grade]
    total: int | None
    possible: int
    percent: float | None
    reviewed: bool
    scored_by: str

    @property
    def points(self) -> dict[str, int | None]:
        return {c: g.points for c, g in self.grades.items()}

    @property
    def graded_by(self) -> str:
        """``teacher``, ``AI``, or which criteria the teacher graded (``teacher: Ideas; AI: Style``)."""
        mine = [c for c, g in self.grades.items() if g.teacher]
        if len(mine) == len(self.grades):
            return "teacher" if mine else "AI"
        if not mine:
            return "AI"
        rest = [c for c in self.grades if c not in mine]
        return f"teacher: {', '.join(mine)}; AI: {', '.join(rest)}"


def student_row(
    essay_id: str,
    who: dict[str, str],
    criteria: list[Criterion],
    grades: dict[str, Grade],
    scored_by: str,
) -> StudentRow:
    """A student's row from the grades in force per criterion (a criterion without one: missing)."""
    chosen = {c.name: grades.get(c.name, Grade(None, None, "missing")) for c in criteria}
    points = [g.points for g in chosen.values()]
    possible = sum(c.max for c in criteria)
    total = sum(p for p in points if p is not None) if points and None not in points else None
    percent = None if total is None or possible <= 0 else round(100 * total / possible, 1)
    first, last = split_name(who)
    return StudentRow(
        essay_id=essay_id,
        name=student_label(who, essay_id),
        first=first,
        last=last,
        email=who.get("email", ""),
        sis_id=who.get("sis_id", ""),
        section=who.get("section", ""),
        grades=chosen,
        total=total,
        possible=possible,
        percent=percent,
        reviewed=bool(chosen) and all(g.reviewed for g in chosen.values()),
        scored_by=scored_by,
    )


def _tail(r: StudentRow) -> list[Any]:
    return [r.total, r.possible, r.percent, "yes" if r.reviewed else "no", r.graded_by, r.scored_by]


def plain_csv(rows: list[StudentRow], criteria: list[Criterion]) -> str:
    """madrag's gradebook: identifiers, a column per criterion, total points, possible, percent, reviewed, who
    graded it."""
    head = ["student", "first_name", "last_name", "email", "sis_id", "section", "essay_id"]
    head += [c.name for c in criteria] + ["total", "possible", "percent", "reviewed", "graded_by", "scored_by"]
    ids = ("name", "first", "last", "email", "sis_id", "section", "essay_id")  # the StudentRow fields of the head
    body = [[*(getattr(r, f) for f in ids), *(r.points[c.name] for c in criteria), *_tail(r)] for r in rows]
    return csv_text([head, *body])


def _assignments(
    rows: list[StudentRow], criteria: list[Criterion], title: str, by_criterion: bool
) -> tuple[list[str], list[int], list[list[int | None]]]:
    """(column titles, points possible, each row's grades): the total as one assignment, or one per criterion."""
    if by_criterion:
        names = [f"{title}: {c.name}" for c in criteria]
        return names, [c.max for c in criteria], [[r.points[c.name] for c in criteria] for r in rows]
    return [title], [sum(c.max for c in criteria)], [[r.total] for r in rows]


def canvas_title(title: str) -> str:
    """An assignment title Canvas's importer reads as a new assignment: none of the phrases of its read-only
    columns (``Final Score`` ...; written in lower case, which it does not drop), and no trailing ``(digits)``
    (which it reads as an existing assignment's id)."""
    title = " ".join(title.split()) or "Essay"
    title = CANVAS_NOT_ASSIGNMENTS.sub(lambda m: m.group(0).lower(), title)
    return re.sub(r"\((\d+)\)$", r"[\1]", title)


def canvas_header(title: str, assignment_id: str = "") -> str:
    """The assignment column's title as Canvas's importer reads it: ``Title (id)`` targets the existing assignment
    with that id (a re-import updates it); without an id, the title alone (:func:`canvas_title`), which Canvas
    matches to an assignment of the course with that exact title, else creates a new one."""
    assignment_id = assignment_id.strip()
    if assignment_id and not (assignment_id.isascii() and assignment_id.isdigit()):
        raise ValueError(
            f"a Canvas assignment id is a number (the digits at the end of its address), not {assignment_id!r}"
        )
    return f"{canvas_title(title)} ({assignment_id})" if assignment_id else canvas_title(title)


def canvas_matching(rows: list[StudentRow]) -> str:
    """How Canvas will find each student of the file, in words: by SIS user id, by login (the email), or by name
    alone, with how many students each way."""
    by_sis = sum(1 for r in rows if r.sis_id)
    by_login = sum(1 for r in rows if not r.sis_id and r.email)
    by_name = len(rows) - by_sis - by_login
    ways = (
        (by_sis, "by SIS user id"),
        (by_login, "by login (the email, when it is the student's Canvas login)"),
        (by_name, "by name only"),
    )
    text = "Canvas will match " + (", ".join(f"{n} {way}" for n, way in ways if n) or "no student") + "."
    if by_name:
        text += (
            " A student matched by name alone must have exactly that name in Canvas (the class file had no email"
            " or SIS id for them): two students of one name, or a name spelled otherwise, are not matched."
        )
    return text


def canvas_student(r: StudentRow) -> str:
    """Canvas's ``Student`` cell: the sortable name ``Last, First`` (just the name known, when only one is)."""
    if r.last and r.first:
        return f"{r.last}, {r.first}"
    return r.last or r.first or r.name


def canvas_csv(
    rows: list[StudentRow],
    criteria: list[Criterion],
    assignment: str,
    by_criterion: bool = False,
    assignment_id: str = "",
) -> str:
    """Canvas's gradebook import (see ``docs/gradebook-formats.md``); ``assignment_id`` targets an existing
    assignment (the total; one assignment per criterion takes no id)."""
    if by_criterion and assignment_id.strip():
        raise ValueError("an assignment id targets one assignment (the total), not one per criterion")
    title = canvas_title(assignment) if by_criterion else canvas_header(assignment, assignment_id)
    names, possible, grades = _assignments(rows, criteria, title, by_criterion)
    body = (
        [canvas_student(r), "", r.sis_id, r.email, r.section, *points] for r, points in zip(rows, grades, strict=True)
    )
    return csv_text([[*CANVAS_ID_COLUMNS, *names], ["Points Possible", "", "", "", "", *possible], *body])


def classroom_csv(
    rows: list[StudentRow], criteria: list[Criterion], assignment: str, by_criterion: bool = False
) -> str:
    """Google Classroom's grade sheet (see ``docs/gradebook-formats.md``)."""
    names, _possible, grades = _assignments(rows, criteria, assignment, by_criterion)
    body = ([r.last, r.first, r.email, *points] for r, points in zip(rows, grades, strict=True))
    return csv_text([[*CLASSROOM_ID_COLUMNS, *names], *body])


def moodle_csv(rows: list[StudentRow], criteria: list[Criterion], assignment: str, by_criterion: bool = False) -> str:
    """Moodle's CSV grade import (see ``docs/gradebook-formats.md``)."""
    names, _possible, grades = _assignments(rows, criteria, assignment, by_criterion)
    body = ([r.first, r.last, r.sis_id, r.email, *points] for r, points in zip(rows, grades, strict=True))
    return csv_text([[*MOODLE_ID_COLUMNS, *names], *body])
