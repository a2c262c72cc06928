"""The run store's schema version and its migrations (madrag.pipeline.migrations): a store written before versions
existed opens through the migrations and reads back unchanged, the store alone refuses it, a new store starts at
the latest version, a newer store is refused, and a failed migration changes nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.pipeline.migrations import STORE_MIGRATIONS, migrate, open_store
from madrag.providers.base import TokenLogprob, TopLogprob
from madrag.records import AgentRecord, ScoreResult
from madrag.store import RunStore
from madrag.store.schema import SCHEMA_VERSION, OlderStore, schema_version

# the schema exactly as the store wrote it before it carried a version (frozen here on purpose)
UNVERSIONED_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY,
    essay_id TEXT NOT NULL,
    trait TEXT NOT NULL,
    protocol TEXT NOT NULL,
    role TEXT NOT NULL,
    round INTEGER NOT NULL,
    error TEXT,
    created_at REAL NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_essay ON records (protocol, essay_id, trait);
CREATE TABLE IF NOT EXISTS essays (id TEXT PRIMARY KEY, position INTEGER NOT NULL, essay TEXT NOT NULL);
"""


def sample_records() -> list[AgentRecord]:
    """A Judge record with a score distribution and logprobs, and a failed Advocate record."""
    tokens = [TokenLogprob(token=" 2", logprob=-0.2, top=[TopLogprob(token=" 3", logprob=-1.9)])]
    judge = AgentRecord(
        run_id="old",
        key="MADRAG|e1|Ideas|judge|1|0",
        essay_id="e1",
        trait="Ideas",
        protocol="MADRAG",
        role="judge",
        text="Solid.\nFinal score: 2",
        tokens=tokens,
        score=ScoreResult(parsed=2, distribution={2: 0.8, 3: 0.2}, mode="parsed_text", reported=2),
        context={"exemplars": ["p1", "p2"]},
        created_at=1000.0,
    )
    advocate = AgentRecord(
        run_id="old", key="MADRAG|e1|Ideas|advocate|1|0", essay_id="e1", trait="Ideas", protocol="MADRAG",
        role="advocate", error="ProviderError: down", created_at=1001.0,
    )  # fmt: skip
    return [judge, advocate]


def write_unversioned_store(path: Path, records: list[AgentRecord], essays: list[Essay]) -> None:
    """A store as the code before schema versions wrote it, with raw SQL (no user_version)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(UNVERSIONED_SCHEMA)
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("run_id", '"old"'))
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("config", '{"protocols": [{"name": "MADRAG"}]}'))
    for r in records:
        row = (r.key, r.essay_id, r.trait, r.protocol, r.role, r.round, r.error, r.created_at, r.model_dump_json())
        conn.execute("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    for i, essay in enumerate(essays):
        conn.execute("INSERT INTO essays VALUES (?, ?, ?)", (essay.id, i, essay.model_dump_json()))
    conn.close()


def user_version(path: Path) -> int:
    """The schema version in the file, read through a fresh connection."""
    conn = sqlite3.connect(path)
    try:
        return schema_version(conn)
    finally:
        conn.close()


def test_a_new_store_starts_at_the_latest_version(tmp_path: Path) -> None:
    RunStore(tmp_path / "store.sqlite").close()
    assert user_version(tmp_path / "store.sqlite") == len(STORE_MIGRATIONS) == SCHEMA_VERSION == 4


def test_the_store_alone_refuses_an_older_store_untouched(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    write_unversioned_store(path, sample_records(), [])
    before = path.read_bytes()
    for read_only in (False, True):
        with pytest.raises(OlderStore, match=r"written by an earlier madrag \(schema version 0\)"):
            RunStore(path, read_only=read_only)
    assert path.read_bytes() == before and not (tmp_path / "store.v0.sqlite").exists()


def test_an_unversioned_store_is_migrated_and_reads_back_identically(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    records = sample_records()
    essays = [Essay(id="e1", text="An essay.", rater_scores={"Ideas": [2.0, 3.0]}, rater_ids={"Ideas": [0, 1]})]
    write_unversioned_store(path, records, essays)
    assert user_version(path) == 0

    store = open_store(path)
    try:
        assert user_version(path) == SCHEMA_VERSION
        assert (tmp_path / "store.v0.sqlite").is_file()  # the store as it was, kept before it was migrated
        assert user_version(tmp_path / "store.v0.sqlite") == 0
        assert sorted(store.records(), key=lambda r: r.key) == sorted(records, key=lambda r: r.key)
        assert store.get(records[0].key) == records[0]
        assert store.essays() == essays
        assert store.get_meta("run_id") == "old"
        assert store.get_meta("config") == {"protocols": [{"name": "MADRAG"}]}
        assert store.count() == 2
        assert store.put(records[0]) is False  # the old keys still guard against duplicates
    finally:
        store.close()
    # opened again: already at the latest version, nothing re-run, same content
    again = open_store(path)
    try:
        assert user_version(path) == SCHEMA_VERSION and again.count() == 2
    finally:
        again.close()


def test_a_store_newer_than_the_code_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    RunStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    for opened in (RunStore, open_store):
        with pytest.raises(InputError, match=r"schema version 5, newer than this madrag reads \(4\)"):
            opened(path)
    assert user_version(path) == SCHEMA_VERSION + 1


def test_migrations_run_in_order_and_a_failing_one_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    RunStore(path).close()
    ran: list[str] = []

    def add_column(conn: sqlite3.Connection) -> None:
        ran.append("next")
        conn.execute("ALTER TABLE records ADD COLUMN note TEXT")

    def broken(conn: sqlite3.Connection) -> None:
        ran.append("after")
        raise RuntimeError("the migration after failed")

    conn = sqlite3.connect(path, isolation_level=None)
    try:
        with pytest.raises(RuntimeError, match="the migration after failed"):
            migrate(conn, path, [*STORE_MIGRATIONS, add_column, broken])
        assert ran == ["next", "after"]
        columns = [row[1] for row in conn.execute("PRAGMA table_info(records)")]
        assert "note" not in columns and schema_version(conn) == SCHEMA_VERSION  # rolled back with the failure

        assert migrate(conn, path, [*STORE_MIGRATIONS, add_column]) == SCHEMA_VERSION  # the version it had
        assert schema_version(conn) == SCHEMA_VERSION + 1
        assert "note" in [row[1] for row in conn.execute("PRAGMA table_info(records)")]
    finally:
        conn.close()


def _version_3_with_answers_named_requests(path: Path) -> list[AgentRecord]:
    """A store of version 3 (a store of today less version 4) whose records name their answers as records made
    before issue 48 did, ``requests``; the records as they read today (two answers, three for the Judge)."""
    judge, advocate = sample_records()
    records = [judge.model_copy(update={"answers": 3}), advocate.model_copy(update={"answers": 2})]
    store = RunStore(path)
    for r in records:
        store.put(r)
    store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "UPDATE records SET record = json_set(json_remove(record, '$.answers'), '$.requests', "
        "json_extract(record, '$.answers'))"
    )
    conn.execute("PRAGMA user_version = 3")
    conn.close()
    return records


def test_records_written_before_issue_48_read_with_their_answers_on_disk_and_through_views(tmp_path: Path) -> None:
    """Version 4: a record names its answers ``answers`` (``requests`` before issue 48). The record model knows
    only the current name: a reader reads an older store through views that rename the key as it reads, the file
    unchanged and not copied into memory; a writer renames it on disk once (the store kept beside itself)."""
    path = tmp_path / "store.sqlite"
    records = _version_3_with_answers_named_requests(path)
    raw = sqlite3.connect(path)
    try:
        (blob,) = raw.execute("SELECT record FROM records").fetchone()
    finally:
        raw.close()
    assert "requests" in json.loads(blob)  # the model knows only ``answers``: the old key is read by the migrations
    before = path.read_bytes()

    reader = open_store(path, read_only=True)
    try:
        assert sorted(reader.records(), key=lambda r: r.key) == sorted(records, key=lambda r: r.key)
        assert [r.answers for r in reader.records(answers_only=True)] == [3, 2]
        assert reader.get(records[1].key) == records[1]
        database = [file for _, name, file in reader._conn.execute("PRAGMA database_list") if name == "stored"]
        assert database == [str(path.resolve())]  # the file itself, attached, not a copy
    finally:
        reader.close()
    assert path.read_bytes() == before and user_version(path) == 3

    writer = open_store(path)
    try:
        assert sorted(writer.records(), key=lambda r: r.key) == sorted(records, key=lambda r: r.key)
        raw = [json.loads(blob) for (blob,) in writer._conn.execute("SELECT record FROM records")]
        assert [("answers" in r, "requests" in r) for r in raw] == [(True, False)] * 2
    finally:
        writer.close()
    assert user_version(path) == SCHEMA_VERSION and user_version(tmp_path / "store.v3.sqlite") == 3
