"""The run store's schema version and its migrations: a run made today opens tomorrow.

The version is SQLite's ``PRAGMA user_version``. ``MIGRATIONS[i]`` is a plain function that brings a store from
version ``i`` to ``i + 1``; :func:`migrate` runs the ones a store still needs when it is opened, all in one
transaction together with the new version number, so a crash mid-way leaves the store as it was.

Version 1 is the schema the store had before it carried a version (tables ``meta``, ``records``, ``essays``). A
store written then reads as version 0 with those tables already there: migration 1 creates only what is
missing (every statement says ``IF NOT EXISTS``), so such a store is stamped version 1 with nothing changed.

A later schema change is a new function appended to :data:`MIGRATIONS`; one that has shipped is never edited.
A store of a newer version than this code knows is refused (:class:`~madrag.errors.InputError`), never guessed at.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from madrag.errors import InputError

Migration = Callable[[sqlite3.Connection], None]


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


MIGRATIONS: Sequence[Migration] = (_v1_tables,)
"""``MIGRATIONS[i]`` takes a store from version ``i`` to ``i + 1``, in order; append, never edit."""


def schema_version(conn: sqlite3.Connection) -> int:
    """The schema version a store's file says it has (0: none, i.e. new or written before versions)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, path: Path, migrations: Sequence[Migration] | None = None) -> int:
    """Bring the store on ``conn`` (an autocommit connection) to the latest version of ``migrations`` (default
    :data:`MIGRATIONS`) and return the version it had. An InputError, with nothing changed, when the store is
    newer than this code; a migration that fails rolls back every step of this call."""
    steps = MIGRATIONS if migrations is None else migrations
    target = len(steps)
    found = schema_version(conn)
    if found < target:
        conn.execute("BEGIN IMMEDIATE")  # one migrator at a time; the others then find it done
        try:
            found = schema_version(conn)
            for step in steps[found:]:
                step(conn)
            if found < target:
                conn.execute(f"PRAGMA user_version = {target}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
    if found > target:
        raise InputError(
            f"run store {path} has schema version {found}, newer than this madrag reads ({target}); "
            "open it with the newer madrag that wrote it"
        )
    return found
