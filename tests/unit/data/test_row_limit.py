"""One row limit for every loader, as the web server's: a data file past it is refused as it streams, at the
first row past the limit, before it is read whole; the caller raises it (``max_rows``, ``--max-rows``) or, for a
run's own inputs read again, lifts it (None)."""

from __future__ import annotations

import io
import json
import time
import tracemalloc
from pathlib import Path

import pytest
from tests.class_file_makers import xlsx_bytes

from madrag.data.loaders import load_asap, load_essays, load_table
from madrag.data.row_limit import MAX_ROWS, check_rows, count_rows
from madrag.errors import InputError
from madrag.rubric import Rubric

IDEAS = {"name": "Ideas", "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "x")}
RUBRIC = Rubric.model_validate({"traits": [IDEAS]})


def _csv(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("id,text,Ideas\n")
        for i in range(n):
            out.write(f'e{i},"An essay, its second line\nand its third.",{i % 4}\n')
    return path


def test_the_server_and_the_loaders_share_one_limit() -> None:
    from madrag.server import Limits

    assert Limits().max_rows == MAX_ROWS == 20_000


def test_a_file_one_row_over_the_limit_is_refused_and_one_at_it_is_read(tmp_path: Path) -> None:
    at = _csv(tmp_path / "at.csv", 5)
    assert len(load_table(at, RUBRIC, max_rows=5)) == 5
    over = _csv(tmp_path / "over.csv", 6)
    with pytest.raises(InputError, match=r"over.csv: more than 5 rows, the limit: .* raise the limit with --max-rows"):
        load_essays(over, RUBRIC, max_rows=5)
    assert len(load_essays(over, RUBRIC, max_rows=None)) == 6  # a run's own inputs: no limit


def test_a_million_row_csv_is_refused_after_reading_only_its_first_rows(tmp_path: Path) -> None:
    big = _csv(tmp_path / "big.csv", 1_000_000)  # 49 MB: read whole, its essays would take gigabytes
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(InputError, match="more than 20,000 rows"):
            load_essays(big, RUBRIC)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 10 and peak < 20 * 1024 * 1024


def test_every_format_counts_its_rows(tmp_path: Path) -> None:
    jsonl = tmp_path / "e.jsonl"
    jsonl.write_text("".join(json.dumps({"id": f"e{i}", "text": "An essay."}) + "\n\n" for i in range(4)))
    with pytest.raises(InputError, match="more than 3 rows"):
        load_essays(jsonl, RUBRIC, max_rows=3)
    assert len(load_essays(jsonl, RUBRIC, max_rows=4)) == 4
    tsv = tmp_path / "asap.tsv"
    rows = ["essay_id\tessay_set\tessay\trater1_trait1"] + [f"{i}\t7\tAn essay.\t1" for i in range(4)]
    tsv.write_text("\n".join(rows) + "\n")
    column = Rubric.model_validate({"traits": [{**RUBRIC.traits[0].model_dump(), "column": "trait1"}]})
    with pytest.raises(InputError, match="more than 3 rows"):
        load_asap(tsv, column, essay_set=7, max_rows=3)
    book = tmp_path / "class.xlsx"
    book.write_bytes(xlsx_bytes({"S": [["id", "text"], *([f"e{i}", "An essay."] for i in range(4))]}))
    with pytest.raises(InputError, match="more than 3 rows"):
        load_table(book, RUBRIC, max_rows=3)
    assert len(load_table(book, RUBRIC, max_rows=4)) == 4


def test_rows_are_counted_as_the_file_streams_whatever_its_encoding(tmp_path: Path) -> None:
    utf16 = tmp_path / "u16.csv"
    utf16.write_bytes("id,text\n".encode("utf-16") + "a,\u00e9t\u00e9\nb,x\n".encode("utf-16-le"))
    check_rows(utf16, ".csv", 2)
    with pytest.raises(InputError, match="more than 1 rows"):
        check_rows(utf16, ".csv", 1)
    one_line = tmp_path / "long.jsonl"
    one_line.write_text("x" * 9_000_000)  # one line longer than a chunk: counted in pieces, once
    check_rows(one_line, ".jsonl", 1)
    assert count_rows(io.StringIO('id,text\na,"two\nlines"\n\n,\nb,c\n'), ".csv") == 2
    assert count_rows(io.StringIO("{}\n\n{}\n{}\n"), ".jsonl", stop_after=1) == 2


def test_the_python_api_holds_a_data_file_to_the_limit_and_takes_another(tmp_path: Path) -> None:
    import madrag

    data = _csv(tmp_path / "six.csv", 6)
    options: dict[str, object] = {"protocol": "MA", "provider": "fake", "progress": False, "fold": "all"}
    options["cache_dir"] = tmp_path / "cache"
    with pytest.raises(InputError, match="more than 5 rows"):
        madrag.score(data, RUBRIC, max_rows=5, **options)  # type: ignore[arg-type]
    assert len(madrag.score(data, RUBRIC, max_rows=6, **options).scores) == 6  # type: ignore[arg-type]
