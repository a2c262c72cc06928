"""The gradebook: one row per student (a column per criterion, total points and percent, the identifiers from
the import, the reviewed flag), the Canvas and Google Classroom layouts checked against their documented
columns, and a Google Forms export read through the column-mapping step."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.web_helpers import HTML, RUBRIC, TEXTS, client_for, csrf, form_post, make_config, wait_status

from madrag.data.class_files import read_csv_text
from madrag.teacher import columns, gradebook
from madrag.teacher.grades import grade_of

# Canvas's gradebook import: the identity columns of its own export, then assignments, then "Points Possible"
CANVAS_HEAD = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
# Google Classroom's grade download / sheet import: matched by the student's email address
CLASSROOM_HEAD = ["Last Name", "First Name", "Email Address"]
CRITERIA = [gradebook.Criterion("Ideas", 0, 3), gradebook.Criterion("Style", 1, 4)]


def _rows() -> list[gradebook.StudentRow]:
    who = {"name": "Ada Lovelace", "email": "ada@school.org", "sis_id": "S1"}
    accepted = {"Ideas": grade_of(3, accepted=True), "Style": grade_of(2, accepted=True)}
    ada = gradebook.student_row("ada@school.org", who, CRITERIA, accepted, "fake backend")
    bob = gradebook.student_row("bob", {"email": "bob@school.org"}, CRITERIA, {"Style": grade_of(4)}, "x")
    return [ada, bob]


def test_a_student_row_totals_points_and_percent_and_a_missing_score_stays_missing() -> None:
    ada, bob = _rows()
    assert (ada.total, ada.possible, ada.percent) == (5, 7, 71.4)
    assert bob.total is None and bob.percent is None and bob.points["Style"] == 4


def test_canvas_layout_has_its_documented_columns() -> None:
    table = list(csv.reader(io.StringIO(gradebook.canvas_csv(_rows(), CRITERIA, "Essay 1"))))
    assert table[0] == [*CANVAS_HEAD, "Essay 1"]  # one assignment: the total
    assert table[1] == ["Points Possible", "", "", "", "", "7"]
    assert table[2] == ["Lovelace, Ada", "", "S1", "ada@school.org", "", "5"]
    assert table[3][3] == "bob@school.org" and table[3][5] == ""  # a missing score leaves the total empty


def test_classroom_layout_has_its_documented_columns() -> None:
    table = list(csv.reader(io.StringIO(gradebook.classroom_csv(_rows(), CRITERIA, "Essay 1"))))
    assert table[0] == [*CLASSROOM_HEAD, "Essay 1"]
    assert table[1] == ["Lovelace", "Ada", "ada@school.org", "5"]
    assert table[2][2:4] == ["bob@school.org", ""]


def test_plain_gradebook_has_identifiers_totals_and_the_reviewed_flag() -> None:
    rows = list(csv.DictReader(io.StringIO(gradebook.plain_csv(_rows(), CRITERIA))))
    assert rows[0]["email"] == "ada@school.org" and rows[0]["sis_id"] == "S1" and rows[0]["Ideas"] == "3"
    assert (rows[0]["total"], rows[0]["possible"], rows[0]["percent"], rows[0]["reviewed"]) == ("5", "7", "71.4", "yes")
    assert rows[1]["reviewed"] == "no" and rows[1]["total"] == "" and rows[0]["scored_by"] == "fake backend"


FORMS_HEADER = ["Timestamp", "Email Address", "Student name", "Response"]


def forms_export(n: int) -> str:
    """A Google Forms response sheet downloaded as CSV."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(FORMS_HEADER)
    for i in range(n):
        writer.writerow([f"2026/11/30 9:0{i}:00 AM", f"kid{i}@school.org", f"Kid Number{i}", TEXTS[i % len(TEXTS)]])
    return buf.getvalue()


def test_forms_columns_are_guessed_and_carry_the_students() -> None:
    header, rows = read_csv_text(forms_export(2), "forms.csv")
    mapping = columns.guess(header, ["Ideas"])
    assert (mapping.text, mapping.email, mapping.name, mapping.id) == (
        "Response",
        "Email Address",
        "Student name",
        None,
    )
    mapped = columns.apply(rows, mapping)
    text, roster = mapped.text, mapped.roster
    question = [{"Email Address": "a@b.c", "Why patience matters": "x" * 300, "Period": "3"}]
    assert columns.guess(list(question[0]), [], question).text == "Why patience matters"  # the longest answers
    essays = list(csv.DictReader(io.StringIO(text)))
    assert [e["id"] for e in essays] == ["kid0@school.org", "kid1@school.org"] and essays[1]["text"] == TEXTS[1]
    assert roster["kid1@school.org"] == {"email": "kid1@school.org", "name": "Kid Number1"}


def test_a_forms_export_reaches_the_canvas_gradebook_with_overrides(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        token = csrf(client, "/")
        draft = form_post(client, "/new", token).headers["location"].split("/")[2]  # type: ignore[attr-defined]
        rubric = {"file": ("r.json", json.dumps(RUBRIC).encode(), "application/json")}
        assert form_post(client, f"/drafts/{draft}/rubric", token, files=rubric, mode="upload").status_code == 303  # type: ignore[attr-defined]
        upload = {"file": ("Essay responses.csv", forms_export(3).encode(), "text/csv")}
        sent = form_post(client, f"/drafts/{draft}/essays", token, files=upload, mode="upload")
        assert sent.headers["location"] == f"/drafts/{draft}/columns"  # type: ignore[attr-defined]
        page = client.get(f"/drafts/{draft}/columns", headers=HTML).text
        assert '<option value="Response" selected>' in page and '<option value="Email Address" selected>' in page
        fields = {"col-text": "Response", "col-email": "Email Address", "col-name": "Student name"}
        assert form_post(client, f"/drafts/{draft}/columns", token, **fields).status_code == 303  # type: ignore[attr-defined]
        assert "Read 3 essays" in client.get(f"/drafts/{draft}/essays", headers=HTML).text
        assert form_post(client, f"/drafts/{draft}/exemplars", token, pool="none").status_code == 303  # type: ignore[attr-defined]
        started = form_post(client, f"/drafts/{draft}/backend", token, kind="fake", protocols="MAD", action="start")
        run_id = started.headers["location"].split("/")[2]  # type: ignore[attr-defined]
        assert wait_status(client, run_id)["status"] == "finished"
        essay = f"/runs/{run_id}/essays/kid1@school.org/review"
        form_post(client, essay, token, action="override", trait="Ideas", protocol="MAD", score="0", reviewer="T")
        form_post(client, f"/runs/{run_id}/approve", token, essay_id="kid1@school.org")
        page = client.get(f"/runs/{run_id}/gradebook", headers=HTML).text
        assert "Kid Number1" in page and 'id="reviewed-count">1<' in page and "not valid grades" in page
        table = list(csv.reader(io.StringIO(client.get(f"/runs/{run_id}/gradebook.csv?layout=canvas").text)))
        assert table[0][:5] == CANVAS_HEAD and table[1][0] == "Points Possible" and table[1][5] == "7"
        kid1 = next(r for r in table if r[3] == "kid1@school.org")
        plain = list(csv.DictReader(io.StringIO(client.get(f"/runs/{run_id}/gradebook.csv").text)))
        mine = next(r for r in plain if r["email"] == "kid1@school.org")
        assert (
            kid1[0] == "Number1, Kid" and mine["Ideas"] == "0" and int(kid1[5]) == int(mine["Style"])
        )  # the override counts
        assert {r["email"]: r["reviewed"] for r in plain}["kid1@school.org"] == "yes"
        assert sum(r["reviewed"] == "yes" for r in plain) == 1 and all(r["scored_by"].startswith("fake") for r in plain)
        assert client.get(f"/runs/{run_id}/gradebook.csv?layout=nope").status_code == 422


CLASS_HEADER = ["Timestamp", "Email Address", "First Name", "Last Name", "Response", "Ideas", "Style"]
TEACHER = {0: (2, 2), 1: (3, 4), 2: (0, 1), 3: (1, 3), 4: (2, 1)}  # the 5 papers the teacher scored


def class_with_teacher_scores(n: int) -> str:
    """A Forms export with separate first and last names and the teacher's own scores on 5 papers; the last
    student sent the form twice (the second answer is the one to keep)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(CLASS_HEADER)
    for i in range(n):
        ideas, style = TEACHER.get(i, ("", ""))
        writer.writerow([f"9:{i:02d}", f"kid{i}@school.org", f"Kid{i}", f"Family{i}", TEXTS[i % 4], ideas, style])
    writer.writerow(["9:59", f"kid{n - 1}@school.org", f"Kid{n - 1}", f"Family{n - 1}", TEXTS[0] + " (again)", "", ""])
    return buf.getvalue()


def _run_from_class_file(client: Any, token: str, data: str) -> str:
    draft = form_post(client, "/new", token).headers["location"].split("/")[2]
    rubric = {"file": ("r.json", json.dumps(RUBRIC).encode(), "application/json")}
    form_post(client, f"/drafts/{draft}/rubric", token, files=rubric, mode="upload")
    upload = {"file": ("Essay responses.csv", data.encode(), "text/csv")}
    form_post(client, f"/drafts/{draft}/essays", token, files=upload, mode="upload")
    page = client.get(f"/drafts/{draft}/columns", headers=HTML).text
    for field in ("First Name", "Last Name", "Email Address", "Response"):
        assert f'<option value="{field}" selected>' in page, field  # every column guessed
    fields = {"col-text": "Response", "col-email": "Email Address", "col-first_name": "First Name"}
    fields |= {"col-last_name": "Last Name", "score-0": "Ideas", "score-1": "Style"}
    sent = form_post(client, f"/drafts/{draft}/columns", token, **fields)
    essays = client.get(sent.headers["location"], headers=HTML).text
    assert "Read 8 essays" in essays and "1 student sent the form more than once" in essays
    form_post(client, f"/drafts/{draft}/exemplars", token, pool="none")
    started = form_post(client, f"/drafts/{draft}/backend", token, kind="fake", protocols="MAD", action="start")
    run_id: str = started.headers["location"].split("/")[2]
    assert wait_status(client, run_id)["status"] == "finished"
    return run_id


def test_five_teacher_scored_papers_are_exported_as_the_teacher_gave_them(tmp_path: Path) -> None:
    from tests.lms_readers import CanvasUser, read_canvas

    with client_for(make_config(tmp_path)) as client:
        token = csrf(client, "/")
        run_id = _run_from_class_file(client, token, class_with_teacher_scores(8))
        review = f"/runs/{run_id}/essays/kid6@school.org/review"
        form_post(client, review, token, action="override", trait="Style", protocol="MAD", score="4", comment="Vivid!")
        plain = list(csv.DictReader(io.StringIO(client.get(f"/runs/{run_id}/gradebook.csv").text)))
        by_email = {r["email"]: r for r in plain}
        canvas = client.get(f"/runs/{run_id}/gradebook.csv?layout=canvas").text
        users = [
            CanvasUser(str(100 + i), "", f"kid{i}@school.org", f"Kid{i} Family{i}", f"Family{i}, Kid{i}")
            for i in range(8)
        ]
        found = read_canvas(canvas, users)
        assert len(found.assignments) == 1 and found.assignments[0][1] is None  # one new assignment
        assert list(found.points.values()) == [7.0] and found.unmatched == []
        for i, (ideas, style) in TEACHER.items():
            assert (by_email[f"kid{i}@school.org"]["Ideas"], by_email[f"kid{i}@school.org"]["Style"]) == (
                str(ideas),
                str(style),
            )
            assert by_email[f"kid{i}@school.org"]["graded_by"] == "teacher"
            assert list(found.grades[str(100 + i)].values()) == [ideas + style]  # exactly the teacher's total
        assert by_email["kid6@school.org"]["Style"] == "4" and by_email["kid5@school.org"]["graded_by"] == "AI"
        assert (
            by_email["kid0@school.org"]["first_name"] == "Kid0"
            and by_email["kid0@school.org"]["last_name"] == "Family0"
        )
        classroom = list(csv.DictReader(io.StringIO(client.get(f"/runs/{run_id}/gradebook.csv?layout=classroom").text)))
        assignment = list(classroom[1])[3]
        assert (classroom[1]["Last Name"], classroom[1]["First Name"], classroom[1][assignment]) == (
            "Family1",
            "Kid1",
            "7",
        )
        page = client.get(f"/runs/{run_id}/gradebook", headers=HTML).text
        assert 'id="teacher-grades">11<' in page and "Kid0 Family0" in page  # 5 papers x 2 + the override
        feedback = client.get(f"/runs/{run_id}/feedback/kid6@school.org", headers=HTML).text
        style = re.search(r'id="fb-Style">(.*?)</section>', feedback, re.S)
        assert style is not None and "Style: 4 of 4" in style.group(1) and "Vivid!" in style.group(1)
        assert "Why this score" not in style.group(1)  # the AI's reasoning for its own score is not shown
        rows = list(csv.DictReader(io.StringIO(client.get(f"/runs/{run_id}/feedback.csv").text)))
        mine = next(r for r in rows if r["email"] == "kid6@school.org" and r["criterion"] == "Style")
        assert (mine["score"], mine["graded_by"], mine["teacher_comment"], mine["why_this_score"]) == (
            "4",
            "teacher",
            "Vivid!",
            "",
        )
        assert len(plain) == 8 and [r["email"] for r in plain].count("kid7@school.org") == 1  # one essay per student
        scores = client.get(f"/api/runs/{run_id}/scores").json()["rows"]
        kid0 = {r["trait"]: (r["grade"], r["graded_by"]) for r in scores if r["essay_id"] == "kid0@school.org"}
        assert kid0 == {"Ideas": (2, "teacher"), "Style": (2, "teacher")}  # the scores export says it too


def test_a_canvas_assignment_id_targets_that_assignment_and_the_page_says_how_students_match(tmp_path: Path) -> None:
    from tests.lms_readers import CanvasUser, read_canvas

    with client_for(make_config(tmp_path)) as client:
        token = csrf(client, "/")
        run_id = _run_from_class_file(client, token, class_with_teacher_scores(8))
        users = [CanvasUser(str(100 + i), "", f"kid{i}@school.org", f"Kid{i} Family{i}") for i in range(8)]
        url = f"/runs/{run_id}/gradebook.csv?layout=canvas&title=Patience%20essay&assignment_id=4711"
        found = read_canvas(client.get(url).text, users)  # as canvas-lms's GradebookImporter reads the header
        assert found.assignments == [("Patience essay", "4711")] and found.points == {"Patience essay (4711)": 7.0}
        assert len(found.grades) == 8 and found.unmatched == []
        pasted = client.get(f"/runs/{run_id}/gradebook.csv?layout=canvas&title=Patience%20essay%20(4711)")
        assert read_canvas(pasted.text, users).assignments == [("Patience essay", "4711")]  # pasted from Canvas
        untargeted = read_canvas(client.get(f"/runs/{run_id}/gradebook.csv?layout=canvas").text, users)
        assert untargeted.assignments[0][1] is None  # no id: Canvas matches the title, else makes a new one
        refused = client.get(f"/runs/{run_id}/gradebook.csv?layout=canvas&assignment_id=12a")
        assert refused.status_code == 422 and "number" in refused.json()["error"]["message"]
        by_criterion = client.get(f"/runs/{run_id}/gradebook.csv?layout=canvas&criteria=true&assignment_id=12")
        assert by_criterion.status_code == 422
        page = client.get(f"/runs/{run_id}/gradebook", headers=HTML).text
        assert "Canvas will match 8 by login" in page and 'id="canvas-id"' in page


def test_a_class_without_emails_is_told_canvas_matches_by_name_only() -> None:
    rows = [gradebook.student_row(f"e{i}", {"name": f"Kid {i}"}, CRITERIA, {}, "x") for i in range(3)]
    text = gradebook.canvas_matching(rows)
    assert text.startswith("Canvas will match 3 by name only.") and "exactly that name" in text
    assert (
        gradebook.canvas_header("Essay (3)") == "Essay [3]" and gradebook.canvas_header("Essay", "42") == "Essay (42)"
    )


def test_a_canvas_assignment_id_is_ascii_digits() -> None:
    for junk in ("\u00b2", "\u0661\u0662", "4 2"):  # digits to str.isdigit, no id Canvas gives
        with pytest.raises(ValueError, match="a Canvas assignment id is a number"):
            gradebook.canvas_header("Essay", junk)
