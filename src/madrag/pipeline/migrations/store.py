"""A run store an earlier madrag wrote, brought to the current schema (:data:`madrag.store.schema.SCHEMA_VERSION`),
and every run store opened through here (:func:`open_store`): the store itself knows only the current format.

``STORE_MIGRATIONS[i]`` is a plain function that brings a store from version ``i`` to ``i + 1``; :func:`migrate`
runs the ones a store still needs, all in one transaction together with the new version number, so a crash
mid-way leaves the store as it was. A later schema change is a new function appended to
:data:`STORE_MIGRATIONS` (and the current tables in :mod:`madrag.store.schema`); one that has shipped is never
edited.
A step creates its tables with the current statements of :mod:`madrag.store.schema` while they are the same as
when the step shipped; a later change to one of those tables freezes the statement the step ran here first.

Version 1 is the schema the store had before it carried a version (tables ``meta``, ``records``, ``essays``). A
store written then reads as version 0 with those tables already there: migration 1 creates only what is missing
(every statement says ``IF NOT EXISTS``), so such a store is stamped version 1 with nothing changed. Version 2
adds the run's final scores as rows (``scores``); the rows of a store that holds records are derived from them
once (:mod:`madrag.pipeline.migrations.scores`). Version 3 keeps the review queue's signals of each score with its
row (``scores.signals``), derived from its records by :mod:`madrag.store.signals` as a row written now is. Version 4
names a record's answers ``answers`` in every record: a record written before issue 48 (in a store of any earlier
version, one migrated to version 2 or 3 included) holds them under ``requests``.

Opened for writing (a run started or resumed), a store is migrated on disk, first copied beside itself
(:func:`backup_path`, as the hand-codes file keeps its previous version), after a warning on the
``madrag.store`` logger says so. Reading never migrates the file: :func:`read_view` gives a read-only
connection's store as the latest version, the store itself when it is; one whose remaining steps all have a read
form (:data:`READ_FORMS`: version 3's signals derived into a temporary copy of the score rows alone, version 4's
renamed key read through a view) as those views over the file, its records unchanged and not copied; else (a store
whose score rows are still to be derived) a copy in memory migrated there.

Version 4's rename, measured on a store of 40,002 synthetic MADRAG records with prompts and tokens (876 MiB; 2 busy
cores): on disk, once, 30 s when every record has the old key, 4 s to find that none has; read through the view,
no copy (an in-memory copy would hold the whole 876 MiB), every record read in 26 s when each has the old key
(8 s when none has; 5-7 s from a store of version 4).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from madrag.pipeline.migrations.scores import SCORES_PENDING, upgrade_scores
from madrag.store import RunStore
from madrag.store.schema import ESSAYS, META, RECORDS, immediate, read_only_uri, refuse_newer, schema_version, tables
from madrag.store.signals import signals_json

Migration = Callable[[sqlite3.Connection], None]
log = logging.getLogger("madrag.store")
V1_TABLES = ("meta", "records", "essays")
"""The tables of version 1, which an unversioned store written before versions existed already has."""


def _v1_tables(conn: sqlite3.Connection) -> None:
    """Version 1: the run's settings (``meta``), one row per agent call (``records``), the essays scored."""
    for statement in (META, *RECORDS, ESSAYS):
        conn.execute(statement)


_V2_SCORES = """CREATE TABLE IF NOT EXISTS scores (
    protocol TEXT NOT NULL,
    essay_id TEXT NOT NULL,
    trait TEXT NOT NULL,
    score INTEGER,
    cause TEXT,
    expected REAL,
    record_keys TEXT NOT NULL,
    created_at REAL NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (protocol, essay_id, trait)
)"""
"""The ``scores`` table as migration 2 created it (frozen here: version 3 added ``signals``)."""


def _v2_scores(conn: sqlite3.Connection) -> None:
    """Version 2: the run's final scores as rows (``scores``: one per protocol, essay and trait, the score or
    NULL with the cause of its absence, the records it came from, the whole score as JSON). A store that holds
    records gets them derived from its records once (:data:`SCORES_PENDING`)."""
    conn.execute(_V2_SCORES)
    conn.execute(
        "INSERT OR IGNORE INTO meta (key, value) SELECT ?, 'true' WHERE EXISTS (SELECT 1 FROM records)",
        (SCORES_PENDING,),
    )


def _v3_signals(conn: sqlite3.Connection) -> None:
    """Version 3: each final score's review signals kept with its row (``signals``), derived from its Judge record
    and the debate it read (:func:`madrag.store.signals.signals_json`, as the rows written since are); rows still
    to be derived (:data:`SCORES_PENDING`) get theirs as they are written. As migration 1, it adds only what is
    missing (a store written before versions, with the current tables, is stamped and its signals derived)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(scores)")}
    if "signals" not in columns:
        conn.execute("ALTER TABLE scores ADD COLUMN signals TEXT NOT NULL DEFAULT '{}'")
    rows = conn.execute("SELECT rowid, coalesce(value ->> '$.record_key', '') FROM scores").fetchall()
    texts = signals_json(conn, [key for _, key in rows])
    update = [(text, rowid) for (rowid, _), text in zip(rows, texts, strict=True)]
    conn.executemany("UPDATE scores SET signals = ? WHERE rowid = ?", update)


_OLD_ANSWERS = "instr(record, '\"requests\":') > 0 AND json_type(record, '$.requests') IS NOT NULL"
"""A stored record (``record``, its JSON) that holds its answers under the name before issue 48, ``requests`` (the
text is searched first: a record of today has no such key, and is not parsed)."""
_RENAMED = "json_set(json_remove(record, '$.requests'), '$.answers', json_extract(record, '$.requests'))"
"""Such a record with the key renamed ``answers``."""


def _v3_signals_view(conn: sqlite3.Connection) -> None:
    """Version 3 for a reader: the file's score rows copied into a temporary table (one row per protocol, essay
    and trait, not the records), their signals derived there as on disk."""
    conn.execute("DROP VIEW temp.scores")
    conn.execute("CREATE TEMP TABLE scores AS SELECT * FROM stored.scores")
    _v3_signals(conn)


def _v4_answers(conn: sqlite3.Connection) -> None:
    """Version 4: every record names the answers it used ``answers`` (issue 48; before, ``requests``)."""
    conn.execute(f"UPDATE records SET record = {_RENAMED} WHERE {_OLD_ANSWERS}")


def _v4_answers_view(conn: sqlite3.Connection) -> None:
    """Version 4 read through a view: the file's records, each with the key renamed as it is read."""
    conn.execute("DROP VIEW temp.records")
    conn.execute(
        "CREATE TEMP VIEW records AS SELECT key, essay_id, trait, protocol, role, round, error, created_at, "
        f"CASE WHEN {_OLD_ANSWERS} THEN {_RENAMED} ELSE record END AS record FROM stored.records"
    )


STORE_MIGRATIONS: Sequence[Migration] = (_v1_tables, _v2_scores, _v3_signals, _v4_answers)
"""``STORE_MIGRATIONS[i]`` takes a store from version ``i`` to ``i + 1``, in order; append, never edit."""
READ_FORMS: Mapping[int, Migration] = {2: _v3_signals_view, 3: _v4_answers_view}
"""``READ_FORMS[i]``: how a reader takes step ``STORE_MIGRATIONS[i]`` without changing or copying the file, as
temporary views over its tables (attached as ``stored``; each table is first a view of itself), where a step
changes nothing a reader could not compute as it reads."""


def content_version(conn: sqlite3.Connection) -> int:
    """The version a store's content has: its ``user_version``, except that an unversioned store which has the
    version-1 tables is version 1 (what the store wrote before it carried a version)."""
    found = schema_version(conn)
    if found == 0 and set(V1_TABLES) <= tables(conn):
        return 1
    return found


def _scores_pending(conn: sqlite3.Connection) -> bool:
    if "meta" not in tables(conn):
        return False
    return conn.execute("SELECT 1 FROM meta WHERE key = ?", (SCORES_PENDING,)).fetchone() is not None


def read_view(
    conn: sqlite3.Connection, path: Path, migrations: Sequence[Migration] | None = None
) -> sqlite3.Connection:
    """The store on the read-only connection ``conn`` as the latest version of ``migrations`` (default
    :data:`STORE_MIGRATIONS`), the file left as it is: ``conn`` itself when its content is at that version with
    its score rows, else an in-memory copy migrated there (``conn`` is then closed). An InputError when the store
    is newer than this code."""
    steps = STORE_MIGRATIONS if migrations is None else migrations
    target = len(steps)
    found = content_version(conn)
    refuse_newer(found, target, path)
    if found == target and not _scores_pending(conn):
        return conn
    if migrations is None and all(i in READ_FORMS for i in range(found, target)):
        if not _scores_pending(conn):
            return _viewed(conn, path, found, target)
    log.info(
        "run store %s: schema version %d read as version %d in memory (the file is not changed)", path, found, target
    )
    memory = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.backup(memory)
        migrate(memory, path, steps, announce=False)
    except BaseException:
        memory.close()
        raise
    conn.close()
    return memory


def _viewed(conn: sqlite3.Connection, path: Path, found: int, target: int) -> sqlite3.Connection:
    """The store on ``conn`` (version ``found``) as version ``target`` through :data:`READ_FORMS`: an empty
    database of that version in memory, the file attached read-only as ``stored`` and read through temporary
    views named as its tables (``conn`` is then closed)."""
    names = sorted(tables(conn))
    view = sqlite3.connect(":memory:", uri=True, isolation_level=None)
    try:
        view.execute("ATTACH DATABASE ? AS stored", (read_only_uri(path),))
        for name in names:
            view.execute(f'CREATE TEMP VIEW "{name}" AS SELECT * FROM stored."{name}"')
        for i in range(found, target):
            READ_FORMS[i](view)
        view.execute(f"PRAGMA user_version = {target}")
    except BaseException:
        view.close()
        raise
    log.info(
        "run store %s: schema version %d read as version %d through views (the file is not changed)",
        path,
        found,
        target,
    )
    conn.close()
    return view


def backup_path(path: Path, version: int) -> Path:
    """Where a store of schema ``version`` is kept before it is migrated on disk: beside it, named for its version
    (``store.v1.sqlite``), as the hand-codes file keeps its previous version."""
    return path.with_name(f"{path.stem}.v{version}{path.suffix}")


def _backup(conn: sqlite3.Connection, target: Path) -> None:
    """A consistent copy of the store on ``conn`` at ``target`` (SQLite's backup; an earlier copy is kept)."""
    if target.exists():
        return
    copy = sqlite3.connect(target)
    try:
        conn.backup(copy)
    finally:
        copy.close()


def migrate(
    conn: sqlite3.Connection, path: Path, migrations: Sequence[Migration] | None = None, *, announce: bool = True
) -> int:
    """Bring the store on ``conn`` (an autocommit connection) to the latest version of ``migrations`` (default
    :data:`STORE_MIGRATIONS`) and return the version it had. A new, empty store opened for writing is left to the
    store, which creates it at the current version. An InputError, with nothing changed, when the store is newer
    than this code; a migration that fails rolls back every step of this call. With ``announce``, a store is
    migrated only after a warning on the ``madrag.store`` logger says so, and is first kept beside itself
    (:func:`backup_path`)."""
    steps = STORE_MIGRATIONS if migrations is None else migrations
    target = len(steps)
    found = schema_version(conn)
    if found < target and (tables(conn) or not announce):  # an empty file read in memory: an empty store
        if announce:  # kept before the change (SQLite copies no store it is writing)
            _backup(conn, backup_path(path, found))
        with immediate(conn):  # one migrator at a time; the others then find it done
            found = schema_version(conn)
            if announce and found < target:
                log.warning(
                    "note: run store %s was written by an older madrag (schema version %d): migrating it to version %d "
                    "on disk (the store as it was is kept in %s)",
                    path,
                    found,
                    target,
                    backup_path(path, found).name,
                )
            for step in steps[found:]:
                step(conn)
            if found < target:
                conn.execute(f"PRAGMA user_version = {target}")
    refuse_newer(found, target, path)
    return found


class _OlderStores:
    """The :class:`~madrag.store.schema.StoreUpgrade` a store opened through :func:`open_store` is given."""

    def on_disk(self, conn: sqlite3.Connection, path: Path) -> None:
        migrate(conn, path)

    def for_reading(self, conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
        return read_view(conn, path)


OLDER_STORES = _OlderStores()
"""Brings an older store to the current schema: on disk for a writer, in memory for a reader."""


def open_store(path: Path, *, read_only: bool = False, lock: bool = False) -> RunStore:
    """The run store at ``path`` (a :class:`~madrag.store.RunStore`) in the current format, whatever madrag wrote
    it: for writing, an older store is migrated on disk (kept beside itself first) and its score rows derived once;
    ``read_only``, the same is done in memory and the file is left as it is. ``lock``: as the store's."""
    store = RunStore(path, read_only=read_only, lock=lock, upgrade=OLDER_STORES)
    try:
        upgrade_scores(store)  # a run made before its scores were rows gets them (in memory when read-only)
    except BaseException:
        store.close()
        raise
    return store
