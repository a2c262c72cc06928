"""Each input mistake is one clear error, the same in the three front doors: one ``error:`` line and exit code 2 on
the command line, one of madrag's error types (one line) in the Python API, a short 4xx JSON body over HTTP. A
command refused by its checks writes nothing to its run directory (no half-made run that a fixed command would
then be refused against)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.web_helpers import FAKE, RUBRIC, client_for, make_config

import madrag
from madrag.errors import InputError, MadragError, RubricError

TRAIT = {"name": "Ideas", "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "...")}
SMALL = {"traits": [TRAIT]}
HUGE_SCALE = {"traits": [{"name": "Ideas", "min": 0, "max": 1_000_000, "levels": {"0": "none", "1": "some"}}]}


def madrag_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=120)


def one_line_error(proc: subprocess.CompletedProcess[str], needle: str) -> str:
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and needle in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and len(errors[0]) < 1300
    return errors[0]


def _jsonl(path: Path, rows: list[str]) -> Path:
    path.write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def _rows_csv(path: Path, n: int) -> Path:
    path.write_text("id,text\n" + "".join(f"e{i},An essay about the lake.\n" for i in range(n)), encoding="utf-8")
    return path


def test_the_row_limit_is_raised_with_max_rows(tmp_path: Path) -> None:
    rubric = _write(tmp_path / "rubric.json", json.dumps(SMALL))
    data = _rows_csv(tmp_path / "six.csv", 6)
    args = ["score", "--data", str(data), "--rubric", str(rubric), "--protocol", "MA", "--fold", "all",
            "--provider", "fake", "--cache-dir", str(tmp_path / "c"), "--run-dir", str(tmp_path / "r")]  # fmt: skip
    done = madrag_cli(*args, "--max-rows", "6")
    assert done.returncode == 0, done.stderr


def _deep(depth: int) -> str:
    return '{"id": "1", "text": "An essay.", "x": ' + "[" * depth + "]" * depth + "}"


CLI_CASES: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "retries -1": (lambda d: ["--retries", "-1"], "retries"),
    "concurrency 0": (lambda d: ["--concurrency", "0"], "concurrency"),
    "limit -1": (lambda d: ["--limit", "-1"], "limit"),
    "run dir is a file": (lambda d: ["--run-dir", str(_file(d / "afile"))], "is a file, not a folder"),
    "cache dir is a file": (lambda d: ["--cache-dir", str(_file(d / "cfile"))], "is a file, not a folder"),
    "JSONL nested 100,000 deep": (
        lambda d: ["--data", str(_jsonl(d / "deep.jsonl", [_deep(100_000)]))],
        "nested too deeply",
    ),
    "JSONL id is an object": (
        lambda d: ["--data", str(_jsonl(d / "id.jsonl", ['{"id": {"x": 1}, "text": "An essay."}']))],
        "essay id must be a text or a number",
    ),
    "JSONL text is a list": (
        lambda d: ["--data", str(_jsonl(d / "t.jsonl", ['{"id": "1", "text": ["not", "text"]}']))],
        "text must be a string",
    ),
    "JSONL lone surrogate": (
        lambda d: ["--data", str(_jsonl(d / "s.jsonl", ['{"id": "1", "text": "bad \\ud800 text"}']))],
        "lone surrogate",
    ),
    "rubric with a million levels": (
        lambda d: ["--rubric", str(_write(d / "huge.json", json.dumps(HUGE_SCALE)))],
        "1,000,001 levels; a trait has at most 101",
    ),
    "a CSV of 20,001 rows": (lambda d: ["--data", str(_rows_csv(d / "big.csv", 20_001))], "more than 20,000 rows"),
    "a CSV over --max-rows": (
        lambda d: ["--data", str(_rows_csv(d / "six.csv", 6)), "--max-rows", "5"],
        "more than 5 rows, the limit: score the file in parts, or raise the limit with --max-rows",
    ),
    "openai without --model": (lambda d: ["--provider", "openai"], "needs --model"),
}


def _file(path: Path) -> Path:
    path.write_text("x", encoding="utf-8")
    return path


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("case", list(CLI_CASES))
def test_cli_one_line_and_nothing_written(case: str, tmp_path: Path) -> None:
    make, needle = CLI_CASES[case]
    data = _jsonl(tmp_path / "essays.jsonl", ['{"id": "1", "text": "An essay about the lake."}'])
    rubric = _write(tmp_path / "rubric.json", json.dumps(SMALL))
    run = tmp_path / "run"
    base = {"--data": str(data), "--rubric": str(rubric), "--run-dir": str(run), "--cache-dir": str(tmp_path / "c")}
    extra = make(tmp_path)
    for flag in list(base):
        if flag in extra:
            del base[flag]
    args = ["score", *(x for kv in base.items() for x in kv), "--protocol", "MA", "--fold", "all", "--provider", "fake"]
    args += extra
    one_line_error(madrag_cli(*args), needle)
    assert not run.exists()  # nothing written: no half-made run


def test_a_fixed_command_runs_after_a_refused_one(tmp_path: Path) -> None:
    """Issue: a command refused for a missing option saved a half-made run, and the fixed command was then
    refused as 'different settings'. Now the refused one writes nothing."""
    data = _jsonl(tmp_path / "essays.jsonl", ['{"id": "1", "text": "An essay about the lake."}'])
    rubric = _write(tmp_path / "rubric.json", json.dumps(SMALL))
    base = ["score", "--data", str(data), "--rubric", str(rubric), "--run-dir", str(tmp_path / "run"), "--protocol",
            "MA", "--fold", "all", "--cache-dir", str(tmp_path / "c")]  # fmt: skip
    one_line_error(madrag_cli(*base, "--provider", "openai"), "needs --model")
    fixed = madrag_cli(*base, "--provider", "fake")
    assert fixed.returncode == 0, fixed.stderr
    listed = madrag_cli("runs", "list", str(tmp_path))
    assert listed.returncode == 0 and "None" not in listed.stdout


API_CASES: dict[str, tuple[dict[str, Any], type[MadragError], str]] = {
    "a list as the text": ({"essays": [{"id": "1", "text": ["not", "text"]}]}, InputError, "text must be a string"),
    "no protocol": ({"protocol": []}, InputError, "no protocol"),
    "a lone surrogate": ({"essays": ["bad \ud800 text"]}, InputError, "lone surrogate"),
    "essay_concurrency 0": ({"essay_concurrency": 0}, InputError, "essay_concurrency"),
    "limit -1": ({"limit": -1}, InputError, "limit"),
    "2,000,000 characters": ({"essays": ["word " * 400_000]}, InputError, "maximum essay size"),
    "an id that is an object": ({"essays": [{"id": {"x": 1}, "text": "An essay."}]}, InputError, "essay id"),
    "a million-level rubric": ({"rubric": HUGE_SCALE}, RubricError, "a trait has at most 101"),
}


@pytest.mark.parametrize("case", list(API_CASES))
def test_api_one_line_of_madrags_own_type(case: str, tmp_path: Path) -> None:
    update, kind, needle = API_CASES[case]
    run = tmp_path / "run"
    args: dict[str, Any] = {"essays": ["An essay about the lake."], "rubric": SMALL, "protocol": "MA"}
    args.update({"provider": "fake", "run_dir": run, "cache_dir": tmp_path / "c", "progress": False})
    args.update(update)
    with pytest.raises(kind) as caught:
        madrag.score(args.pop("essays"), args.pop("rubric"), **args)
    assert needle in str(caught.value) and "\n" not in str(caught.value) and len(str(caught.value)) < 700
    assert not run.exists()


@pytest.mark.parametrize("which", ["run_dir", "cache_dir"])
def test_api_folder_that_is_a_file(which: str, tmp_path: Path) -> None:
    afile = _file(tmp_path / "afile")
    args: dict[str, Any] = {"run_dir": tmp_path / "run", "cache_dir": tmp_path / "c", which: afile}
    with pytest.raises(InputError, match="is a file, not a folder"):
        madrag.score(["An essay."], SMALL, protocol="MA", provider="fake", progress=False, **args)
    assert afile.read_text() == "x" and not (tmp_path / "run").exists()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with client_for(make_config(tmp_path)) as c:
        yield c


def _short_4xx(response: Any) -> str:
    assert 400 <= response.status_code < 500, response.text[:500]
    assert len(response.content) < 700, len(response.content)
    message: str = response.json()["error"]["message"]
    assert "\n" not in message and "Traceback" not in response.text
    return message


def test_http_a_huge_scale_is_a_short_400(client: TestClient) -> None:
    message = _short_4xx(client.post("/api/rubrics", json={"name": "huge", **HUGE_SCALE}))
    assert "1,000,001 levels; a trait has at most 101" in message


@pytest.mark.parametrize(
    ("essay", "needle"),
    [
        ({"id": "q1", "text": "word " * 400_000}, "essay"),
        ({"id": "q1", "text": "bad \ud800 text"}, "surrogate"),
        ({"id": {"x": 1}, "text": "An essay."}, "id"),
        ({"id": "q1", "text": ["not", "text"]}, "text"),
    ],
)
def test_http_bad_essays_are_short_4xx(client: TestClient, essay: dict[str, Any], needle: str) -> None:
    body = {"rubric": RUBRIC, "essay": essay, "backend": FAKE}
    raw = json.dumps(body)  # ASCII with escapes: a lone surrogate travels as the JSON text \ud800
    message = _short_4xx(client.post("/api/score", content=raw, headers={"content-type": "application/json"}))
    assert needle in message.lower()


def test_http_no_protocol_is_a_short_4xx(client: TestClient) -> None:
    body = {"rubric": RUBRIC, "essays": [{"id": "1", "text": "An essay."}], "protocols": [], "backend": FAKE}
    _short_4xx(client.post("/api/runs", json=body))


def test_demo_with_a_trait_the_rubric_lacks_is_one_line(tmp_path: Path) -> None:
    run = tmp_path / "demo"
    one_line_error(madrag_cli("demo", "--traits", "Ideas,Voice", "--run-dir", str(run)), "unknown trait 'Voice'")
    assert not run.exists()  # refused before the model loads or the run is made
