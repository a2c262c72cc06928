"""The run store's rows and its writer thread: how a record is stored (:func:`record_row`), how a final score is
(:func:`score_row`, read back by :func:`row_score`; written with its review signals: :func:`with_signals`), and the
thread that commits :meth:`madrag.store.RunStore.aput`'s records and :meth:`~madrag.store.RunStore.aput_scores`'
scores with its own connection, those queued while a commit runs together in the next transaction (group commit);
each caller's await resolved only once its rows are on disk.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from madrag.records import AgentRecord, ScoreResult, TraitScore
from madrag.store.schema import chunks, immediate
from madrag.store.signals import signals_json

INSERT_HEAD = "INSERT OR IGNORE INTO records (key, essay_id, trait, protocol, role, round, error, created_at, record)"

VALUES = "(?, ?, ?, ?, ?, ?, ?, ?, ?)"

INSERT_RECORD = f"{INSERT_HEAD} VALUES {VALUES}"

Row = tuple[str, str, str, str, str, int, str | None, float, str]


ScoreRow = tuple[str, str, str, int | None, str | None, float | None, str, float, str]
"""A final score as the ``scores`` table holds it: protocol, essay, trait, score, cause, expected, record keys,
time, the whole score (JSON)."""

INSERT_SCORE = (
    "INSERT INTO scores (protocol, essay_id, trait, score, cause, expected, record_keys, created_at, value, signals) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (protocol, essay_id, trait) DO UPDATE SET "
    "score = excluded.score, cause = excluded.cause, expected = excluded.expected, record_keys = excluded.record_keys, "
    "created_at = excluded.created_at, value = excluded.value, signals = excluded.signals "
    "WHERE scores.value IS NOT excluded.value OR scores.cause IS NOT excluded.cause "
    "OR scores.signals IS NOT excluded.signals"
)
"""A score (a :data:`ScoreRow` and its signals: :func:`with_signals`) replaces the stored one of its protocol, essay
and trait; the same score again writes nothing (a resume keeps every finished essay's rows as they are, so its
commits stay small)."""


def with_signals(conn: sqlite3.Connection, rows: Sequence[ScoreRow]) -> list[tuple[Any, ...]]:
    """``rows`` as :data:`INSERT_SCORE` writes them: each with its review signals (:mod:`madrag.store.signals`),
    derived from its Judge record and the debate it read as ``conn`` sees them (the records are written before
    their scores; in the writing transaction, so a row and its signals are committed together)."""
    keys = [str(json.loads(row[8]).get("record_key") or "") for row in rows]
    return [(*row, text) for row, text in zip(rows, signals_json(conn, keys), strict=True)]


def score_row(score: TraitScore, cause: str | None = None) -> ScoreRow:
    """The row a final score is stored as; ``cause``: why it is missing (None for a score that was read)."""
    expected = score.result.expected if score.result is not None else None
    return (
        score.protocol,
        score.essay_id,
        score.trait,
        score.score,
        None if score.score is not None else cause,
        expected,
        json.dumps(score.sources),
        time.time(),
        score.model_dump_json(),
    )


def row_score(value: str) -> TraitScore:
    """A stored score (its ``value`` column) as the :class:`TraitScore` it was written from. The JSON was written
    from the library's own objects by :func:`score_row`, so it is rebuilt without validating each part again
    (a large run's thousands of scores read in a fraction of the time)."""
    raw: dict[str, Any] = json.loads(value)
    result = raw.get("result")
    if result is not None:
        dist = result.get("distribution")
        if dist is not None:
            result["distribution"] = {int(k): v for k, v in dist.items()}
        raw["result"] = ScoreResult.model_construct(**result)
    return TraitScore.model_construct(**raw)


WAL_PAGES = 256
"""Pages the write-ahead log holds before a commit copies them into the store (SQLite's default is 1000): a run
commits records and, as each essay finishes, its scores, so the log is kept to about 1 MiB beside the store."""


def connect(path: Path, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """A connection in autocommit mode with the store's durability settings (WAL, ``synchronous=FULL``, the log
    checkpointed every :data:`WAL_PAGES` pages)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=check_same_thread)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}")
    return conn


def record_row(record: AgentRecord) -> Row:
    """The row a record is stored as (the record serialised once, with the columns it is looked up by); what
    :meth:`~madrag.store.RunStore.aput_row` writes, e.g. for a record serialised in another process."""
    return (
        record.key,
        record.essay_id,
        record.trait,
        record.protocol,
        record.role,
        record.round,
        record.error,
        record.created_at,
        record.model_dump_json(),
    )


@dataclass
class Write:
    """One record (serialised) or final scores waiting for the writer thread, the future (on its event loop) to
    resolve, and the outcome. A write of scores has no record (``row`` None); its scores replace any stored ones."""

    row: Row | None
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[bool]
    inserted: bool = False
    error: BaseException | None = None
    scores: Sequence[ScoreRow] = ()


def _settle(writes: list[Write]) -> None:
    """Resolve the writes' futures (in the event loop's thread)."""
    for write in writes:
        if write.future.done():  # the awaiting task was cancelled
            continue
        if write.error is not None:
            write.future.set_exception(write.error)
        else:
            write.future.set_result(write.inserted)


def _settle_all(writes: list[Write]) -> None:
    """Hand the outcomes to their event loops: one wake-up per loop, in the order the records came."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Write]] = {}
    for write in writes:
        by_loop.setdefault(write.loop, []).append(write)
    for loop, done in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, done)
        except RuntimeError:  # a loop already closed has nobody waiting
            pass


def retrieve(future: asyncio.Future[bool]) -> None:
    if not future.cancelled():
        future.exception()


@dataclass
class Writer:
    """The thread that commits :meth:`~madrag.store.RunStore.aput` records, with its own connection.

    A batch (the records queued while the previous commit ran) costs one transaction: one look-up of the keys
    already stored, one multi-row INSERT and one COMMIT. Few statements matter as much as the one fsync: the
    thread gives up the GIL around every SQLite call and may then wait for the event loop's thread to hand it
    back, so per-record statements would make every record's commit wait on the loop's work."""

    path: Path
    conn: sqlite3.Connection
    pending: list[Write] = field(default_factory=list)
    unsettled: int = 0  # records handed over and not yet committed (or failed)
    closing: bool = False
    wake: threading.Condition = field(default_factory=threading.Condition)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"madrag-store-writer:{self.path.name}", daemon=True)
        self.thread.start()

    def submit(self, write: Write) -> None:
        with self.wake:
            if self.closing:
                raise RuntimeError(f"run store {self.path} is closed")
            self.pending.append(write)
            self.unsettled += 1
            self.wake.notify_all()

    def drain(self) -> None:
        """Wait until every record handed over so far is committed (or has failed)."""
        with self.wake:
            while self.unsettled and self.thread is not None and self.thread.is_alive():
                self.wake.wait(0.1)

    def stop(self) -> None:
        """Commit what is queued, then end the thread and close its connection."""
        with self.wake:
            self.closing = True
            self.wake.notify_all()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join()

    def _run(self) -> None:
        try:
            while True:
                with self.wake:
                    while not self.pending and not self.closing:
                        self.wake.wait()
                    batch, self.pending = self.pending, []
                if not batch:
                    return
                try:
                    self._commit(batch)
                except BaseException as exc:  # never leave an awaiter waiting
                    for write in batch:
                        write.error = write.error or exc
                    raise
                finally:
                    _settle_all(batch)
                    with self.wake:
                        self.unsettled -= len(batch)
                        self.wake.notify_all()
        finally:
            with self.wake:
                self.closing = True
                orphans, self.pending = self.pending, []
                self.unsettled = 0
                self.wake.notify_all()
            for write in orphans:
                write.error = RuntimeError(f"the writer of run store {self.path} stopped")
            _settle_all(orphans)
            self.conn.close()

    def _commit(self, batch: list[Write]) -> None:
        """Commit the batch's records in one transaction, setting each write's outcome (not settling it)."""
        rows = [(write, row) for write in batch if (row := write.row) is not None]
        conn = self.conn
        try:
            with immediate(conn):  # the write lock: nobody adds a key between look-up and insert
                seen = self._stored_keys([row[0] for _, row in rows])
                fresh: list[Row] = []
                for write, row in rows:
                    write.inserted = row[0] not in seen
                    if write.inserted:
                        seen.add(row[0])
                        fresh.append(row)
                for chunk in chunks(fresh):
                    values = ", ".join([VALUES] * len(chunk))
                    conn.execute(f"{INSERT_HEAD} VALUES {values}", [v for r in chunk for v in r])
                for write in batch:
                    for score in with_signals(conn, write.scores) if write.scores else ():
                        conn.execute(INSERT_SCORE, score)
                    write.inserted = write.inserted or bool(write.scores)
        except Exception as exc:  # rolled back
            for write in batch:
                write.inserted = False
            if len(batch) == 1 or isinstance(exc, sqlite3.OperationalError):  # locked, disk full, I/O: all fail
                for write in batch:
                    write.error = exc
            else:  # a row SQLite refuses (e.g. too big): find it, each on its own
                for write in batch:
                    self._commit([write])

    def _stored_keys(self, keys: list[str]) -> set[str]:
        found: set[str] = set()
        for chunk in chunks(list(dict.fromkeys(keys))):
            marks = ", ".join("?" * len(chunk))
            found.update(k for (k,) in self.conn.execute(f"SELECT key FROM records WHERE key IN ({marks})", chunk))
        return found
