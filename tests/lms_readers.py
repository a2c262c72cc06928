"""Readers of gradebook files as each LMS reads them on import, written from the LMS's own rules (quoted in
``docs/gradebook-formats.md``), not from madrag's writer: Canvas's ``GradebookImporter`` (which columns are
student columns, which are assignments, the ``Points Possible`` row, how a student is matched) and Moodle's CSV
grade import (a user found by the mapped field; an empty grade or ``-`` is no grade)."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

# Canvas: columns never read as assignments (GradebookImporter::NON_ASSIGNMENT_COLUMN_HEADERS, matched anywhere
# in the title, so unposted variants are caught too)
CANVAS_NON_ASSIGNMENT = re.compile(
    "Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|Override Score|"
    "Override Grade|Override Status"
)
CANVAS_TITLE_AND_ID = re.compile(r"\A(.*)\s+\((\d+)\)\Z")


@dataclass
class CanvasUser:
    """A student enrolled in the Canvas course: Canvas id, SIS user id, login (pseudonym unique id), name."""

    id: str
    sis_user_id: str = ""
    login_id: str = ""
    name: str = ""
    sortable_name: str = ""


@dataclass
class CanvasImport:
    """What Canvas would import: each assignment (title, existing id or None: a new one) with its points, and
    each matched user's grades (None: no score). ``unmatched`` are rows that would create no-one (new users)."""

    assignments: list[tuple[str, str | None]] = field(default_factory=list)
    points: dict[str, float] = field(default_factory=dict)
    grades: dict[str, dict[str, float | None]] = field(default_factory=dict)
    unmatched: list[list[str]] = field(default_factory=list)


def _canvas_student_columns(header: list[str]) -> tuple[int, int | None, int | None]:
    """(number of student columns, SIS User ID column, SIS Login ID column), as ``update_column_count``."""
    if not (len(header) > 3 and "Student" in header[0] and "ID" in header[1]):
        raise ValueError("Invalid header row")
    count, sis, login = 3, None, None
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        login, count = 2, 4
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        extra = 1 if re.search(r"Integration\s+ID", header[4] if len(header) > 4 else "") else 0
        sis, login, count = 2, 3, 5 + extra
        if re.search(r"Root\s+Account", header[4 + extra] if len(header) > 4 + extra else ""):
            count += 1
    if "Section" not in header[count - 1]:
        raise ValueError("Invalid header row: the last student column is not Section")
    return count, sis, login


def _canvas_user(row: list[str], users: list[CanvasUser], sis: int | None, login: int | None) -> CanvasUser | None:
    """``process_student``: by Canvas id, else SIS User ID, else SIS Login ID, else name or sortable name."""
    for column, attr in ((1, "id"), (sis, "sis_user_id"), (login, "login_id")):
        value = row[column].strip() if column is not None and column < len(row) else ""
        found = next((u for u in users if value and getattr(u, attr) == value), None)
        if found is not None:
            return found
    return next((u for u in users if row[0] in (u.name, u.sortable_name)), None)


def _canvas_grade(cell: str) -> float | None:
    cell = cell.strip()
    return None if cell in ("", "-") else float(cell.replace(",", "."))


def read_canvas(text: str, users: list[CanvasUser]) -> CanvasImport:
    """A Canvas gradebook CSV read as Canvas's importer reads it, against the course's ``users``."""
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    count, sis, login = _canvas_student_columns(header)
    columns = [i for i in range(count, len(header)) if not CANVAS_NON_ASSIGNMENT.search(header[i])]
    out = CanvasImport()
    for i in columns:
        found = CANVAS_TITLE_AND_ID.match(header[i])
        out.assignments.append((found.group(1), found.group(2)) if found else (header[i], None))
    for row in rows[1:]:
        if row and "Points Possible" in row[0]:
            out.points = {header[i]: float(row[i]) for i in columns if row[i].strip()}
            continue
        if all(re.fullmatch(r"\s*(Muted|Manual Posting.*)?\s*", c, re.I) for c in row):
            continue
        user = _canvas_user(row, users, sis, login)
        if user is None:
            out.unmatched.append(row)
            continue
        out.grades[user.id] = {header[i]: _canvas_grade(row[i]) for i in columns}
    return out


def read_moodle(text: str, map_from: str, values: dict[str, str]) -> dict[str, dict[str, float | None]]:
    """A CSV read as Moodle's grade import reads it when the teacher maps the file's ``map_from`` column to a
    user field: ``values`` maps that field's value to the Moodle user; the other columns are grade items."""
    reader = csv.DictReader(io.StringIO(text))
    items = [c for c in reader.fieldnames or [] if c not in ("First name", "Last name", "ID number", "Email address")]
    out: dict[str, dict[str, float | None]] = {}
    for row in reader:
        user = values.get(row[map_from])  # Moodle compares the value as it is (emails case-sensitively)
        if user is None:
            continue
        out[user] = {i: None if row[i].strip() in ("", "-") else float(row[i]) for i in items}
    return out
