"""The gradebook: one row per student (a column per criterion, total points and percent, the identifiers from
the import, the reviewed flag), the Canvas and Google Classroom layouts checked against their documented
columns, and a Google Forms export read through the column-mapping step."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from tests.web_helpers import HTML, RUBRIC, TEXTS, client_for, csrf, form_post, make_config, wait_status

from madrag.teacher import columns, gradebook

# Canvas's gradebook import: the identity columns of its own export, then assignments, then "Points Possible"
CANVAS_HEAD = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
# Google Classroom's grade download / sheet import: matched by the student's email address
CLASSROOM_HEAD = ["Last Name", "First Name", "Email Address"]
CRITERIA = [gradebook.Criterion("Ideas", 0, 3), gradebook.Criterion("Style", 1, 4)]


def _rows() -> list[gradebook.StudentRow]:
    who = {"name": "Ada Lovelace", "email": "ada@school.org", "sis_id": "S1"}
    ada = gradebook.student_row("ada@school.org", who, CRITERIA, {"Ideas": 3, "Style": 2}, True, "fake backend")
    bob = gradebook.student_row("bob", {"email": "bob@school.org"}, CRITERIA, {"Ideas": None, "Style": 4}, False, "x")
    return [ada, bob]


def test_a_student_row_totals_points_and_percent_and_a_missing_score_stays_missing() -> None:
    ada, bob = _rows()
    assert (ada.total, ada.possible, ada.percent) == (5, 7, 71.4)
    assert bob.total is None and bob.percent is None and bob.points["Style"] == 4


def test_canvas_layout_has_its_documented_columns() -> None:
    table = list(csv.reader(io.StringIO(gradebook.canvas_csv(_rows(), CRITERIA, "Essay 1"))))
    assert table[0] == [*CANVAS_HEAD, "Essay 1", "Essay 1: Ideas", "Essay 1: Style"]
    assert table[1] == ["Points Possible", "", "", "", "", "7", "3", "4"]
    assert table[2] == ["Lovelace, Ada", "", "S1", "ada@school.org", "", "5", "3", "2"]
    assert table[3][3] == "bob@school.org" and table[3][5] == "" and table[3][7] == "4"


def test_classroom_layout_has_its_documented_columns() -> None:
    table = list(csv.reader(io.StringIO(gradebook.classroom_csv(_rows(), CRITERIA, "Essay 1"))))
    assert table[0] == [*CLASSROOM_HEAD, "Essay 1", "Essay 1: Ideas", "Essay 1: Style"]
    assert table[1] == ["Lovelace", "Ada", "ada@school.org", "5", "3", "2"]
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
    header, rows = columns.read_table(forms_export(2))
    mapping = columns.guess(header, ["Ideas"])
    assert (mapping.text, mapping.email, mapping.name, mapping.id) == (
        "Response",
        "Email Address",
        "Student name",
        None,
    )
    text, roster = columns.apply(rows, mapping)
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
        assert kid1[0] == "Number1, Kid" and kid1[6] == "0" and int(kid1[5]) == int(kid1[7])  # the override counts
        plain = list(csv.DictReader(io.StringIO(client.get(f"/runs/{run_id}/gradebook.csv").text)))
        assert {r["email"]: r["reviewed"] for r in plain}["kid1@school.org"] == "yes"
        assert sum(r["reviewed"] == "yes" for r in plain) == 1 and all(r["scored_by"].startswith("fake") for r in plain)
        assert client.get(f"/runs/{run_id}/gradebook.csv?layout=nope").status_code == 422
