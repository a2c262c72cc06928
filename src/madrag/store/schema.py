"""The run store's schema: the tables of the current version and the version a store carries.

The version is SQLite's ``PRAGMA user_version``. A new store is created at :data:`SCHEMA_VERSION`, in one
transaction with its version (one creator at a time; the others then find it done). A store of another version is
refused here: a newer one with an InputError naming the version, an older madrag's with :class:`OlderStore`. A
store an earlier madrag wrote is read and brought to this version by :mod:`madrag.pipeline.migrations`, the one home
of every older format, which hands the store its :class:`StoreUpgrade` when it opens one
(:func:`madrag.pipeline.migrations.open_store`): the store itself knows only the current format.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from madrag.errors import InputError

SCHEMA_VERSION = 4
"""The version of the stores this code writes (``PRAGMA user_version``)."""
CHUNK = 400
"""Keys or rows per statement (at most 9 parameters each, well under SQLite's 32766 limit)."""
T = TypeVar("T")


class OlderStore(InputError):
    """A store an earlier madrag wrote, opened without :mod:`madrag.pipeline.migrations`."""


class StoreUpgrade(Protocol):
    """What brings a store an earlier madrag wrote to :data:`SCHEMA_VERSION` (:mod:`madrag.pipeline.migrations`)."""

    def on_disk(self, conn: sqlite3.Connection, path: Path) -> None:
        """Bring the store on ``conn`` (open for writing, autocommit) to the current version, on disk."""

    def for_reading(self, conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
        """The store on the read-only ``conn`` as the current version, its file unchanged."""


META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
"""The run's settings, one value per key."""
RECORDS = (
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
)""",
    "CREATE INDEX IF NOT EXISTS records_essay ON records (protocol, essay_id, trait)",
)
"""One row per agent call, and the index a protocol's calls for an essay are found by."""
ESSAYS = "CREATE TABLE IF NOT EXISTS essays (id TEXT PRIMARY KEY, position INTEGER NOT NULL, essay TEXT NOT NULL)"
"""The essays scored, in the order they were added."""
SCORES = """CREATE TABLE IF NOT EXISTS scores (
    protocol TEXT NOT NULL,
    essay_id TEXT NOT NULL,
    trait TEXT NOT NULL,
    score INTEGER,
    cause TEXT,
    expected REAL,
    record_keys TEXT NOT NULL,
    created_at REAL NOT NULL,
    value TEXT NOT NULL,
    signals TEXT NOT NULL,
    PRIMARY KEY (protocol, essay_id, trait)
)"""
"""The run's final scores: one per protocol, essay and trait, the score or NULL with the cause of its absence, the
records it came from, the whole score as JSON, and the review queue's signals of it (:mod:`madrag.store.signals`,
written with the row)."""


def create(conn: sqlite3.Connection) -> None:
    """The current tables: :data:`META`, :data:`RECORDS`, :data:`ESSAYS` and :data:`SCORES`."""
    for statement in (META, *RECORDS, ESSAYS, SCORES):
        conn.execute(statement)


def schema_version(conn: sqlite3.Connection) -> int:
    """The schema version a store's file says it has (0: none, i.e. new or written before versions)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def tables(conn: sqlite3.Connection) -> set[str]:
    """The names of the tables the store on ``conn`` has."""
    return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def in_memory(conn: sqlite3.Connection) -> bool:
    """Whether ``conn``'s store is a copy in memory (an older store read without changing its file)."""
    return any(name == "main" and not file for _, name, file in conn.execute("PRAGMA database_list"))


def chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """``items`` in pieces of at most :data:`CHUNK`, in order."""
    return (items[i : i + CHUNK] for i in range(0, len(items), CHUNK))


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on the autocommit ``conn``: ``BEGIN IMMEDIATE`` (the write lock, so one writer at a
    time and the others then find its work done), committed at the end, rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise


def refuse_newer(found: int, target: int, path: Path) -> None:
    """An InputError, naming both versions, when a store of version ``found`` is newer than ``target``."""
    if found > target:
        raise InputError(
            f"run store {path} has schema version {found}, newer than this madrag reads ({target}); "
            "open it with the newer madrag that wrote it"
        )


def _check(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a store that is not at :data:`SCHEMA_VERSION`."""
    found = schema_version(conn)
    refuse_newer(found, SCHEMA_VERSION, path)
    if found < SCHEMA_VERSION:
        raise OlderStore(
            f"run store {path} was written by an earlier madrag (schema version {found}): open it through "
            "madrag.pipeline.migrations.open_store, which brings it to this version"
        )


def open_current(conn: sqlite3.Connection, path: Path, upgrade: StoreUpgrade | None = None) -> None:
    """Make the store on ``conn`` (open for writing, autocommit) one of the current version: a new, empty store is
    created at it; an older one is brought to it by ``upgrade`` (else refused, :class:`OlderStore`); a newer one
    is refused with nothing changed."""
    if upgrade is not None:
        upgrade.on_disk(conn, path)
    if schema_version(conn) == 0 and not tables(conn):
        with immediate(conn):  # one creator at a time; the others then find it done
            if schema_version(conn) == 0 and not tables(conn):
                create(conn)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    _check(conn, path)


def read_only_uri(path: Path) -> str:
    """The URI a reader opens the store at ``path`` with (:func:`open_read_only`): ``mode=ro`` while a ``-wal`` file
    exists, else ``immutable``."""
    wal = path.with_name(path.name + "-wal")
    return f"{path.resolve().as_uri()}?{'mode=ro' if wal.exists() else 'immutable=1'}"


def open_read_only(path: Path, upgrade: StoreUpgrade | None = None) -> sqlite3.Connection:
    """A read-only connection to the store at ``path`` that writes nothing beside it: ``mode=ro`` while a ``-wal``
    file exists (a writer has the store open, or died with it open: its last records are in that file), else
    ``immutable`` (nothing to recover; no ``-shm`` / ``-wal`` is created, so a store on a read-only filesystem opens
    too). An older store is read as the current version through ``upgrade`` (else refused); an InputError when it
    cannot be read."""
    if not path.is_file():
        raise InputError(f"no run store at {path}")
    conn = None
    try:
        conn = sqlite3.connect(read_only_uri(path), uri=True, isolation_level=None)
        view = conn if upgrade is None else upgrade.for_reading(conn, path)
    except BaseException as exc:
        if conn is not None:
            conn.close()
        if isinstance(exc, sqlite3.Error):
            raise InputError(f"cannot read run store {path}: {exc}") from exc
        raise
    try:
        _check(view, path)
    except BaseException:
        view.close()
        raise
    return view
