"""The gradebook files against each LMS's documented import rules (``docs/gradebook-formats.md``): written by
madrag, read back by the readers of ``tests/lms_readers.py`` (Canvas's importer, Moodle's CSV import), and the
same grade per student comes out, the teacher's where the teacher gave one. Also the one grade rule itself and
the names every file and page shows."""

from __future__ import annotations

import csv
import io

import pytest
from tests.lms_readers import CanvasUser, read_canvas, read_moodle

from madrag.teacher import columns
from madrag.teacher.gradebook import (
    CANVAS_ID_COLUMNS,
    Criterion,
    StudentRow,
    canvas_csv,
    canvas_title,
    classroom_csv,
    moodle_csv,
    plain_csv,
    student_row,
)
from madrag.teacher.grades import grade_of

CRITERIA = [Criterion("Ideas", 0, 3), Criterion("Style", 1, 4)]
# (who, AI's scores, the teacher's class-file scores) per student
CLASS = [
    (
        {"first_name": "Ada", "last_name": "Lovelace", "email": "ada@school.org", "sis_id": "S1", "section": "P3"},
        (0, 2),
        (2, 4),
    ),
    ({"name": "Bob Stone", "email": "bob@school.org", "sis_id": "S2"}, (1, 2), (None, None)),
    ({"name": "Lee, Cy", "email": "cy@school.org"}, (3, None), (None, None)),  # the AI gave no Style score
    ({"first_name": "Dee", "sis_id": "S4"}, (2, 3), (1, 1)),
]
USERS = [  # the Canvas course: Ada and Dee by SIS id, Bob by SIS id, Cy by login only
    CanvasUser("101", "S1", "ada@school.org", "Ada Lovelace", "Lovelace, Ada"),
    CanvasUser("102", "S2", "bob@school.org", "Bob Stone", "Stone, Bob"),
    CanvasUser("103", "", "cy@school.org", "Cy Lee", "Lee, Cy"),
    CanvasUser("104", "S4", "dee@school.org", "Dee", "Dee"),
]
EXPECTED = {"101": 6.0, "102": 3.0, "103": None, "104": 2.0}  # Ada's and Dee's: the teacher's 2+4 and 1+1


def _rows() -> list[StudentRow]:
    rows = []
    for i, (who, ai, mine) in enumerate(CLASS):
        grades = {c.name: grade_of(a, upload=m) for c, a, m in zip(CRITERIA, ai, mine, strict=True)}
        rows.append(student_row(f"essay{i}", who, CRITERIA, grades, "a model"))
    return rows


def test_the_teachers_score_outranks_the_ais_and_a_missing_one_stays_missing() -> None:
    assert grade_of(0, upload=2).points == 2 and grade_of(0, upload=2).how == "class file"
    assert grade_of(0, upload=2, override=1, comment="see me").points == 1
    assert grade_of(0, upload=2, override=1, comment="see me").comment == "see me"
    accepted = grade_of(3, accepted=True)
    assert (accepted.points, accepted.by, accepted.reviewed) == (3, "ai", True)
    assert grade_of(3, upload=1, accepted=True).points == 1  # accepting the AI's never drops the teacher's
    assert grade_of(None).points is None and not grade_of(None).reviewed
    ada, bob, cy, dee = _rows()
    assert (ada.total, ada.graded_by, ada.reviewed) == (6, "teacher", True)
    assert (bob.total, bob.graded_by, bob.reviewed) == (3, "AI", False)
    assert cy.total is None and cy.percent is None
    assert (dee.first, dee.last, dee.name) == ("Dee", "", "Dee")


def test_canvas_file_imports_one_assignment_with_the_teachers_grades() -> None:
    text = canvas_csv(_rows(), CRITERIA, "Essay 1")
    table = list(csv.reader(io.StringIO(text)))
    assert tuple(table[0][:5]) == CANVAS_ID_COLUMNS and table[1][0] == "Points Possible"
    found = read_canvas(text, USERS)
    assert found.assignments == [("Essay 1", None)]  # one new assignment, the total
    assert found.points == {"Essay 1": 7.0} and found.unmatched == []
    assert {u: g["Essay 1"] for u, g in found.grades.items()} == EXPECTED
    assert [r[0] for r in table[2:]] == ["Lovelace, Ada", "Stone, Bob", "Lee, Cy", "Dee"]  # Canvas's sortable name
    assert [r[2:5] for r in table[2:4]] == [["S1", "ada@school.org", "P3"], ["S2", "bob@school.org", ""]]


def test_canvas_file_per_criterion_only_when_asked_and_never_with_the_total() -> None:
    found = read_canvas(canvas_csv(_rows(), CRITERIA, "Essay 1", by_criterion=True), USERS)
    assert found.assignments == [("Essay 1: Ideas", None), ("Essay 1: Style", None)]
    assert found.points == {"Essay 1: Ideas": 3.0, "Essay 1: Style": 4.0}
    assert found.grades["101"] == {"Essay 1: Ideas": 2.0, "Essay 1: Style": 4.0}
    assert found.grades["103"] == {"Essay 1: Ideas": 3.0, "Essay 1: Style": None}


def test_a_student_known_only_by_name_is_matched_by_canvas_sortable_name() -> None:
    who = {"first_name": "Cy", "last_name": "Lee"}
    row = student_row("x", who, CRITERIA, {c.name: grade_of(1) for c in CRITERIA}, "m")
    found = read_canvas(canvas_csv([row], CRITERIA, "Essay 1"), USERS)
    assert found.grades == {"103": {"Essay 1": 2.0}}


@pytest.mark.parametrize(
    ("title", "written"),
    [
        ("Final Score essay", "final score essay"),
        ("Essay (12)", "Essay [12]"),
        ("Unit 3: Override Grade", "Unit 3: override grade"),
    ],
)
def test_an_assignment_title_canvas_would_misread_is_changed(title: str, written: str) -> None:
    assert canvas_title(title) == written
    row = student_row("x", {"sis_id": "S1"}, CRITERIA, {c.name: grade_of(1) for c in CRITERIA}, "m")
    found = read_canvas(canvas_csv([row], CRITERIA, title), USERS)
    assert found.assignments == [(written, None)] and found.grades["101"] == {written: 2.0}


def test_classroom_file_puts_last_names_under_last_name_and_reads_back_by_email() -> None:
    table = list(csv.DictReader(io.StringIO(classroom_csv(_rows(), CRITERIA, "Essay 1"))))
    assert list(table[0]) == ["Last Name", "First Name", "Email Address", "Essay 1"]
    assert [(r["Last Name"], r["First Name"]) for r in table] == [
        ("Lovelace", "Ada"),
        ("Stone", "Bob"),
        ("Lee", "Cy"),
        ("", "Dee"),
    ]
    by_email = {r["Email Address"]: r["Essay 1"] for r in table if r["Email Address"]}
    assert by_email == {"ada@school.org": "6", "bob@school.org": "3", "cy@school.org": ""}


def test_moodle_file_reads_back_by_email_or_id_number() -> None:
    text = moodle_csv(_rows(), CRITERIA, "Essay 1")
    assert next(csv.reader(io.StringIO(text))) == ["First name", "Last name", "ID number", "Email address", "Essay 1"]
    emails = {"ada@school.org": "u1", "bob@school.org": "u2", "cy@school.org": "u3"}
    assert read_moodle(text, "Email address", emails) == {
        "u1": {"Essay 1": 6.0},
        "u2": {"Essay 1": 3.0},
        "u3": {"Essay 1": None},
    }
    assert read_moodle(text, "ID number", {"S4": "u4"}) == {"u4": {"Essay 1": 2.0}}


def test_spreadsheet_says_who_graded_each_student() -> None:
    rows = list(csv.DictReader(io.StringIO(plain_csv(_rows(), CRITERIA))))
    assert [r["graded_by"] for r in rows] == ["teacher", "AI", "AI", "teacher"]
    assert (rows[0]["first_name"], rows[0]["last_name"], rows[0]["section"], rows[0]["total"]) == (
        "Ada",
        "Lovelace",
        "P3",
        "6",
    )


def test_names_are_shown_one_way_and_split_as_the_lms_expects() -> None:
    assert columns.split_name({"name": "Mary Ann Smith"}) == ("Mary Ann", "Smith")
    assert columns.split_name({"name": "Smith, Mary Ann"}) == ("Mary Ann", "Smith")
    assert columns.split_name({"name": "Cher"}) == ("Cher", "")
    assert columns.student_label({"first_name": "Ada", "last_name": "Lovelace", "email": "a@b"}, "e1") == "Ada Lovelace"
    assert columns.student_label({"email": "a@b", "sis_id": "S1"}, "e1") == "a@b"
    assert columns.student_label({}, "e1") == "e1"


def test_forms_first_and_last_name_columns_are_guessed_and_a_resubmission_replaces_the_older_answer() -> None:
    header = ["Timestamp", "Email Address", "First Name", "Last Name", "Class period", "Your essay", "Ideas"]
    rows = [
        dict(zip(header, ["9:00", "a@s.org", "Ada", "Lovelace", "3", "first try " * 30, "2"], strict=True)),
        dict(zip(header, ["9:05", "b@s.org", "Bob", "Stone", "3", "bob's essay " * 30, ""], strict=True)),
        dict(zip(header, ["9:30", "a@s.org", "Ada", "Lovelace", "3", "second try " * 30, "3"], strict=True)),
    ]
    mapping = columns.guess(header, ["Ideas"], rows)
    assert (mapping.first_name, mapping.last_name, mapping.email, mapping.name) == (
        "First Name",
        "Last Name",
        "Email Address",
        None,
    )
    assert (mapping.section, mapping.text, mapping.scores) == ("Class period", "Your essay", {"Ideas": "Ideas"})
    mapped = columns.apply(rows, mapping)
    essays = list(csv.DictReader(io.StringIO(mapped.text)))
    assert [e["id"] for e in essays] == ["a@s.org", "b@s.org"]
    assert essays[0]["text"].startswith("second try") and essays[0]["Ideas"] == "3"  # the newer answer kept
    assert mapped.replaced == [("a@s.org", 2, 4)]  # row 4 of the file replaced row 2
    assert mapped.roster["a@s.org"] == {
        "email": "a@s.org",
        "first_name": "Ada",
        "last_name": "Lovelace",
        "section": "3",
    }
