"""The run store: SQLite, one row per agent call, written the moment the call completes.

Durability: WAL journal with ``synchronous=FULL``; a record is committed in its own transaction (:meth:`put`), with
the records waiting to be written at the same moment (:meth:`RunStore.aput`), or with the rest of a batch written
at once (:meth:`RunStore.put_many`: the baselines' thousands of scores), so a process killed at any moment leaves
every finished record and no partial one. The primary key is the call key: a resume never duplicates a record.

Writes from the event loop. :meth:`RunStore.aput` serialises the record and hands it to the store's writer thread,
which owns its own connection: it commits the record (the fsync of ``synchronous=FULL`` included) and only then
resolves the caller's await, so a call counts as finished exactly when its record is on disk, and the event loop
keeps serving other calls meanwhile. Records that queue up while a commit runs are committed together in the next
transaction (group commit), all on disk before any of their awaiters resumes (:mod:`madrag.store.writer`). Reads
go through the store's main connection and see every committed record.

Final scores: one row per protocol, essay and trait (:meth:`RunStore.scores`), kept by the runner as each essay
finishes (:meth:`RunStore.aput_scores`, through the same writer thread as records) and by a run-wide protocol's
fit when a job ends (:meth:`RunStore.put_scores`); every reader of a run's scores reads them. Each row holds the
review queue's signals of its score, derived as it is written (:meth:`RunStore.score_signals`).

Schema: a store carries a version (:mod:`madrag.store.schema`); this module knows only the current one. An older
store is brought to it by :func:`madrag.pipeline.migrations.open_store` (on disk for a writer, in memory for a
reader); a store newer than this code is refused.

Reading: ``RunStore(path, read_only=True)`` opens the file with SQLite's ``mode=ro``, or - when no ``-wal`` file
says a writer has it open or died with it open - as ``immutable``: reading creates no ``-wal`` / ``-shm`` file, the
run's files keep their bytes and times, and a run on a read-only filesystem can be read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.files.atomic import open_atomic, write_text_atomic
from madrag.files.csv_safe import dict_rows, write_csv
from madrag.files.disk_errors import environment_kind, storage_error
from madrag.records import AgentRecord, TraitScore
from madrag.store.run_config import changed_templates, differences, runtime_hint
from madrag.store.schema import StoreUpgrade, chunks, immediate, in_memory, open_current, open_read_only
from madrag.store.signals import record_fields
from madrag.store.writer import (
    INSERT_RECORD,
    INSERT_SCORE,
    Row,
    ScoreRow,
    Write,
    Writer,
    record_row,
    retrieve,
    row_score,
    with_signals,
)
from madrag.store.writer import connect as _connect  # a test limits the writer's connection here
from madrag.store.writer_lock import WriterLock

__all__ = ["PROMPT_KEYS", "RunStore", "write_scores_csv"]

_ANSWER_ONLY = "json_set(json_remove(record, '$.tokens'), '$.messages', json('[]'))"
"""A stored record less its prompt and tokens, as SQLite reads it (``answers_only``)."""

PROMPT_KEYS = ("prompts", "prompt_texts_sha256")
"""The keys of a run's identity that are its prompt templates."""


def _open_for_writing(path: Path, upgrade: StoreUpgrade | None) -> sqlite3.Connection:
    """The main connection of a store opened for writing, at the current version (created, or an older store
    brought to it by ``upgrade``); what the disk refuses is one StorageError."""
    conn: sqlite3.Connection | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = _connect(path)
        open_current(conn, path, upgrade)
    except BaseException as exc:
        if conn is not None:
            conn.close()
        if isinstance(exc, (OSError, sqlite3.OperationalError)) and environment_kind(exc) is not None:
            raise storage_error(exc, f"run store {path}") from exc
        raise
    return conn


def _as_json(value: dict[str, Any]) -> Any:
    """``value`` as it reads back from the store (JSON, keys sorted; what JSON cannot hold as its ``str``)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


class RunStore:
    """Records of one run directory (``<run dir>/store.sqlite``); ``read_only``: read an existing store without
    changing its files (see the module docstring); writing to it is then an error. ``lock``: hold the run
    directory's writer lock (:class:`~madrag.store.writer_lock.WriterLock`) until :meth:`close`, for a writer that does
    not take it itself (a scoring job takes it before it opens the store). A store an earlier madrag wrote opens
    only with ``upgrade`` (what :func:`madrag.pipeline.migrations.open_store` gives it); without, it is refused
    (:class:`~madrag.store.schema.OlderStore`)."""

    def __init__(
        self, path: str | Path, *, read_only: bool = False, lock: bool = False, upgrade: StoreUpgrade | None = None
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._dir_lock = WriterLock(self.path.parent).acquire() if lock and not read_only else None
        if read_only:
            self._conn = open_read_only(self.path, upgrade)
        else:
            try:
                self._conn = _open_for_writing(self.path, upgrade)
            except BaseException:
                if self._dir_lock is not None:
                    self._dir_lock.release()
                raise
        self._writer: Writer | None = None
        self._writer_lock = threading.Lock()
        self._closed = False
        self.prompt_drift: str | None = None  # set by bind_config

    def _writable(self) -> None:
        if self.read_only:
            raise sqlite3.ProgrammingError(f"run store {self.path} was opened read-only")

    # -- run configuration -------------------------------------------------------------------------
    def get_meta(self, key: str) -> Any | None:
        """The JSON value stored under ``key`` (run id, configuration, provider, ...); None when absent."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        """Store ``value`` (as JSON; what JSON cannot hold is written as its ``str``) under ``key``, replacing."""
        self._writable()
        blob = json.dumps(value, sort_keys=True, default=str)
        self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, blob))

    def bind_config(
        self,
        config: dict[str, Any],
        identity: Callable[[dict[str, Any]], Any] | None = None,
        *,
        prompts_may_differ: bool = False,
        new_run: str = "use another --run-dir to start a new run",
    ) -> bool:
        """Store the run's configuration, or check it matches the stored one. True when resuming; the stored
        configuration is kept as it was written. ``identity``: what of a configuration must match (a scoring
        run's: :func:`madrag.pipeline.migrations.identity`, which reads an older configuration as the latest version);
        default: all of it, as JSON. ``prompts_may_differ``: when only the prompt templates differ, resume and
        say why in :attr:`prompt_drift` (the caller makes no call with them: a finished run's scores are read).
        ``new_run``: how the refusal tells the caller's user to start a new run (the option that names the folder)."""
        self.prompt_drift = None
        stored = self.get_meta("config")
        if stored is None:
            self.set_meta("config", config)
            return False
        read = identity or _as_json
        old, new = read(stored), read(config)
        if old != new:
            diff = differences(old, new)
            texts = self._templates_hint(stored, config, old, new) if set(diff) & set(PROMPT_KEYS) else ""
            if prompts_may_differ and set(diff) <= set(PROMPT_KEYS):
                self.prompt_drift = f"run at {self.path.parent} was made with other prompt templates{texts}"
                return True
            texts += runtime_hint(old, diff) if isinstance(old, dict) else ""
            raise ConfigError(
                f"run at {self.path.parent} was made with different settings ({', '.join(diff)}){texts}; {new_run}"
            )
        return True

    def _templates_hint(self, stored: dict[str, Any], config: dict[str, Any], old: Any, new: Any) -> str:
        """Which prompt templates differ from the run's, and how to continue it with its own: by name when
        this release uses other templates, by per-template hash when the run recorded them, else as a whole."""
        mine, theirs = set(old.get("prompts") or []), set(new.get("prompts") or [])
        if mine != theirs:
            added = f"templates the run's release did not have: {', '.join(sorted(theirs - mine))}"
            dropped = f"not ones it used: {', '.join(sorted(mine - theirs))}"
            parts = [p for p, n in ((added, theirs - mine), (dropped, mine - theirs)) if n]
            return (
                f"; this release's prompts use {'; '.join(parts)}, so no call can be made as the run made its "
                "own: continue it with the release that made it"
            )
        kept = self.path.parent / "prompts"
        how = (
            f"its own copy is in {kept}: resume without --prompts-dir"
            if kept.is_dir()
            else "the run keeps no copy (made before runs kept their templates): resume with --prompts-dir DIR "
            "holding the files of the release that made the run"
        )
        changed = changed_templates(stored, config)
        if not changed:
            return f"; the texts of its templates differ (it recorded one hash of them all, not each one's; {how})"
        return f"; prompt templates differ from the run's: {', '.join(changed)} ({how})"

    # -- the essays a run scores ----------------------------------------------------------------------
    def add_essays(self, essays: list[Essay]) -> None:
        """Remember the essays being scored (with their human scores) for evaluation and reports."""
        self._writable()
        start = int(self._conn.execute("SELECT COUNT(*) FROM essays").fetchone()[0])
        with self._conn:
            self._conn.execute("BEGIN")
            for i, essay in enumerate(essays):
                self._conn.execute(
                    "INSERT OR IGNORE INTO essays (id, position, essay) VALUES (?, ?, ?)",
                    (essay.id, start + i, essay.model_dump_json()),
                )

    def essays(self) -> list[Essay]:
        """The essays added with :meth:`add_essays`, in the order they were added."""
        return list(self.each_essay())

    def each_essay(self) -> Iterator[Essay]:
        """:meth:`essays`, streamed: one parsed at a time."""
        for (blob,) in self._conn.execute("SELECT essay FROM essays ORDER BY position"):
            yield Essay.model_validate_json(blob)

    # -- records -----------------------------------------------------------------------------------
    def get(self, key: str) -> AgentRecord | None:
        """The committed record of call ``key``, or None."""
        row = self._conn.execute("SELECT record FROM records WHERE key = ?", (key,)).fetchone()
        return None if row is None else AgentRecord.model_validate_json(row[0])

    def put(self, record: AgentRecord) -> bool:
        """Write a finished record; False (and nothing written) if its key is already stored."""
        self._writable()
        return self._conn.execute(INSERT_RECORD, record_row(record)).rowcount == 1

    def put_many(self, records: Iterable[AgentRecord]) -> int:
        """:meth:`put` of every record in one transaction (one fsync: all of them on disk, or none); the number
        written (a record whose key is already stored is kept, not counted)."""
        self._writable()
        rows = [record_row(record) for record in records]
        with immediate(self._conn) as conn:
            return sum(conn.execute(INSERT_RECORD, row).rowcount for row in rows)

    async def aput(self, record: AgentRecord) -> bool:
        """:meth:`put` without blocking the event loop: returns once the record is committed (durably, as
        :meth:`put`) by the writer thread; False if its key was already stored. An error writing the record
        is raised here. The record is serialised at once (in the caller's thread), so the writer thread
        only runs SQLite and the time between a call's end and its commit stays short. Cancelling the caller does
        not take the record back: the cancellation waits until the writer has committed (or failed to commit) it,
        so a cancelled run leaves no write in flight behind it."""
        return await self.aput_row(record_row(record))

    async def aput_row(self, row: Row) -> bool:
        """:meth:`aput` of a record already serialised by :func:`record_row` (a distributed run's workers
        serialise their records; the driver writes the rows as they come, without parsing them again)."""
        return await self._await_write(row, ())

    async def aput_scores(self, rows: Sequence[ScoreRow]) -> None:
        """Keep final scores (:func:`score_row`: one per protocol, essay and trait, replacing a stored one) as
        :meth:`aput` keeps a record: committed by the writer thread, durably, before this returns."""
        if rows:
            await self._await_write(None, rows)

    async def _await_write(self, row: Row | None, scores: Sequence[ScoreRow]) -> bool:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        writer = self._writer_thread()
        # the outcome is always read, here or by the callback (no "exception was never retrieved" when the
        # awaiting task was cancelled before a failed commit)
        future.add_done_callback(retrieve)
        writer.submit(Write(row, loop, future, scores=scores))
        try:
            return await asyncio.shield(future)
        except sqlite3.OperationalError as exc:  # disk full, read-only, I/O: one line, the store as committed
            if environment_kind(exc) is None:
                raise
            raise storage_error(exc, f"run store {self.path}") from exc
        except asyncio.CancelledError:
            if not future.done():
                with contextlib.suppress(Exception):
                    await asyncio.shield(future)
            raise

    def _writer_thread(self) -> Writer:
        self._writable()
        with self._writer_lock:
            if self._closed:
                raise sqlite3.ProgrammingError(f"run store {self.path} is closed")
            if self._writer is None:
                writer = Writer(self.path, _connect(self.path, check_same_thread=False))
                writer.start()
                self._writer = writer
            return self._writer

    def flush(self) -> None:
        """Wait (blocking) until every record handed to :meth:`aput` so far is committed or has failed. The
        readers of records do this first, so they include every record whose write has started (a run stopped on
        an error); :meth:`get` answers from what is committed (a record being written is of an unfinished call)."""
        writer = self._writer
        if writer is not None:
            writer.drain()

    def keys(self) -> set[str]:
        """The call keys of every stored record (after :meth:`flush`)."""
        self.flush()
        return {row[0] for row in self._conn.execute("SELECT key FROM records")}

    def count(self) -> int:
        """How many records are stored (after :meth:`flush`)."""
        self.flush()
        return int(self._conn.execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def records(
        self, protocol: str | None = None, role: str | None = None, answers_only: bool = False
    ) -> Iterator[AgentRecord]:
        """The stored records (after :meth:`flush`), optionally of one protocol and/or role, oldest first.
        ``answers_only``: without their prompts (``messages`` empty) and tokens (``tokens`` None), left out by SQLite
        before a record is parsed: most of a record's size, nothing a reader of scores, rationales or debates needs."""
        self.flush()
        where = {column: value for column, value in (("protocol", protocol), ("role", role)) if value is not None}
        sql = f"SELECT {_ANSWER_ONLY if answers_only else 'record'} FROM records WHERE 1=1"
        sql += "".join(f" AND {column} = ?" for column in where)
        for (blob,) in self._conn.execute(sql + " ORDER BY created_at, key", list(where.values())):
            yield AgentRecord.model_validate_json(blob)

    def protocols_of(self, role: str) -> set[str]:
        """The ``protocol`` values of the stored records of ``role`` (after :meth:`flush`), read without the
        records themselves."""
        self.flush()
        return {row[0] for row in self._conn.execute("SELECT DISTINCT protocol FROM records WHERE role = ?", (role,))}

    def records_of(self, essay_ids: Collection[str], answers_only: bool = False) -> Iterator[AgentRecord]:
        """The stored records (after :meth:`flush`) of the essays ``essay_ids``, oldest first (found through the
        ``(protocol, essay_id, trait)`` index, so a few essays of a large run are read without a table scan);
        ``answers_only`` as in :meth:`records`."""
        self.flush()
        for chunk in chunks(sorted(set(essay_ids))):
            marks = ", ".join("?" * len(chunk))
            sql = (
                f"SELECT {_ANSWER_ONLY if answers_only else 'record'} FROM records "
                "WHERE protocol IN (SELECT DISTINCT protocol FROM records) "
                f"AND essay_id IN ({marks}) ORDER BY created_at, key"
            )
            for (blob,) in self._conn.execute(sql, chunk):
                yield AgentRecord.model_validate_json(blob)

    def each_record_fields(
        self, paths: Mapping[str, str], keys: Collection[str] | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(key, the values at ``paths``: names -> JSON paths, ``$.context.debate``, None where absent) of each stored
        record of ``keys`` (None: all; after :meth:`flush`), read by SQLite from its JSON, none parsed, streamed."""
        self.flush()
        return record_fields(self._conn, paths, keys)

    # -- final scores --------------------------------------------------------------------------------
    def put_scores(
        self, rows: Sequence[ScoreRow], *, replace: Collection[str] = (), clear: Collection[str] = ()
    ) -> None:
        """Keep final scores, with their signals (:func:`~madrag.store.writer.with_signals`), in one transaction (a
        stored one of the same protocol, essay and trait replaced); ``replace``: protocols whose stored scores are
        all dropped first (a run-wide fit); ``clear``: meta keys removed too. A store read into memory takes them."""
        if self.read_only and not in_memory(self._conn):
            self._writable()
        self.flush()
        with immediate(self._conn) as conn:
            conn.executemany("DELETE FROM scores WHERE protocol = ?", [(p,) for p in replace])
            conn.executemany(INSERT_SCORE, with_signals(conn, rows))
            conn.executemany("DELETE FROM meta WHERE key = ?", [(k,) for k in clear])

    def scores(self, protocols: Collection[str] | None = None) -> list[TraitScore]:
        """The run's final scores (after :meth:`flush`), optionally of ``protocols``: one per protocol, essay and
        trait that was scored, in the order of the essays, then the protocol and trait they were written in."""
        return list(self.each_score(protocols))

    def each_score(self, protocols: Collection[str] | None = None) -> Iterator[TraitScore]:
        """:meth:`scores`, streamed (a score without its essay in the store first)."""
        self.flush()
        sql = "SELECT s.value FROM scores s LEFT JOIN essays e ON e.id = s.essay_id"
        args: list[str] = sorted(protocols) if protocols is not None else []
        sql += "" if protocols is None else f" WHERE s.protocol IN ({', '.join('?' * len(args))})"
        for (value,) in self._conn.execute(sql + " ORDER BY e.position, s.essay_id, s.rowid", args):
            yield row_score(value)

    def score_signals(self, protocol: str) -> dict[tuple[str, str], dict[str, Any]]:
        """The review signals kept with ``protocol``'s scores (:mod:`madrag.store.signals`), by essay and trait."""
        self.flush()
        rows = self._conn.execute("SELECT essay_id, trait, signals FROM scores WHERE protocol = ?", (protocol,))
        return {(essay, trait): json.loads(text) for essay, trait, text in rows}

    def score_stamp(self) -> tuple[int, float]:
        """How many final scores are stored and when the latest was written (what a cached view is kept by)."""
        self.flush()
        count, latest = self._conn.execute("SELECT COUNT(*), MAX(created_at) FROM scores").fetchone()
        return int(count), float(latest or 0.0)

    def recorded_essay_ids(self) -> set[str]:
        """The ids of the essays with at least one stored record (after :meth:`flush`)."""
        self.flush()
        return {row[0] for row in self._conn.execute("SELECT DISTINCT essay_id FROM records")}

    def close(self) -> None:
        """Close the store; records handed to :meth:`aput` before are committed first."""
        with self._writer_lock:
            writer, self._writer, self._closed = self._writer, None, True
        if writer is not None:
            writer.stop()
        self._conn.close()
        if self._dir_lock is not None:
            self._dir_lock.release()

    # -- export ------------------------------------------------------------------------------------
    def export_records_jsonl(self, path: str | Path) -> int:
        """Write every record as one JSON line to ``path``, streamed, complete or not at all (a killed export
        leaves the file that was there before); the number written."""
        n = 0
        with open_atomic(path) as fh:
            for n, record in enumerate(self.records(), 1):  # noqa: B007 - the count written is the last n
                fh.write(record.model_dump_json() + "\n")
        return n


def write_scores_csv(rows: list[dict[str, Any]], path: str | Path) -> None:
    """Write per-essay trait score rows (one row per essay x trait x protocol)."""
    if not rows:
        write_text_atomic(path, "")
        return
    write_csv(path, dict_rows(rows))
