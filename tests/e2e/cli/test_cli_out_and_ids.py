"""Where commands write and which essay ids are accepted: ``--out`` in a folder that does not exist yet is
created, an ``--out`` that cannot be written is one error line, and ids that cannot be path parts or web
addresses (empty, ``.``, ``..``, ``/``, ``\\``, control characters) are refused where essays are loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from madrag.cli.app import app
from madrag.data.loaders import load_asap, load_essays
from madrag.errors import InputError
from madrag.rubric import Rubric, Trait

RUBRIC = Rubric(traits=[Trait(name="Ideas", min=0, max=3, levels=dict.fromkeys(range(4), "a level"))])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, asap: Path) -> Path:
    """A finished fake MAD run of two set-7 essays."""
    folder = tmp_path_factory.mktemp("out")
    args = [
        "score",
        "--data", str(asap / "training_set_rel3_sets7_8.tsv"),
        "--rubric", str(asap / "rubric_set7.json"),
        "--run-dir", str(folder / "run"),
        "--cache-dir", str(folder / "cache"),
        "--protocol", "MAD", "--provider", "fake", "--limit", "2",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    return folder / "run"


def invoke(*args: str) -> tuple[int, str, BaseException | None]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output, result.exception


@pytest.mark.parametrize(
    ("command", "target"),
    [
        (["report", "--bootstrap", "10"], "missing/dir/report.html"),
        (["runs", "export"], "missing/dir/scores.csv"),
        (["runs", "export", "--what", "records"], "missing/dir/records.jsonl"),
        (["errors"], "missing/dir/errors.csv"),
        (["eval", "--bootstrap", "10"], "missing/dir/eval/qwk.csv"),
    ],
)
def test_out_in_a_missing_folder_is_created(run: Path, tmp_path: Path, command: list[str], target: str) -> None:
    out = tmp_path / target
    given = out.parent if command[0] == "eval" else out  # eval's --out is a folder
    code, output, exc = invoke(*command, str(run), "--out", str(given))
    assert code == 0 and exc is None, output
    assert out.is_file() and out.stat().st_size > 0


@pytest.mark.parametrize(
    ("command", "out", "needle"),
    [
        (["report", "--bootstrap", "10"], "a_folder", "is a folder; give a file name"),
        (["runs", "export"], "a_file/scores.csv", "it is a file, not a folder"),
        (["errors"], "a_file/errors.csv", "it is a file, not a folder"),
        (["eval", "--bootstrap", "10"], "a_file", "it is a file, not a folder"),
        (["eval-consensus", "--bootstrap", "10"], "a_file", "it is a file, not a folder"),
        (["confidence", "analyze", "--no-meta"], "a_file", "it is a file, not a folder"),
    ],
)
def test_out_that_cannot_be_written_is_one_input_error(
    run: Path, tmp_path: Path, command: list[str], out: str, needle: str
) -> None:
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "a_file").write_text("in the way\n")
    _, output, exc = invoke(*command, str(run), "--out", str(tmp_path / out))
    assert isinstance(exc, InputError) and needle in str(exc), (output, exc)
    assert "\n" not in str(exc)
    assert (tmp_path / "a_file").read_text() == "in the way\n"


def test_out_for_a_missing_run_writes_nothing(tmp_path: Path) -> None:
    _, _, exc = invoke("report", str(tmp_path / "nope"), "--out", str(tmp_path / "new" / "report.html"))
    assert isinstance(exc, InputError) and "no run at" in str(exc)
    assert not (tmp_path / "new").exists() and not (tmp_path / "nope").exists()


def test_report_out_in_a_missing_folder_through_the_console_entry_point(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "missing" / "dir" / "report.html"
    cmd = [sys.executable, "-m", "madrag.cli", "report", str(run), "--bootstrap", "10", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert out.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")


# -- essay ids ---------------------------------------------------------------------------------------------

BAD_IDS = [
    (".", "cannot be used"),
    ("..", "cannot be used"),
    ("a\x07b", "control character U+0007"),
    ("a\nb", "control character U+000A"),
    ("  ", "the essay id is empty"),
]


def test_ids_with_slashes_are_kept(tmp_path: Path) -> None:
    csv = tmp_path / "essays.csv"
    csv.write_text('id,text,Ideas\n"class 7/anna","An essay.",2\n"a\\b","Another.",1\n', encoding="utf-8")
    assert [e.id for e in load_essays(csv, RUBRIC)] == ["class 7/anna", "a\\b"]


@pytest.mark.parametrize(("bad", "needle"), BAD_IDS)
def test_unusable_ids_are_refused_in_csv_and_jsonl(tmp_path: Path, bad: str, needle: str) -> None:
    csv = tmp_path / "essays.csv"
    quoted = bad.replace('"', '""')
    csv.write_text(f'id,text,Ideas\nok,"Fine.",1\n"{quoted}","An essay.",2\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"essays\.csv:") as found:
        load_essays(csv, RUBRIC)
    assert needle in str(found.value)
    jsonl = tmp_path / "essays.jsonl"
    jsonl.write_text(json.dumps({"id": bad, "text": "An essay.", "Ideas": 2}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"essays\.jsonl:1: ") as found:
        load_essays(jsonl, RUBRIC)
    assert needle in str(found.value)


def test_a_null_jsonl_id_is_missing_not_the_id_none(tmp_path: Path) -> None:
    jsonl = tmp_path / "essays.jsonl"
    jsonl.write_text('{"id": null, "text": "An essay."}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"essays.jsonl:1: the essay id is missing"):
        load_essays(jsonl, RUBRIC)


def test_unusable_asap_ids_are_refused(tmp_path: Path) -> None:
    rubric = Rubric(
        essay_set=7, traits=[Trait(name="Ideas", column="trait1", min=0, max=3, levels=dict.fromkeys(range(4), "x"))]
    )
    tsv = tmp_path / "asap.tsv"
    tsv.write_text("essay_id\tessay_set\tessay\trater1_trait1\n1\t7\tFine.\t2\n..\t7\tAn essay.\t2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"asap.tsv:3: essay id '\.\.' cannot be used"):
        load_asap(tsv, rubric)


def test_the_cli_refuses_an_unusable_id_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "essays.csv"
    data.write_text("id,text,Ideas\n..,An essay.,2\n", encoding="utf-8")
    rubric = tmp_path / "rubric.json"
    rubric.write_text(RUBRIC.model_dump_json(), encoding="utf-8")
    cmd = [sys.executable, "-m", "madrag.cli", "score", "--data", str(data), "--rubric", str(rubric)]
    cmd += ["--run-dir", str(tmp_path / "run"), "--provider", "fake", "--protocol", "MA", "--fold", "all"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: {data}:2: essay id '..' cannot be used (it names a folder in paths); give another id"
    ]
