"""ZIP-based files (a .docx, an .xlsx, a ZIP of submissions) checked part by part before python-docx or openpyxl
opens them: a part that unpacks past its limit or past 100 to 1, a row of a sheet of millions of cells, a part whose
stated size lies. Each bomb is built here, small on disk (zeros pack about 1,000 to 1, written in streamed
chunks), and refused in one line with the reading process under 500 MB; a PDF (no ZIP) whose pages inflate to
hundreds of MB is held by pypdf's own limit on a stream's output (75 MB), which the last test measures too."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

import pytest
from tests.class_file_makers import docx_bytes, xlsx_bytes, zip_bytes

from madrag.data.class_files import read_class_file
from madrag.data.documents import document_text
from madrag.data.spreadsheets import MAX_COLUMNS
from madrag.data.submissions import ArchiveLimits, read_submissions_zip
from madrag.data.zip_parts import MIB, PartLimits
from madrag.errors import InputError

ROW = b'<row><c t="inlineStr"><is><t>x</t></is></c></row>'


def _with_part(container: bytes, part: str, size: int, chunk: bytes = b"\0" * MIB) -> bytes:
    """``container`` (a .docx or .xlsx) with one more part of ``size`` bytes of ``chunk`` repeated, written in
    streamed chunks (never held whole), deflated."""
    buf = io.BytesIO(container)
    with zipfile.ZipFile(buf, "a", zipfile.ZIP_DEFLATED) as archive, archive.open(part, "w", force_zip64=True) as out:
        left = size
        while left > 0:
            out.write(chunk[:left])
            left -= len(chunk)
    return buf.getvalue()


def _sheet(rows: bytes) -> str:
    ns = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    return f'<worksheet xmlns="{ns}"><sheetData>{rows.decode()}</sheetData></worksheet>'


def _replace_sheet(sheet_xml: str) -> bytes:
    """A workbook made by openpyxl whose first sheet is ``sheet_xml``."""
    source = zipfile.ZipFile(io.BytesIO(xlsx_bytes({"S": [["id", "text"], ["a", "b"]]})))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            data = sheet_xml.encode() if info.filename == "xl/worksheets/sheet1.xml" else source.read(info)
            out.writestr(info.filename, data)
    return buf.getvalue()


def _lie_about_size(data: bytes, part: str, stated: int) -> bytes:
    """``data`` with ``part``'s unpacked size stated as ``stated`` in its local header and the central
    directory (a ZIP whose sizes lie: what it really unpacks to is larger)."""
    out = bytearray(data)
    name = part.encode()
    for signature, size_at, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):
        at = out.find(signature)
        while at != -1:
            if out[at + name_at : at + name_at + len(name)] == name:
                out[at + size_at : at + size_at + 4] = struct.pack("<I", stated)
            at = out.find(signature, at + 4)
    return bytes(out)


def test_a_docx_whose_picture_unpacks_past_the_part_limit_is_refused_before_python_docx_reads_it() -> None:
    bomb = _with_part(docx_bytes(["An essay about patience."]), "word/media/image1.png", 80 * MIB)
    assert len(bomb) < 200_000
    start = time.monotonic()
    with pytest.raises(InputError) as refused:
        document_text(bomb, "ann.docx")
    message = str(refused.value)
    assert message.startswith("ann.docx: its part 'word/media/image1.png' unpacks to 83,886,080 bytes")
    assert "\n" not in message and time.monotonic() - start < 2


def test_a_part_that_unpacks_past_100_to_1_is_a_bomb_under_the_part_limit() -> None:
    bomb = _with_part(docx_bytes(["An essay."]), "word/media/image1.png", 10 * MIB)
    with pytest.raises(InputError, match=r"over 100 to 1, a ZIP bomb's ratio\): refused; save the essay without"):
        document_text(bomb, "ann.docx")
    fine = _with_part(docx_bytes(["An essay about patience."]), "word/media/image1.png", MIB // 2)
    assert document_text(fine, "ann.docx") == "An essay about patience."  # under a megabyte: no ratio asked


def test_the_limits_of_a_document_are_a_parameter() -> None:
    essay = docx_bytes(["An essay about patience."])
    assert document_text(essay, "a.docx", PartLimits()) == "An essay about patience."
    with pytest.raises(InputError, match=r"its parts unpack to .* the limit is 1,000"):
        document_text(essay, "a.docx", PartLimits(max_total_bytes=1_000))
    with pytest.raises(InputError, match="parts inside, the limit is 2"):
        document_text(essay, "a.docx", PartLimits(max_parts=2))


def test_a_workbook_whose_sheet_unpacks_past_the_limits_is_refused_before_openpyxl_opens_it() -> None:
    bomb = _with_part(_replace_sheet(_sheet(ROW * 3)), "xl/worksheets/sheet2.xml", 70 * MIB, ROW * 20_000)
    start = time.monotonic()
    with pytest.raises(InputError, match=r"x.xlsx: its part 'xl/worksheets/sheet2.xml' unpacks to 73,400,320 bytes"):
        read_class_file(bomb, "x.xlsx")
    assert time.monotonic() - start < 2
    small = ArchiveLimits(parts=PartLimits(max_total_bytes=10_000))
    with pytest.raises(InputError, match=r"its parts unpack to .* the limit is 10,000: save the class's sheet"):
        read_class_file(xlsx_bytes({"S": [["a"], ["b" * 30_000]]}), "x.xlsx", limits=small)


def test_a_row_of_a_million_cells_is_refused_before_openpyxl_builds_it() -> None:
    numbers = "".join(f"<c><v>{i}</v></c>" for i in range(1_000_000)).encode()  # packs under 100 to 1
    wide = _replace_sheet(_sheet(b"<row>" + numbers + b"</row>"))  # 20 MB of one row: gigabytes to openpyxl
    start = time.monotonic()
    with pytest.raises(InputError, match=f"a row of a sheet has over {MAX_COLUMNS:,} cells"):
        read_class_file(wide, "x.xlsx")
    assert time.monotonic() - start < 2
    cells = b'<c t="inlineStr"><is><t>x</t></is></c>'
    ok = read_class_file(_replace_sheet(_sheet(b"<row>" + cells * MAX_COLUMNS + b"</row>" + ROW)), "y.xlsx")
    assert len(ok.header) == MAX_COLUMNS and len(ok.rows) == 1


def test_a_part_whose_stated_size_lies_unpacks_no_further_than_it_says() -> None:
    honest = docx_bytes(["An essay about patience. " * 2_000])
    real = zipfile.ZipFile(io.BytesIO(honest)).getinfo("word/document.xml").file_size
    liar = _lie_about_size(honest, "word/document.xml", 100)  # its text said to unpack to 100 bytes
    assert real > 40_000
    with zipfile.ZipFile(io.BytesIO(liar)) as archive, archive.open("word/document.xml") as part:
        with pytest.raises(zipfile.BadZipFile, match="Bad CRC-32"):
            part.read()  # the part ends at its stated 100 bytes and fails its check there: nothing more unpacked
    with pytest.raises(InputError, match="cannot be read as a Word document") as refused:
        document_text(liar, "ann.docx")
    assert "\n" not in str(refused.value)
    sheet = _lie_about_size(_replace_sheet(_sheet(ROW * 200_000)), "xl/worksheets/sheet1.xml", 1_000)
    with pytest.raises(InputError, match="not an Excel workbook that can be opened"):
        read_class_file(sheet, "x.xlsx")


def test_a_file_of_a_zip_of_submissions_packed_past_100_to_1_refuses_the_archive() -> None:
    essay = docx_bytes(["Ann's essay about patience, which is long enough to read."])
    archive = zip_bytes({"Ann Lee - Essay.docx": essay, "zeros.txt": b"\0" * (3 * MIB)})
    with pytest.raises(InputError, match=r"zeros.txt: unpacks to over 100 times its size in the ZIP: refused"):
        read_submissions_zip(archive)
    inner = zip_bytes({"Ann Lee - Essay.docx": _with_part(essay, "word/media/a.png", 80 * MIB)})
    table = read_class_file(inner, "class.zip")  # a bomb inside one student's document: that file refused
    assert table.rows == [] and "unpacks to 83,886,080 bytes" in table.refused[0][1]


def _pdf_of_zeros(pages: int, each: int) -> bytes:
    """A PDF of ``pages`` pages whose content streams each inflate to ``each`` bytes (deflated in chunks)."""
    packer = zlib.compressobj(9)
    chunk = b"0 0 m " * (MIB // 6)
    stream = b"".join(packer.compress(chunk) for _ in range(each // len(chunk))) + packer.flush()
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode()]
    for i in range(pages):
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R >>".encode())
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


_MEASURE = """
import json, sys
from pathlib import Path
from madrag.data.class_files import read_class_file
from madrag.errors import InputError
said = {}
for path in sys.argv[1:]:
    try:
        table = read_class_file(Path(path).read_bytes(), Path(path).name)
        said[path] = "; ".join(why for _, why in table.refused) or "accepted"
    except InputError as exc:
        said[path] = str(exc)
# this process's own peak (VmHWM, its memory map's high-water mark): getrusage's ru_maxrss would count the peak of
# the process it was started from, which Linux folds in at exec (a test worker that ran many tests: 500 MB and more)
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"said": said, "peak_mb": peak / 1024}))
"""


def test_a_docx_an_xlsx_and_a_pdf_bomb_are_refused_with_the_process_under_500_mb(tmp_path: Path) -> None:
    docx_bomb = tmp_path / "essay.docx"
    docx_bomb.write_bytes(_with_part(docx_bytes(["An essay."]), "word/media/image1.png", 300 * MIB))
    xlsx_bomb = tmp_path / "class.xlsx"
    xlsx_bomb.write_bytes(_with_part(_replace_sheet(_sheet(ROW)), "xl/worksheets/sheet2.xml", 400 * MIB, ROW * 20_000))
    pdf_bomb = tmp_path / "essay.pdf"
    pdf_bomb.write_bytes(_pdf_of_zeros(pages=3, each=200 * MIB))  # not a ZIP: pypdf's own limit on a stream's output
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(docx_bomb), str(xlsx_bomb), str(pdf_bomb)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    found = json.loads(done.stdout)
    assert found["peak_mb"] < 500, found
    for path, said in found["said"].items():
        assert said != "accepted" and "\n" not in said, (path, said)
        assert "unpacks to" in said or path.endswith(".pdf"), (path, said)


def test_one_document_uploaded_on_its_own_is_held_to_the_limits_given() -> None:
    essay = docx_bytes(["An essay about patience, long enough to be read as one."])
    assert read_class_file(essay, "ann.docx").rows[0]["Essay"].startswith("An essay")
    table = read_class_file(essay, "ann.docx", limits=ArchiveLimits(parts=PartLimits(max_total_bytes=1_000)))
    assert table.rows == [] and "the limit is 1,000" in table.refused[0][1]
