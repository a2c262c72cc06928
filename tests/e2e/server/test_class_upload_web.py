"""The web app's class upload over HTTP with the files teachers have: a ZIP of Canvas submissions (five .docx,
two .pdf), an Excel workbook, a Windows-1252 CSV with curly quotes and a Google Forms export with first and last
name columns each reach the scoring step (the essays listed with the right student and text); a scanned PDF is
refused on its own, saying what to do; a ZIP whose names climb out of it is refused in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from tests.class_file_makers import (
    ESSAYS,
    canvas_name,
    canvas_zip,
    cp1252_csv,
    docx_bytes,
    forms_export_first_last,
    scanned_pdf_bytes,
    xlsx_bytes,
    zip_bytes,
)
from tests.web_helpers import HTML, RUBRIC, client_for, csrf, form_post, make_config, wait_status

from madrag.data.documents import SCANNED
from madrag.server.class_book import ROSTER
from madrag.server.pages.class_import import PENDING, READ_NOTE


def _draft(client: TestClient) -> tuple[str, str]:
    token = csrf(client, "/")
    draft = form_post(client, "/new", token).headers["location"].split("/")[2]
    rubric = {"file": ("r.json", json.dumps(RUBRIC).encode(), "application/json")}
    assert form_post(client, f"/drafts/{draft}/rubric", token, files=rubric, mode="upload").status_code == 303
    return draft, token


def _upload(client: TestClient, draft: str, token: str, name: str, data: bytes) -> Any:
    return form_post(client, f"/drafts/{draft}/essays", token, files={"file": (name, data)}, mode="upload")


def _stored(tmp_path: Path, draft: str) -> dict[str, str]:
    """The essays the draft holds, ready to score: id -> text."""
    lines = (tmp_path / "server" / "drafts" / draft / "essays.jsonl").read_text(encoding="utf-8").splitlines()
    return {row["id"]: row["text"] for row in map(json.loads, lines)}


def test_a_canvas_zip_of_five_docx_and_two_pdfs_reaches_scoring(tmp_path: Path) -> None:
    data, expected = canvas_zip()
    with client_for(make_config(tmp_path)) as client:
        draft, token = _draft(client)
        sent = _upload(client, draft, token, "eng101-persuasive-essay submissions.zip", data)
        assert sent.status_code == 303 and sent.headers["location"] == f"/drafts/{draft}/columns"
        page = client.get(f"/drafts/{draft}/columns", headers=HTML).text
        assert 'id="read-as">Read as ZIP of submissions: 7 students, read from Canvas file names.' in page
        assert '<option value="Essay" selected>' in page and '<option value="Student" selected>' in page
        mapped = form_post(client, f"/drafts/{draft}/columns", token, **{"col-text": "Essay", "col-id": "ID"})
        assert mapped.status_code == 303
        assert "Read 7 essays" in client.get(f"/drafts/{draft}/essays", headers=HTML).text
        assert _stored(tmp_path, draft) == {uid: essay for uid, (_, essay) in expected.items()}
        assert not (tmp_path / "server" / "drafts" / draft / PENDING).exists()
        assert not (tmp_path / "server" / "drafts" / draft / READ_NOTE).exists()
        assert form_post(client, f"/drafts/{draft}/exemplars", token, pool="none").status_code == 303
        started = form_post(client, f"/drafts/{draft}/backend", token, kind="fake", protocols="MAD", action="start")
        run_id = started.headers["location"].split("/")[2]
        assert wait_status(client, run_id)["status"] == "finished"
        assert client.get(f"/api/runs/{run_id}").json()["n_essays"] == 7


def test_an_xlsx_class_in_madrags_layout_is_read_directly_and_says_from_which_sheet(tmp_path: Path) -> None:
    rows = [["id", "text", "Ideas"], *[[f"s{i}", essay, i % 4] for i, essay in enumerate(ESSAYS.values())]]
    data = xlsx_bytes({"Instructions": [["read me"]], "Period 3": rows})
    with client_for(make_config(tmp_path)) as client:
        draft, token = _draft(client)
        page = _upload(client, draft, token, "Period 3.xlsx", data)
        assert page.status_code == 200 and "Read 7 essays" in page.text
        assert "Read as Excel workbook, sheet &#39;Period 3&#39;." in page.text
        assert _stored(tmp_path, draft) == {f"s{i}": essay for i, essay in enumerate(ESSAYS.values())}


ESSAY_WITH_TABS = "\tMy first paragraph.\n\tMy second.\n\tMy third.\n\tMy last."
"""An answer whose paragraphs are indented with tabs: more tabs than commas in the file."""


def test_an_xlsx_forms_export_goes_through_the_column_mapping(tmp_path: Path) -> None:
    rows = [["Timestamp", "Email Address", "Essay"]]
    rows += [[f"2026-11-30 09:0{i}", f"kid{i}@school.org", ESSAY_WITH_TABS] for i in range(3)]
    with client_for(make_config(tmp_path)) as client:
        draft, token = _draft(client)
        assert (
            _upload(client, draft, token, "Form Responses.xlsx", xlsx_bytes({"Form Responses 1": rows})).status_code
            == 303
        )
        page = client.get(f"/drafts/{draft}/columns", headers=HTML).text
        assert "Read as Excel workbook, sheet &#39;Form Responses 1&#39;." in page
        assert "the columns Timestamp, Email Address, Essay" in page  # tabs in the answers do not split the columns
        assert (
            form_post(
                client, f"/drafts/{draft}/columns", token, **{"col-text": "Essay", "col-email": "Email Address"}
            ).status_code
            == 303
        )
        assert _stored(tmp_path, draft)["kid2@school.org"] == ESSAY_WITH_TABS.strip()


def test_a_semicolon_csv_in_madrags_layout_is_read_directly(tmp_path: Path) -> None:
    data = "id;text;Ideas\r\nz1;\u201cPatience\u201d, my aunt said, \u2013 is bitter.;2\r\n".encode("cp1252")
    with client_for(make_config(tmp_path)) as client:
        draft, token = _draft(client)
        page = _upload(client, draft, token, "europe.csv", data)
        assert "Read 1 essay" in page.text and "Read as CSV in Windows-1252 (Western European)." in page.text
        assert _stored(tmp_path, draft) == {"z1": "\u201cPatience\u201d, my aunt said, \u2013 is bitter."}


def test_a_windows_1252_csv_with_curly_quotes_is_accepted_and_its_encoding_shown(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        draft, token = _draft(client)
        assert _upload(client, draft, token, "period 3.csv", cp1252_csv()).status_code == 303
        page = client.get(f"/drafts/{draft}/columns", headers=HTML).text
        assert "Read as CSV in Windows-1252 (Western European)." in page and "Zoë Brontë" in page
        fields = {"col-text": "Essay", "col-email": "Email", "col-name": "Student"}
        assert form_post(client, f"/drafts/{draft}/columns", token, **fields).status_code == 303
        stored = _stored(tmp_path, draft)
        assert stored["zoe@school.org"].startswith(
            "My aunt said \u201cpatience is bitter, but its fruit is sweet\u201d"
        )
        assert "I waited \u2018forever\u2019 for the café" in stored["jose@school.org"]


def test_a_forms_export_with_first_and_last_name_columns_reaches_scoring(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        draft, token = _draft(client)
        assert (
            _upload(client, draft, token, "Essay (Responses).csv", forms_export_first_last().encode()).status_code
            == 303
        )
        page = client.get(f"/drafts/{draft}/columns", headers=HTML).text
        assert '<option value="First name"' in page and '<option value="Last name"' in page
        assert '<option value="Your essay" selected>' in page
        assert '<option value="First name" selected>' in page and '<option value="Last name" selected>' in page
        fields = {
            "col-text": "Your essay",
            "col-email": "Email Address",
            "col-first_name": "First name",
            "col-last_name": "Last name",
        }
        assert form_post(client, f"/drafts/{draft}/columns", token, **fields).status_code == 303
        expected = {f"{name.split()[0].lower()}@school.org": essay for name, essay in ESSAYS.items()}
        assert _stored(tmp_path, draft) == expected
        roster = json.loads((tmp_path / "server" / "drafts" / draft / ROSTER).read_text(encoding="utf-8"))
        assert (roster["cy@school.org"]["first_name"], roster["cy@school.org"]["last_name"]) == ("Cy", "Diaz")


def test_a_scanned_pdf_is_refused_alone_saying_what_to_do(tmp_path: Path) -> None:
    files = {
        canvas_name("Ann Lee", 1, 11, "essay.docx"): docx_bytes([ESSAYS["Ann Lee"]]),
        canvas_name("Bo Chen", 2, 12, "essay.docx"): docx_bytes([ESSAYS["Bo Chen"]]),
        canvas_name("Cy Diaz", 3, 13, "scan.pdf"): scanned_pdf_bytes(),
    }
    with client_for(make_config(tmp_path)) as client:
        draft, token = _draft(client)
        assert _upload(client, draft, token, "submissions.zip", zip_bytes(files)).status_code == 303
        page = client.get(f"/drafts/{draft}/columns", headers=HTML).text
        assert 'id="files-refused"' in page and "diazcy_3_13_scan.pdf" in page and "no text layer" in page
        assert (
            form_post(client, f"/drafts/{draft}/columns", token, **{"col-text": "Essay", "col-id": "ID"}).status_code
            == 303
        )
        essays = client.get(f"/drafts/{draft}/essays", headers=HTML).text
        assert "Read 2 essays, refused 1" in essays
        assert SCANNED.replace('"', "&#34;") in essays or SCANNED in essays
        assert set(_stored(tmp_path, draft)) == {"1", "2"}


def test_a_zip_slip_name_is_refused_in_one_line_next_to_the_file_field(tmp_path: Path) -> None:
    data = zip_bytes({"../../../tmp/evil.docx": docx_bytes(["x"]), "Ann Lee - Essay.docx": docx_bytes(["y"])})
    with client_for(make_config(tmp_path)) as client:
        draft, token = _draft(client)
        page = _upload(client, draft, token, "submissions.zip", data)
        assert page.status_code == 400
        error = re.search(r'id="error-file">([^<]+)<', page.text)
        assert error is not None and "points outside the archive: refused" in error.group(1)
        assert not (tmp_path / "tmp").exists() and not (tmp_path / "server" / "drafts" / draft / PENDING).exists()


def test_the_upload_form_offers_the_files_teachers_have(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        draft, _ = _draft(client)
        page = client.get(f"/drafts/{draft}/essays", headers=HTML).text
        accept = re.search(r'name="file" accept="([^"]+)"', page)
        assert accept is not None and {".csv", ".xlsx", ".zip", ".docx", ".pdf"} <= set(accept.group(1).split(","))
        assert 'id="accepted-files"' in page and "Download Submissions" in page


def test_a_column_that_is_not_essays_is_questioned_not_scored(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        draft, token = _draft(client)
        assert (
            _upload(client, draft, token, "Essay (Responses).csv", forms_export_first_last().encode()).status_code
            == 303
        )
        fields = {"col-email": "Email Address", "col-first_name": "First name", "col-last_name": "Last name"}
        for column, what in (("Timestamp", "dates or times"), ("First name", "1 word long")):
            asked = form_post(client, f"/drafts/{draft}/columns", token, **{"col-text": column}, **fields)
            assert asked.status_code == 400 and what in asked.text and 'id="text-confirmed"' in asked.text
            assert f'<option value="{column}" selected>' in asked.text  # the teacher's own choice, kept
            assert not (tmp_path / "server" / "drafts" / draft / "essays.jsonl").exists()  # nothing read as essays
        right = form_post(client, f"/drafts/{draft}/columns", token, **{"col-text": "Your essay"}, **fields)
        assert right.status_code == 303


def test_a_confirmed_column_is_read_as_the_teacher_said(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        draft, token = _draft(client)
        _upload(client, draft, token, "Essay (Responses).csv", forms_export_first_last().encode())
        sent = form_post(
            client, f"/drafts/{draft}/columns", token, **{"col-text": "Timestamp", "text-confirmed": "yes"}
        )
        assert sent.status_code == 303  # the teacher's word outranks the guess


def test_an_empty_file_says_it_is_empty(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        draft, token = _draft(client)
        for data in (b"", b"\xef\xbb\xbf\r\n", b"  \n\n"):
            refused = _upload(client, draft, token, "class.csv", data)
            assert refused.status_code == 400 and "class.csv is empty" in refused.text
            assert "no header row" not in refused.text
