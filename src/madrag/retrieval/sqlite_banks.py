"""The exemplar banks' store: every bank of a cache folder in one SQLite file, ``banks.sqlite``.

A bank is read into memory once and searched there (:class:`~madrag.retrieval.memory.ArrayCollection`, exact
cosine search), so the store only keeps each bank's ids, texts, metadata and vectors in the order they were added.
Banks were kept in Chroma before (the MADRAG paper's vector store): the numbers that chose this store and the
in-memory search over Chroma's own are in docs/differences.md (``bank-store``); a Chroma store left in a cache
folder by an older madrag is not read (:mod:`madrag.pipeline.migrations.chroma`).

The rules of :mod:`~madrag.retrieval.bank_store` hold: its folder lock orders the writes, a bank is built under a
temporary name and renamed (:meth:`SqliteCollection.modify`) in one transaction.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from madrag.errors import MadragError
from madrag.retrieval.vectors import transaction

BANKS_FILE = "banks.sqlite"
"""The file of the banks in a cache folder."""
MAX_BATCH = 5000
"""The most essays added in one step (one transaction)."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS collections (cid INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, metadata TEXT)",
    "CREATE TABLE IF NOT EXISTS items (cid INTEGER NOT NULL, position INTEGER NOT NULL, id TEXT NOT NULL, "
    "document TEXT NOT NULL, metadata TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (cid, position))",
)


class SqliteBanks:
    """A cache folder's banks in ``banks.sqlite``: named collections of essays, each with its metadata."""

    def __init__(self, cache_dir: Path) -> None:
        # the absolute path: a relative one would reach another folder once the working directory changes
        self.path = Path(cache_dir).resolve() / BANKS_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.connect() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)

    def connect(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A connection for one transaction (committed on success), closed afterwards."""
        return transaction(self.path)

    def list_collections(self) -> list[SqliteCollection]:
        """Every collection of the folder."""
        with self.connect() as conn:
            rows = conn.execute("SELECT cid, name, metadata FROM collections ORDER BY name").fetchall()
        return [SqliteCollection(self, cid, name, json.loads(meta or "{}")) for cid, name, meta in rows]

    def get_collection(self, name: str) -> SqliteCollection:
        """The collection ``name``; a MadragError when there is none."""
        found = [c for c in self.list_collections() if c.name == name]
        if not found:
            raise MadragError(f"no exemplar bank {name!r} in {self.path}")
        return found[0]

    def create_collection(self, name: str, metadata: dict[str, Any] | None = None) -> SqliteCollection:
        """A new empty collection (cosine space, as every bank is); a MadragError when the name is taken."""
        try:
            with self.connect() as conn:
                cursor = conn.execute(
                    "INSERT INTO collections (name, metadata) VALUES (?, ?)", (name, json.dumps(metadata or {}))
                )
        except sqlite3.IntegrityError:
            raise MadragError(f"exemplar bank {name!r} already exists in {self.path}") from None
        return SqliteCollection(self, int(cursor.lastrowid or 0), name, dict(metadata or {}))

    def delete_collection(self, name: str) -> None:
        """Remove the collection ``name`` and its essays."""
        with self.connect() as conn:
            for (cid,) in conn.execute("SELECT cid FROM collections WHERE name = ?", (name,)).fetchall():
                conn.execute("DELETE FROM items WHERE cid = ?", (cid,))
                conn.execute("DELETE FROM collections WHERE cid = ?", (cid,))


class SqliteCollection:
    """One bank of a :class:`SqliteBanks`: its essays in the order they were added."""

    def __init__(self, store: SqliteBanks, cid: int, name: str, metadata: dict[str, Any]) -> None:
        self._store = store
        self._cid = cid
        self.name = name
        self.metadata = metadata

    def count(self) -> int:
        """The number of essays."""
        with self._store.connect() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM items WHERE cid = ?", (self._cid,)).fetchone()[0])

    def add(
        self,
        ids: Sequence[str],
        embeddings: Any,
        documents: Sequence[str],
        metadatas: Sequence[dict[str, Any]],
    ) -> None:
        """Append essays after those already there (one transaction)."""
        vectors = np.asarray(embeddings, dtype=np.float32)
        if not len(ids) == len(documents) == len(metadatas) == vectors.shape[0]:
            raise MadragError("bank essays: ids, documents, metadatas and embeddings differ in length")
        with self._store.connect() as conn:
            start = conn.execute("SELECT COUNT(*) FROM items WHERE cid = ?", (self._cid,)).fetchone()[0]
            conn.executemany(
                "INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (self._cid, start + i, str(ids[i]), documents[i], json.dumps(metadatas[i]), vectors[i].tobytes())
                    for i in range(len(ids))
                ],
            )

    def get(self, include: list[str]) -> dict[str, Any]:
        """Every essay: ``ids`` and the ``include``d fields (documents, metadatas, embeddings as one float32
        array), the layout :meth:`ArrayCollection.from_contents <madrag.retrieval.memory.ArrayCollection.from_contents>`
        reads."""
        with self._store.connect() as conn:
            rows = conn.execute(
                "SELECT id, document, metadata, vector FROM items WHERE cid = ? ORDER BY position", (self._cid,)
            ).fetchall()
        fields: dict[str, Any] = {
            "documents": [r[1] for r in rows],
            "metadatas": [json.loads(r[2]) for r in rows],
            "embeddings": np.stack([np.frombuffer(r[3], dtype=np.float32) for r in rows])
            if rows
            else np.zeros((0, 0), dtype=np.float32),
        }
        return {"ids": [r[0] for r in rows], **{k: fields[k] for k in include}}

    def modify(self, name: str) -> None:
        """Rename the collection (a finished build takes the bank's name)."""
        try:
            with self._store.connect() as conn:
                conn.execute("UPDATE collections SET name = ? WHERE cid = ?", (name, self._cid))
        except sqlite3.IntegrityError:
            raise MadragError(f"exemplar bank {name!r} already exists in {self._store.path}") from None
        self.name = name
