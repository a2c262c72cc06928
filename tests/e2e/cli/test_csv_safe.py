"""Every CSV madrag writes is formula-safe, by one shared writer (:mod:`madrag.files.csv_safe`): a cell a spreadsheet
would run as a formula is written with a leading ``'`` (OWASP, "CSV Injection": cells starting with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return), read back by Python's csv module as a spreadsheet would load it."""

from __future__ import annotations

import ast
import csv
import io
import subprocess
import sys
from pathlib import Path

import pandas as pd
from tests.web_helpers import FAKE, RUBRIC, client_for, make_config, wait_status

import madrag
from madrag.files.csv_safe import FORMULA_START, csv_text, safe_cell, write_csv, write_frame

SRC = Path(__file__).resolve().parents[3] / "src" / "madrag"
LINK = '=HYPERLINK("http://example.com/x","click")'
SMALL = {"traits": [{"name": "Ideas", "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "...")}]}


def _cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def _formula(cell: str) -> bool:
    """A cell a spreadsheet runs as a formula: formula-like, and not a plain number such as -1."""
    try:
        float(cell)
    except ValueError:
        return cell.startswith(FORMULA_START)
    return False


def test_formula_cells_are_text_and_numbers_stay_numbers() -> None:
    cells = _cells(csv_text([["id", "score"], [LINK, -1], ["+1", 2], ["@SUM(A1)", 3], ["\tx", 4], ["plain", 5]]))
    assert not any(_formula(c) for c in cells)
    assert "'" + LINK in cells and "-1" in cells and "plain" in cells  # a negative number is no formula
    assert safe_cell(None) == "" and safe_cell(2.5) == 2.5


def test_every_csv_writer_of_the_package_is_the_shared_one() -> None:
    """No module but madrag/files/csv_safe.py calls csv.writer / csv.DictWriter or a frame's to_csv."""
    found = []
    for path in SRC.rglob("*.py"):
        if path.name == "csv_safe.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("writer", "DictWriter", "to_csv"):
                if node.attr == "to_csv" or (isinstance(node.value, ast.Name) and node.value.id == "csv"):
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == []


def test_frames_labels_and_cells(tmp_path: Path) -> None:
    frame = pd.DataFrame({"essay": [LINK, "ok"], "qwk": [0.5, -0.25]}, index=pd.Index(["=1+1", "b"], name="row"))
    write_frame(frame, tmp_path / "t.csv")
    cells = _cells((tmp_path / "t.csv").read_text())
    assert "'" + LINK in cells and "'=1+1" in cells and "-0.25" in cells
    assert not any(_formula(c) for c in cells)


def test_numbers_and_number_text_read_back_as_numbers_formulas_stay_text(tmp_path: Path) -> None:
    """A number, or text that is exactly one (``"-1.5"``, as errors.csv's differences are), is written as it is, so
    pandas reads a numeric column; formula text (even one that starts like a number) keeps its ``'``."""
    formulas = ["=SUM(A1:A2)", "+cmd|' /C calc'!A0", "-2+3", "@x", "-1.5e", "\t-1", "-1,5", "--1"]
    rows = [["id", "diff", "diff_text", "score_text", "note"]]
    rows += [[f"e{i}", -1.5 * i, str(-1.5 * i), ("-3", "+2", "-0.25", ".5", "-1e-3")[i % 5], f] for i, f in
             enumerate(formulas)]  # fmt: skip
    write_csv(tmp_path / "errors.csv", rows)
    back = pd.read_csv(tmp_path / "errors.csv")
    assert {back[c].dtype.kind for c in ("diff", "diff_text", "score_text")} == {"f"}
    assert back["diff_text"].tolist() == [-1.5 * i for i in range(len(formulas))]
    assert back["note"].tolist() == ["'" + f for f in formulas]
    frame = pd.DataFrame({"essay": ["a", "b"], "delta": ["-1.5", "=1+1"], "n": ["-2", "3"]})
    write_frame(frame, tmp_path / "frame.csv", index=False)
    again = pd.read_csv(tmp_path / "frame.csv")
    assert again["n"].dtype.kind == "i" and again["delta"].tolist() == ["-1.5", "'=1+1"]


def test_cli_export_of_a_formula_id(tmp_path: Path) -> None:
    run = tmp_path / "run"
    madrag.score([{"id": LINK, "text": "An essay about the lake."}], SMALL, protocol="MA", provider="fake",
                 run_dir=run, cache_dir=tmp_path / "c", progress=False)  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "madrag.cli", "runs", "export", str(run)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cells = _cells((run / "scores.csv").read_text(encoding="utf-8"))
    assert "'" + LINK in cells and LINK not in cells


def test_http_export_of_a_formula_id(tmp_path: Path) -> None:
    with client_for(make_config(tmp_path)) as client:
        body = {"rubric": RUBRIC, "essays": [{"id": LINK, "text": "An essay."}], "protocols": ["MAD"], "backend": FAKE}
        created = client.post("/api/runs", json=body)
        assert created.status_code == 201, created.text
        done = wait_status(client, created.json()["id"], timeout=60)
        assert done["status"] == "finished", done
        exported = client.get(f"/api/runs/{done['id']}/export", params={"format": "csv"})
    assert exported.status_code == 200
    cells = _cells(exported.text)
    assert "'" + LINK in cells and LINK not in cells
