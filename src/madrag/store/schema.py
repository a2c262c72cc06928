"""The run store's schema version and its migrations: a run made today opens tomorrow.

The version is SQLite's ``PRAGMA user_version``. ``MIGRATIONS[i]`` is a plain function that brings a store from
version ``i`` to ``i + 1``; :func:`migrate` runs the ones a store still needs when it is opened, all in one
transaction together with the new version number, so a crash mid-way leaves the store as it was.

Version 1 is the schema the store had before it carried a version (tables ``meta``, ``records``, ``essays``). A
store written then reads as version 0 with those tables already there: migration 1 creates only what is
missing (every statement says ``IF NOT EXISTS``), so such a store is stamped version 1 with nothing changed.

A later schema change is a new function appended to :data:`MIGRATIONS`; one that has shipped is never edited.
A store of a newer version than this code knows is refused (:class:`~madrag.errors.InputError`), never guessed at.

A store migrated on disk is first copied beside itself (:func:`backup_path`), so a run made by an earlier
commit can be read by it again. Version 2 adds the run's final scores as rows (``scores``); the rows of a store
that holds records are derived from them once by :mod:`madrag.pipeline.migrations`, which knows the protocols.

Reading never migrates: :func:`read_view` gives a read-only connection's store as the latest version without
writing to the file. An unversioned store with the version-1 tables already *is* version 1 and is read as it
is; an older store is copied into memory and migrated there. Only a store opened for writing (a run started
or resumed) is migrated on disk, after a warning on the ``madrag.store`` logger says so.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from madrag.errors import InputError

Migration = Callable[[sqlite3.Connection], None]
log = logging.getLogger("madrag.store")
V1_TABLES = ("meta", "records", "essays")
"""The tables of version 1, which an unversioned store written before versions existed already has."""


def _v1_tables(conn: sqlite3.Connection) -> None:
    """Version 1: the run's settings (``meta``), one row per agent call (``records``), the essays scored."""
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute(
        """CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY,
    essay_id TEXT NOT NULL,
    trait TEXT NOT NULL,
    protocol TEXT NOT NULL,
    role TEXT NOT NULL,
    round INTEGER NOT NULL,
    error TEXT,
    created_at REAL NOT NULL,
    record TEXT NOT NULL
)"""
    )
    conn.execute("CREATE INDEX IF NOT EXISTS records_essay ON records (protocol, essay_id, trait)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS essays (id TEXT PRIMARY KEY, position INTEGER NOT NULL, essay TEXT NOT NULL)"
    )


SCORES_PENDING = "scores_pending"
"""The meta key of a store whose final-score rows are still to be derived from its records: set by migration 2 on
a store that holds records, cleared when :mod:`madrag.pipeline.migrations` has filled its ``scores`` table."""


def _v2_scores(conn: sqlite3.Connection) -> None:
    """Version 2: the run's final scores as rows (``scores``: one per protocol, essay and trait, the score or
    NULL with the cause of its absence, the records it came from, the whole score as JSON). A store that holds
    records gets them derived from its records once (:data:`SCORES_PENDING`)."""
    conn.execute(
        """CREATE TABLE IF NOT EXISTS scores (
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
    )
    conn.execute(
        "INSERT OR IGNORE INTO meta (key, value) SELECT ?, 'true' WHERE EXISTS (SELECT 1 FROM records)",
        (SCORES_PENDING,),
    )


MIGRATIONS: Sequence[Migration] = (_v1_tables, _v2_scores)
"""``MIGRATIONS[i]`` takes a store from version ``i`` to ``i + 1``, in order; append, never edit."""


def schema_version(conn: sqlite3.Connection) -> int:
    """The schema version a store's file says it has (0: none, i.e. new or written before versions)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def content_version(conn: sqlite3.Connection) -> int:
    """The version a store's content has: its ``user_version``, except that an unversioned store which has the
    version-1 tables is version 1 (what the store wrote before it carried a version)."""
    found = schema_version(conn)
    if found == 0 and set(V1_TABLES) <= _tables(conn):
        return 1
    return found


def scores_pending(conn: sqlite3.Connection) -> bool:
    """Whether the store's final-score rows are still to be derived from its records (:data:`SCORES_PENDING`)."""
    if "meta" not in _tables(conn):
        return False
    return conn.execute("SELECT 1 FROM meta WHERE key = ?", (SCORES_PENDING,)).fetchone() is not None


def in_memory(conn: sqlite3.Connection) -> bool:
    """Whether ``conn``'s store is a copy in memory (an older store read without changing its file)."""
    return any(name == "main" and not file for _, name, file in conn.execute("PRAGMA database_list"))


def _refuse_newer(found: int, target: int, path: Path) -> None:
    if found > target:
        raise InputError(
            f"run store {path} has schema version {found}, newer than this madrag reads ({target}); "
            "open it with the newer madrag that wrote it"
        )


def read_view(
    conn: sqlite3.Connection, path: Path, migrations: Sequence[Migration] | None = None
) -> sqlite3.Connection:
    """The store on the read-only connection ``conn`` as the latest version of ``migrations`` (default
    :data:`MIGRATIONS`), the file left as it is: ``conn`` itself when its content is at that version, else an
    in-memory copy migrated there (``conn`` is then closed). An InputError when the store is newer than this
    code."""
    steps = MIGRATIONS if migrations is None else migrations
    target = len(steps)
    found = content_version(conn)
    _refuse_newer(found, target, path)
    if found == target and not scores_pending(conn):
        return conn
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
    :data:`MIGRATIONS`) and return the version it had. An InputError, with nothing changed, when the store is
    newer than this code; a migration that fails rolls back every step of this call. With ``announce``, a store
    that already holds a run is migrated only after a warning on the ``madrag.store`` logger says so (a new,
    empty store is not announced)."""
    steps = MIGRATIONS if migrations is None else migrations
    target = len(steps)
    found = schema_version(conn)
    if found < target:
        if announce and _tables(conn):  # kept before the change (SQLite copies no store it is writing)
            _backup(conn, backup_path(path, found))
        conn.execute("BEGIN IMMEDIATE")  # one migrator at a time; the others then find it done
        try:
            found = schema_version(conn)
            if announce and found < target and _tables(conn):
                kept = backup_path(path, found)
                log.warning(
                    "note: run store %s was written by an older madrag (schema version %d): migrating it to version %d "
                    "on disk (the store as it was is kept in %s)",
                    path,
                    found,
                    target,
                    kept.name,
                )
            for step in steps[found:]:
                step(conn)
            if found < target:
                conn.execute(f"PRAGMA user_version = {target}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
    _refuse_newer(found, target, path)
    return found


def open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to the store at ``path`` that writes nothing beside it, as the latest version
    (:func:`read_view`): ``mode=ro`` while a ``-wal`` file exists (a writer has the store open, or died with it
    open: its last records are in that file), else ``immutable`` (nothing to recover; no ``-shm`` / ``-wal``
    is created, so a store on a read-only filesystem opens too). An InputError when it cannot be read."""
    if not path.is_file():
        raise InputError(f"no run store at {path}")
    wal = path.with_name(path.name + "-wal")
    uri = f"{path.resolve().as_uri()}?{'mode=ro' if wal.exists() else 'immutable=1'}"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise InputError(f"cannot read run store {path}: {exc}") from exc
    try:
        return read_view(conn, path)
    except sqlite3.Error as exc:
        conn.close()
        raise InputError(f"cannot read run store {path}: {exc}") from exc
    except BaseException:
        conn.close()
        raise
