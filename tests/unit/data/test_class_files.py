"""Reading a teacher's class files into rows, against files as their tools make them: a Windows-1252 CSV with
curly quotes (Excel on Windows), CSV UTF-8 with a BOM and UTF-16 "Unicode Text" (Excel), a Google Forms export
with first and last name columns, an Excel workbook, Word documents and PDFs (with and without a text layer),
and ZIPs named as Canvas's "Download Submissions" and a Drive folder of Google Classroom copies name their
files; the limits of an archive; the CLI's and Python API's loaders over the same readers."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from tests.class_file_makers import (
    ESSAYS,
    canvas_name,
    canvas_zip,
    classroom_drive_zip,
    cp1252_csv,
    docx_bytes,
    forms_export_first_last,
    pdf_bytes,
    scanned_pdf_bytes,
    when,
    wrapped,
    xlsx_bytes,
    zip_bytes,
)

from madrag.data import documents, load_essays
from madrag.data.class_files import kind_of, read_class_file, read_class_path
from madrag.data.reading import decode_text, encoding_name
from madrag.data.spreadsheets import cell_text
from madrag.data.submissions import COLUMNS, ArchiveLimits, read_submissions_zip, student_of
from madrag.errors import InputError
from madrag.rubric import rubric_from_mapping

RUBRIC = rubric_from_mapping(
    {"name": "r", "traits": [{"name": "Ideas", "min": 0, "max": 3, "levels": {str(i): f"l{i}" for i in range(4)}}]},
    "",
)

# -- CSV in any common encoding -------------------------------------------------------------------------------


def test_a_windows_1252_csv_with_curly_quotes_is_read_in_its_encoding_and_says_so() -> None:
    data = cp1252_csv()
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")  # what the upload refused before
    table = read_class_file(data, "period 3.csv")
    assert table.encoding == "cp1252" and table.read_as == "CSV in Windows-1252 (Western European)"
    assert table.header == ["Student", "Email", "Essay"]
    assert [r["Student"] for r in table.rows] == ["Zoë Brontë", "José Núñez"]
    assert table.rows[0]["Essay"].startswith(
        "My aunt said \u201cpatience is bitter, but its fruit is sweet\u201d \u2013"
    )
    assert "didn\u2019t" in table.rows[0]["Essay"] and "\u2018forever\u2019" in table.rows[1]["Essay"]


def test_excel_csv_utf8_with_a_bom_and_utf16_unicode_text_are_read() -> None:
    text = "Student\tEssay\nZoë\tI waited \u201cpatiently\u201d.\n"
    utf16 = read_class_file(text.encode("utf-16"), "unicode text.txt")  # Excel's "Unicode Text": BOM, tabs
    assert utf16.header == ["Student", "Essay"] and utf16.rows == [{"Student": "Zoë", "Essay": "I waited “patiently”."}]
    assert utf16.read_as == "CSV in UTF-16"
    bom = read_class_file(b"\xef\xbb\xbf" + "id,text\nz1,caf\u00e9\n".encode(), "csv utf8.csv")
    assert bom.header == ["id", "text"] and bom.read_as == "CSV in UTF-8 with a byte-order mark"
    semicolons = read_class_file("Name;Essay\nAnn;Yes, I did.\n".encode("cp1252"), "europe.csv")
    assert semicolons.rows == [{"Name": "Ann", "Essay": "Yes, I did."}]  # a European Excel's CSV


def test_latin1_and_utf8_are_told_apart_and_named() -> None:
    assert decode_text("Müller, Zoë".encode(), "f") == ("Müller, Zoë", "utf-8")
    text, codec = decode_text(
        ("Nom,Texte\n" + "Élève,J'ai attendu à la gare très longtemps.\n" * 5).encode("latin-1"), "f"
    )
    assert text.startswith("Nom,Texte\nÉlève,J'ai attendu à la gare") and codec in ("cp1252", "latin_1", "iso8859_15")
    assert encoding_name("latin_1") == "Latin-1 (ISO-8859-1)" and encoding_name("windows-1252").startswith("Windows")


def test_bytes_that_are_no_text_and_an_old_xls_are_refused_with_what_to_do() -> None:
    with pytest.raises(InputError, match=r"save it as \.xlsx or CSV UTF-8"):
        read_class_file(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(500), "grades.xls")
    with pytest.raises(InputError, match="CSV UTF-8"):
        read_class_file(bytes(range(256)) * 40, "photo.csv")


def test_a_google_forms_export_with_first_and_last_name_columns_keeps_them_apart() -> None:
    table = read_class_file(forms_export_first_last().encode(), "Essay (Responses) - Form Responses 1.csv")
    assert table.header == ["Timestamp", "Email Address", "First name", "Last name", "Your essay"]
    assert len(table.rows) == len(ESSAYS)
    for row, (name, essay) in zip(table.rows, ESSAYS.items(), strict=True):
        assert f"{row['First name']} {row['Last name']}" == name and row["Your essay"] == essay


# -- Excel ---------------------------------------------------------------------------------------------------


def test_an_xlsx_class_is_read_from_its_sheet_with_data_cells_as_text() -> None:
    data = xlsx_bytes(
        {
            "Instructions": [["Paste the class below (sheet 2)"]],
            "Form Responses 1": [
                ["Timestamp", "Student ID", "Name", "Essay", "Score", "Share", "Late", "Total"],
                [when(30), 12345.0, "Ann Lee", ESSAYS["Ann Lee"], 3, 0.85, False, "=E2*2"],
                [when(29).date(), 20001, "Bo Chen", ESSAYS["Bo Chen"], 2.5, None, True, None],
                [None, None, None, None, None, None, None, None],
            ],
        },
        percent_cells=("F2",),
    )
    table = read_class_file(data, "Period 3.xlsx")
    assert table.read_as == "Excel workbook, sheet 'Form Responses 1'"
    assert table.header == ["Timestamp", "Student ID", "Name", "Essay", "Score", "Share", "Late", "Total"]
    first, second = table.rows
    assert (first["Timestamp"], first["Student ID"], first["Score"], first["Share"], first["Late"]) == (
        "2026-11-30 09:30:00",
        "12345",
        "3",
        "85%",
        "FALSE",
    )
    assert first["Total"] == ""  # a formula Excel never computed: missing, never 0
    assert (second["Timestamp"], second["Score"], second["Share"], second["Essay"]) == (
        "2026-11-29",
        "2.5",
        "",
        ESSAYS["Bo Chen"],
    )
    assert len(table.rows) == 2  # the blank row is skipped


def test_cell_text_is_what_the_teacher_sees() -> None:
    assert [cell_text(v) for v in (None, 4.0, 7, 0.1, True, "x")] == ["", "4", "7", "0.1", "TRUE", "x"]
    assert cell_text(0.875, "0.0%") == "87.5%"


def test_an_empty_workbook_and_a_broken_one_are_refused() -> None:
    with pytest.raises(InputError, match="no data"):
        read_class_file(xlsx_bytes({"Sheet1": []}), "empty.xlsx")
    with pytest.raises(InputError, match=r"save it again as \.xlsx"):
        read_class_file(b"not a workbook", "broken.xlsx")


# -- documents ---------------------------------------------------------------------------------------------------


def test_a_word_document_gives_its_body_in_order_without_its_page_header() -> None:
    data = docx_bytes(["First paragraph.", "", "Second\tparagraph."], header="Ann Lee - Period 3")
    assert kind_of(data, "x.docx") == "document"
    assert documents.document_text(data, "x.docx") == "First paragraph.\n\nSecond paragraph."


def test_a_pdf_text_layer_is_read_back_into_paragraphs() -> None:
    essay = "My aunt said \u201cpatience is bitter\u201d and I didn\u2019t believe her until the garden grew tall."
    text = documents.document_text(pdf_bytes(wrapped(essay, 30)), "essay.pdf")
    assert text == essay  # the lines a PDF breaks at the margin are one paragraph again


def test_a_scanned_pdf_is_refused_saying_so_and_what_to_do() -> None:
    with pytest.raises(InputError) as refused:
        documents.document_text(scanned_pdf_bytes(), "scan.pdf")
    assert str(refused.value) == f"scan.pdf: {documents.SCANNED}"
    assert "no text layer" in documents.SCANNED and "Google Docs" in documents.SCANNED and "paste" in documents.SCANNED


@pytest.mark.parametrize(
    ("name", "advice"),
    [("essay.doc", "save it as .docx"), ("IMG_0042.HEIC", "a picture, not text"), ("e.pages", "export it as Word")],
)
def test_documents_madrag_cannot_read_are_refused_with_what_to_do(name: str, advice: str) -> None:
    with pytest.raises(InputError, match=advice):
        documents.document_text(b"\x00\x01", name)


# -- submissions: the student from the file name ------------------------------------------------------------------


def test_students_are_read_from_canvas_and_classroom_file_names() -> None:
    canvas = student_of("leeann_LATE_1000_5000_Persuasive Essay.docx")
    assert (canvas.name, canvas.user_id, canvas.late, canvas.lms) == ("leeann", "1000", True, "Canvas")
    on_time = student_of("leeann_1000_5000_essay_v2_final.pdf")
    assert (on_time.user_id, on_time.late) == ("1000", False)
    anonymous = student_of("LATE_anon_xd3kq_5001_essay.docx")
    assert (anonymous.name, anonymous.user_id, anonymous.late) == ("anonymous xd3kq", "", True)
    entry = student_of("leeann_1000_text.html")
    assert (entry.name, entry.user_id) == ("leeann", "1000")
    classroom = student_of("Essay 1/Ann Lee - Persuasive Essay.docx")
    assert (classroom.name, classroom.lms) == ("Ann Lee", "Google Classroom")
    assert student_of("Ann Lee/final essay.docx").name == "Ann Lee"  # a folder per student
    assert student_of("final essay.docx").name == "final essay"  # nothing else to go by


def test_canvas_download_of_five_docx_and_two_pdfs_gives_seven_students_with_their_essays() -> None:
    data, expected = canvas_zip()
    table = read_class_file(data, "eng101-persuasive-essay submissions.zip")
    assert table.header == list(COLUMNS) and not table.refused
    assert table.read_as == "ZIP of submissions: 7 students, read from Canvas file names"
    assert {r["ID"]: (r["Student"], r["Essay"]) for r in table.rows} == expected
    assert [r["Late"] for r in sorted(table.rows, key=lambda r: r["ID"])] == ["", "", "late", "", "", "", ""]
    assert sum(r["File"].endswith(".pdf") for r in table.rows) == 2


def test_a_classroom_drive_folder_zip_names_each_student_first_and_last() -> None:
    table = read_class_file(classroom_drive_zip(), "Persuasive Essay-20261130T101500Z-001.zip")
    got = {r["Student"]: (r["First Name"], r["Last Name"], r["Essay"]) for r in table.rows}
    assert got == {name: (*name.split(), essay) for name, essay in list(ESSAYS.items())[:3]}
    assert "Google Classroom" in table.read_as


def test_a_scanned_pdf_in_the_zip_is_refused_alone() -> None:
    files = {
        canvas_name("Ann Lee", 1, 11, "essay.docx"): docx_bytes([ESSAYS["Ann Lee"]]),
        canvas_name("Bo Chen", 2, 12, "scan.pdf"): scanned_pdf_bytes(),
        "__MACOSX/._x.docx": b"junk",
    }
    table = read_class_file(zip_bytes(files), "s.zip")
    assert [r["Student"] for r in table.rows] == ["leeann"]
    assert table.refused == [("chenbo_2_12_scan.pdf", documents.SCANNED)]


def test_a_students_several_files_are_one_essay_and_a_canvas_text_entry_names_the_student() -> None:
    page = (
        "<html><head><title>Essay: Ann Lee</title></head><body><h1>Essay: Ann Lee</h1>"
        "<div><p>First part.</p><p>Second &amp; last part.</p></div></body></html>"
    )
    files = {
        canvas_name("Bo Chen", 2, 21, "part 1.docx"): docx_bytes(["Part one."]),
        canvas_name("Bo Chen", 2, 22, "part 2.txt"): "Part two, in Windows-1252 \u201cquotes\u201d.".encode("cp1252"),
        "leeann_1_text.html": page.encode(),
    }
    rows = {r["ID"]: r for r in read_submissions_zip(zip_bytes(files)).rows}
    assert rows["2"]["Essay"] == "Part one.\n\nPart two, in Windows-1252 \u201cquotes\u201d."
    assert rows["2"]["File"].count(";") == 1
    assert (rows["1"]["Student"], rows["1"]["Essay"]) == ("Ann Lee", "First part.\n\nSecond & last part.")


# -- the limits of an archive ----------------------------------------------------------------------------------


def test_a_zip_name_that_climbs_out_of_the_archive_is_refused_in_one_line() -> None:
    data = zip_bytes({"../../etc/evil.docx": docx_bytes(["x"]), "ok.docx": docx_bytes(["y"])})
    with pytest.raises(InputError, match=r"points outside the archive: refused") as refused:
        read_class_file(data, "s.zip")
    assert "\n" not in str(refused.value)
    with pytest.raises(InputError, match="outside the archive"):
        read_class_file(zip_bytes({"C:\\Windows\\x.docx": b"x"}), "s.zip")


def test_an_archive_past_its_limits_is_refused_before_anything_is_read() -> None:
    files = {f"s{i}.txt": b"A short essay about patience and waiting for things." for i in range(5)}
    with pytest.raises(InputError, match="5 files in one archive: the limit is 3"):
        read_submissions_zip(zip_bytes(files), ArchiveLimits(max_files=3))
    bomb = zip_bytes({"big.txt": b"a" * 5_000_000})  # deflates to a few kilobytes
    assert len(bomb) < 20_000
    with pytest.raises(InputError, match="unpacks to 5,000,000 bytes: the limit is 1,000,000"):
        read_submissions_zip(bomb, ArchiveLimits(max_total_bytes=1_000_000))


def test_a_zip_inside_the_zip_is_refused_as_one_file() -> None:
    inner = zip_bytes({"x.docx": docx_bytes(["inner"])})
    table = read_class_file(
        zip_bytes({"Ann Lee - Essay.docx": docx_bytes(["Outer essay."]), "more.zip": inner}), "s.zip"
    )
    assert [r["Essay"] for r in table.rows] == ["Outer essay."]
    assert table.refused == [
        ("more.zip", "a ZIP inside the ZIP is not opened: unzip it and zip its files with the others")
    ]


def test_a_broken_zip_and_an_encrypted_member_are_refused() -> None:
    with pytest.raises(InputError, match="not a ZIP archive"):
        read_class_file(b"PK\x03\x04 broken", "s.zip")
    data = bytearray(zip_bytes({"Ann Lee - Essay.txt": b"secret"}))
    for header in (b"PK\x03\x04", b"PK\x01\x02"):  # set the "encrypted" bit in both headers
        at = data.find(header)
        flag = at + (6 if header == b"PK\x03\x04" else 8)
        data[flag] |= 0x1
    table = read_class_file(bytes(data), "s.zip")
    assert table.refused[0][1].startswith("password-protected")


# -- the CLI's and the Python API's loaders -----------------------------------------------------------------------


def test_the_loaders_read_a_folder_a_zip_an_xlsx_and_a_windows_csv(tmp_path: Path) -> None:
    data, expected = canvas_zip()
    (tmp_path / "s.zip").write_bytes(data)
    folder = tmp_path / "submissions"
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        archive.extractall(folder)
    for source in (tmp_path / "s.zip", folder):
        essays = load_essays(source, RUBRIC)
        assert {e.id: e.text for e in essays} == {uid: essay for uid, (_, essay) in expected.items()}
        assert {e.id: e.metadata["Student"] for e in essays}["1000"] == "leeann"
    assert read_class_path(folder).read_as.startswith("folder of submissions: 7 students")
    sheet = tmp_path / "class.xlsx"
    sheet.write_bytes(xlsx_bytes({"Class": [["id", "text", "Ideas"], ["a1", ESSAYS["Ann Lee"], 2]]}))
    (essay,) = load_essays(sheet, RUBRIC)
    assert (essay.id, essay.text, essay.rater_scores) == ("a1", ESSAYS["Ann Lee"], {"Ideas": [2.0]})
    windows = tmp_path / "class.csv"
    windows.write_bytes("id,text\nz1,\u201cPatience\u201d is a virtue \u2013 I know.\n".encode("cp1252"))
    assert load_essays(windows, RUBRIC)[0].text == "\u201cPatience\u201d is a virtue \u2013 I know."


def test_a_folder_whose_files_cannot_be_read_is_one_line_saying_why(tmp_path: Path) -> None:
    (tmp_path / "Ann Lee - Essay.pdf").write_bytes(scanned_pdf_bytes())
    with pytest.raises(InputError, match=r"no essay could be read: Ann Lee - Essay\.pdf: this PDF has no text layer"):
        load_essays(tmp_path, RUBRIC)
