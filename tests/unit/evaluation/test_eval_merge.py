"""``madrag eval RUN_A RUN_B``: two runs (sets 7 and 8) merged as the MADRAG paper's Figure 2 merges them."""

from __future__ import annotations

import asyncio
import csv
from pathlib import Path

import pytest

from madrag.cli.evaluate import eval_command
from madrag.errors import InputError
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers import ProviderSpec


def _run(asap: Path, tmp_path: Path, essay_set: int) -> Path:
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=asap / f"rubric_set{essay_set}.json",
        run_dir=tmp_path / f"set{essay_set}",
        limit=8,
        protocols=["MA", "MAD"],
        provider=ProviderSpec(kind="fake"),
        cache_dir=tmp_path / "cache",
        response_cache=False,
    )
    asyncio.run(execute(job))
    return job.run_dir


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open()))


def test_eval_merges_runs_by_protocol_and_trait_label(asap: Path, tmp_path: Path) -> None:
    run7, run8 = _run(asap, tmp_path, 7), _run(asap, tmp_path, 8)
    out = tmp_path / "merged"
    eval_command([run7, run8], bootstrap=0, out=out)
    per_run = {
        run: {(r["protocol"], r["label"]): r for r in _rows(run / "eval" / "qwk.csv") if r["qwk"]}
        for run in (run7, run8)
    }
    merged = {(r["protocol"], r["label"]): r for r in _rows(out / "merged_qwk.csv")}
    both = set(per_run[run7]) & set(per_run[run8])
    human = "Human-Human (evaluated essays)"
    assert (human, "Idea") in both and (human, "Cnv.") in both  # "Ideas" (set 7) = "Ideas and Content" (set 8)
    for key in both:
        want = (float(per_run[run7][key]["qwk"]) + float(per_run[run8][key]["qwk"])) / 2
        assert float(merged[key]["qwk"]) == pytest.approx(want)
        assert merged[key]["n_runs"] == "2"
    assert merged[human, "Sty."]["n_runs"] == "1" and merged[human, "Voc."]["n_runs"] == "1"  # one set only
    # the fake backend gives every essay the same score: QWK is undefined in each run, and so in the merged table
    for key in (("MA", "Idea"), ("MAD", "Cnv."), ("MA", "Voc.")):
        assert key not in per_run[run7] and key not in per_run[run8]
        assert merged[key]["qwk"] == "" and merged[key]["n_runs"] == "0" and merged[key]["n"] == "0"
    table = _rows(out / "merged_qwk_table.csv")
    row = next(r for r in table if r["protocol"] == human)
    values = [float(v) for k, v in row.items() if k not in ("protocol", "mean") and v]
    assert float(row["mean"]) == pytest.approx(sum(values) / len(values))
    assert next(r for r in table if r["protocol"] == "MA")["mean"] == ""
    assert "| MA | — | — |" in (out / "merged.md").read_text()
    assert "Figure 2" in (out / "merged.md").read_text()
    assert (out / "figure2.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # Figure 2 drawn, as the paper shows it


def test_eval_of_one_positional_run_and_bad_merges(asap: Path, tmp_path: Path) -> None:
    run7 = _run(asap, tmp_path, 7)
    eval_command([run7], bootstrap=0)
    assert (run7 / "eval" / "qwk.csv").is_file()
    with pytest.raises(InputError, match="one run"):
        eval_command([run7, run7], data=asap / "training_set_rel3_sets7_8.tsv", bootstrap=0)
