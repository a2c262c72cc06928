"""Reading a large run holds what its result needs, not every record's prompt, answer and tokens: the scores
(``runs export``, ``eval``) and the evidence table are read one record at a time."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.synthetic_runs import rubric_of, synthesize_run

from madrag.evaluation.evidence import evidence_table
from madrag.evaluation.run import load_run, open_store

ESSAYS = 150


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    return runs / synthesize_run(runs, ESSAYS, rubric_of(1), failed_every=7)


def _peak(work: Callable[[], Any]) -> tuple[int, Any]:
    tracemalloc.start()
    try:
        found = work()
        return tracemalloc.get_traced_memory()[1], found
    finally:
        tracemalloc.stop()


def _all_records(run_dir: Path, role: str | None = None) -> list[Any]:
    store = open_store(run_dir)
    try:
        return list(store.records(role=role))
    finally:
        store.close()


def test_the_scores_are_read_without_holding_every_judge_record(run_dir: Path) -> None:
    held, _ = _peak(lambda: _all_records(run_dir, "judge"))

    def scores() -> Any:
        store = open_store(run_dir)
        try:
            return store.scores()
        finally:
            store.close()

    peak, found = _peak(scores)
    assert len(found) == ESSAYS and sum(s.score is None for s in found) == ESSAYS // 7  # unreadable: missing
    assert peak < held / 3, f"reading the scores peaked at {peak:,} B; the Judge records take {held:,} B"


def test_evaluation_keeps_no_judge_record_and_a_report_keeps_them_without_prompts(run_dir: Path) -> None:
    assert load_run(run_dir, judges=False).judges == []
    kept = load_run(run_dir).judges
    assert kept and all(r.messages == [] and r.tokens is None and r.rationale for r in kept)


def test_the_evidence_table_reads_one_record_at_a_time(run_dir: Path) -> None:
    held, _ = _peak(lambda: _all_records(run_dir))
    peak, table = _peak(lambda: evidence_table(run_dir, ["MADRAG"]))
    assert peak < held / 3, f"the evidence table peaked at {peak:,} B; the records take {held:,} B"
    assert list(table["protocol"]) == ["MADRAG"] * len(table)


def test_the_report_written_a_batch_of_essays_at_a_time_is_the_page_rendered_whole(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The streamed report holds one batch of essays' records at a time, and its page is the one rendered from
    every Judge and debate record of the run at once (the same essays, debates, rationales and exemplars)."""
    import madrag.evaluation.report as report
    from madrag.evaluation.agreement import evaluate_run
    from madrag.evaluation.sources import load_sources

    monkeypatch.setattr(report, "ESSAYS_AT_ONCE", 10)  # 15 batches of the 150 essays
    written = report.write_report(run_dir, bootstrap=20, out=tmp_path / "report.html").read_text(encoding="utf-8")
    run = load_run(run_dir)  # every Judge record kept
    shown: dict[str, str] = {}  # the page rendered whole: every essay's block at once
    essays = "".join(report.essay_block(run, e, load_sources(run), shown) for e in run.essays)
    whole = report.page_head(run, evaluate_run(run, bootstrap=20)) + essays + report.page_tail(shown)
    assert written == whole and written.count("<summary>essay ") == ESSAYS

    held, _ = _peak(lambda: _all_records(run_dir))
    light = load_run(run_dir, judges=False)
    with open(os.devnull, "w", encoding="utf-8") as sink:
        peak, _ = _peak(lambda: report.write_essays(sink, light, {}))
    assert peak < held / 5, f"writing the essays peaked at {peak:,} B; the records take {held:,} B"


def test_the_streamed_evidence_table_is_the_table_of_every_record_read_whole(run_dir: Path, tmp_path: Path) -> None:
    """Counts and debates read by SQLite, two passes, give the table read from every parsed record (debate calls
    counted for each protocol whose Judge read them: here MADRAG's and a second protocol's Judges share them)."""
    from madrag.evaluation.evidence import evidence_frame
    from madrag.records import EvidenceCounts
    from madrag.store import RunStore

    records = []
    for i, record in enumerate(_all_records(run_dir)):
        counts = EvidenceCounts(checked=i % 5 != 0, quotes_found=i % 4, quotes_verified=i % 3 % (i % 4 + 1))
        counts.quotes_unverified = counts.quotes_found - counts.quotes_verified
        counts.placeholder_errors = i % 6 == 0
        records.append(record.model_copy(update={"evidence": None if i % 11 == 0 else counts}))
        if record.role == "judge" and i % 2:
            other = record.model_copy(update={"protocol": "MAD", "key": record.key + "|MAD", "evidence": counts})
            records.append(other)
    store = RunStore(tmp_path / "store.sqlite")
    try:
        store.put_many(records)
    finally:
        store.close()
    whole = evidence_frame(records, ["MADRAG", "MAD"])
    assert set(whole["protocol"]) == {"MADRAG", "MAD"} and set(whole["role"]) == {"advocate", "skeptic", "judge"}
    assert whole["quotes"].sum() > 0 and whole["placeholder_errors"].sum() > 0
    assert evidence_table(tmp_path, ["MADRAG", "MAD"]).equals(whole)


def test_the_streamed_score_rows_are_the_rows_read_whole(run_dir: Path, tmp_path: Path) -> None:
    """``runs export``'s rows, read a score and an essay at a time, are the rows made from every essay and score at
    once, a score whose essay the store does not keep included (without its human scores), in a part of the
    memory."""
    import shutil
    import sqlite3

    from madrag.evaluation.run import each_score_row, score_rows

    shutil.copytree(run_dir, tmp_path / "run")
    with sqlite3.connect(tmp_path / "run" / "store.sqlite") as conn:
        conn.execute("DELETE FROM essays WHERE id IN ('e00003', 'e00100')")
    rubric = rubric_of(1)
    store = open_store(tmp_path / "run")
    try:
        whole = score_rows(store.essays(), store.scores(), rubric)
        peak, widths = _peak(lambda: [len(row) for row in each_score_row(store, rubric)])
        held, _ = _peak(lambda: score_rows(store.essays(), store.scores(), rubric))
        assert list(each_score_row(store, rubric)) == whole and len(whole) == len(widths) == ESSAYS
    finally:
        store.close()
    assert [r["essay_id"] for r in whole[:2]] == ["e00003", "e00100"]  # scores without an essay first
    assert peak < held / 3, f"the streamed rows peaked at {peak:,} B; read whole they take {held:,} B"
