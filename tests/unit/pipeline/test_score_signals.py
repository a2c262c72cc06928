"""The review queue's signals kept with each final score row (madrag.store.signals) are exactly those the review
desk derived from the run's records before the rows held them (each Judge record's and its debate turns' JSON
values, every record of the run read), for a run with a debate (MADRAG), one whose quotes are checked with the
result told to the Judge (``--evidence-check feedback``, ``--verify-claims``) and one with neither (MA), on the fake
backend; a run store written before the rows held them (schema 2) gets the same signals, in memory when read and on
disk (kept beside itself first) when opened for writing."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from madrag.api.scoring import run_job
from madrag.evaluation.run import open_store
from madrag.pipeline import migrations
from madrag.pipeline.job import ScoreJob
from madrag.providers.fake import FakeProvider
from madrag.rubric import load_rubric
from madrag.settings import ScoringSettings
from madrag.store import RunStore
from madrag.store.signals import SIGNAL_FIELDS, debate_signals

RUNS = {
    "MADRAG": (["MADRAG"], ScoringSettings()),
    "MADRAG, evidence fed back": (["MADRAG"], ScoringSettings(evidence_check="feedback", verify_claims=True)),
    "MA, no check": (["MA"], ScoringSettings(evidence_check="off")),
}
Signals = dict[tuple[str, str, str], dict[str, Any]]


def _from_records(store: RunStore) -> Signals:
    """Every score's signals derived as the review desk derived them from the records (every record read)."""
    records = dict(store.each_record_fields(SIGNAL_FIELDS))
    return {
        (s.protocol, s.essay_id, s.trait): debate_signals(records.get(s.record_key), records) for s in store.scores()
    }


def _from_rows(store: RunStore) -> Signals:
    protocols = {s.protocol for s in store.scores()}
    return {(p, e, t): found for p in protocols for (e, t), found in store.score_signals(p).items()}


def _run(asap: Path, run_dir: Path, protocols: list[str], settings: ScoringSettings) -> None:
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=load_rubric(asap / "rubric_set7.json").only(["Ideas", "Style"]),
        run_dir=run_dir,
        limit=3,
        protocols=protocols,
        embedder="hashing",
        cache_dir=run_dir.parent / "cache",
        response_cache=False,
        settings=settings,
    )
    run_job(job, backend=FakeProvider(), progress=False)


def _as_schema_2(path: Path) -> None:
    """The store at ``path`` as schema 2 kept it: score rows without their signals."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("ALTER TABLE scores DROP COLUMN signals")
        conn.execute("PRAGMA user_version = 2")
    finally:
        conn.close()


@pytest.mark.parametrize("name", sorted(RUNS))
def test_signals_read_from_the_rows_are_those_derived_from_the_records(asap: Path, tmp_path: Path, name: str) -> None:
    protocols, settings = RUNS[name]
    run = tmp_path / "run"
    _run(asap, run, protocols, settings)
    store = open_store(run)
    try:
        rows, derived = _from_rows(store), _from_records(store)
    finally:
        store.close()
    assert len(rows) == 3 * 2 and rows == derived
    found = {key for signals in rows.values() for key in signals}
    if protocols == ["MADRAG"]:  # the debaters' confidences, and the quotes checked (recorded by default)
        assert {"advocate_confidence", "skeptic_confidence", "unverified_quotes"} <= found
    else:
        assert found == set()  # no debate, no quote checked: no signal beyond the scores


def test_a_schema_2_store_gets_the_same_signals_read_and_resumed(asap: Path, tmp_path: Path) -> None:
    protocols, settings = RUNS["MADRAG, evidence fed back"]
    run = tmp_path / "run"
    _run(asap, run, protocols, settings)
    store = open_store(run)
    try:
        expected = _from_rows(store)
    finally:
        store.close()
    old = tmp_path / "old"
    shutil.copytree(run, old)
    _as_schema_2(old / "store.sqlite")
    before = (old / "store.sqlite").read_bytes()
    reader = open_store(old)  # read-only: the score rows copied and given their signals, the file left as it is
    try:
        assert _from_rows(reader) == expected
        attached = [file for _, name, file in reader._conn.execute("PRAGMA database_list") if name == "stored"]
        assert attached == [str((old / "store.sqlite").resolve())]  # its records read from the file, not copied
    finally:
        reader.close()
    assert (old / "store.sqlite").read_bytes() == before and not (old / "store.v2.sqlite").exists()
    writer = migrations.open_store(old / "store.sqlite")  # for writing: migrated on disk, the old store kept
    try:
        assert _from_rows(writer) == expected == _from_records(writer)
    finally:
        writer.close()
    kept = sqlite3.connect(old / "store.v2.sqlite")
    try:
        assert kept.execute("PRAGMA user_version").fetchone()[0] == 2
    finally:
        kept.close()
