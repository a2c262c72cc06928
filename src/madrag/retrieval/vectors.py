"""Embed each text once, ever: one vector cache per cache folder, keyed by the embedder's name (the model and every
setting that changes its vectors) and a hash of the text, shared by every bank, fold, run and process there.

:class:`CachingEmbedder` wraps an embedder under the same name (its vectors are the wrapped embedder's, so banks
built through it are the banks the plain embedder would build) and sends only texts it has never seen to the
model. Vectors come, in order, from memory, from the cache folder's SQLite file (:class:`VectorStore`), from the
vectors shipped with the package's ASAP data (computed by the same embedder with the same settings; a different
embedder name never matches), and last from the model; what the model computes is written back at once, so a
crash loses nothing and a second process finds it.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from madrag.errors import MadragError
from madrag.retrieval.embedder import Embedder, FloatArray, normalize_rows

VECTORS_FILE = "vectors.sqlite"
"""The vector cache's file name inside a cache folder."""
SHIPPED_PREFIX = "vectors-"


def text_hash(text: str) -> str:
    """The key of a text's vector: SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embedder_slug(name: str) -> str:
    """A file-name-safe tag of an embedder name (for shipped vector files)."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]


@contextlib.contextmanager
def transaction(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to the SQLite file ``path`` (WAL) for one transaction, committed on success, then closed:
    the retrieval caches' (the vector cache here, the bank store of :mod:`madrag.retrieval.sqlite_banks`)."""
    conn = sqlite3.connect(path, timeout=60.0)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        with conn:
            yield conn
    finally:
        conn.close()


class VectorStore:
    """Vectors by (embedder name, text hash) in one SQLite file; safe for several processes at once."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with transaction(self.path) as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS vectors (embedder TEXT NOT NULL, hash TEXT NOT NULL, "
                "vector BLOB NOT NULL, PRIMARY KEY (embedder, hash))"
            )

    def get(self, embedder: str, hashes: Sequence[str]) -> dict[str, FloatArray]:
        """The stored vectors among ``hashes``."""
        found: dict[str, FloatArray] = {}
        with transaction(self.path) as conn:
            for start in range(0, len(hashes), 500):
                part = list(hashes[start : start + 500])
                marks = ",".join("?" * len(part))
                rows = conn.execute(
                    f"SELECT hash, vector FROM vectors WHERE embedder = ? AND hash IN ({marks})", [embedder, *part]
                )
                found.update((h, np.frombuffer(blob, dtype=np.float32).copy()) for h, blob in rows)
        return found

    def put(self, embedder: str, vectors: Iterable[tuple[str, FloatArray]]) -> None:
        """Store vectors (float32); a vector already there is kept."""
        rows = [(embedder, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in vectors]
        with transaction(self.path) as conn:
            conn.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?, ?)", rows)


@cache
def shipped_vectors(embedder: str) -> dict[str, FloatArray]:
    """The vectors shipped with the package's data for embedder ``embedder`` (empty when none were)."""
    path = Path(str(resources.files("madrag.datasets") / "asap" / f"{SHIPPED_PREFIX}{embedder_slug(embedder)}.npz"))
    if not path.is_file():
        return {}
    with np.load(path) as data:
        if str(data["embedder"]) != embedder:
            return {}
        vectors = np.asarray(data["vectors"], dtype=np.float32)
        return dict(zip((str(h) for h in data["hashes"]), vectors, strict=True))


class CachingEmbedder:
    """An :class:`~madrag.retrieval.Embedder` that embeds each distinct text once, ever (see the module).

    ``path``: the SQLite vector store to share (None: memory only). ``shipped``: also use the vectors shipped with
    the package. ``texts_embedded`` counts texts actually sent to the wrapped embedder; ``from_store`` and
    ``from_shipped`` count texts answered from the store and from the shipped vectors.
    """

    def __init__(self, inner: Embedder, path: Path | None = None, *, shipped: bool = True) -> None:
        self.inner = inner
        self.store = VectorStore(path) if path is not None else None
        self.shipped = shipped
        self.texts_embedded = self.from_store = self.from_shipped = 0
        self._vectors: dict[str, FloatArray] = {}

    @property
    def name(self) -> str:
        """The wrapped embedder's name (the vectors are its vectors)."""
        return self.inner.name

    @property
    def dim(self) -> int:
        """The wrapped embedder's dimension."""
        return self.inner.dim

    def embed(self, texts: list[str]) -> FloatArray:
        """Vectors of ``texts`` (row i = texts[i]); only texts never seen before reach the wrapped embedder."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [text_hash(t) for t in texts]
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._vectors}
        if todo and self.store is not None:
            found = self.store.get(self.name, list(todo))
            self._vectors.update(found)
            self.from_store += len(found)
            todo = {k: t for k, t in todo.items() if k not in found}
        if todo and self.shipped:
            table = shipped_vectors(self.name)
            found = {k: table[k] for k in todo if k in table}
            self._vectors.update(found)
            self.from_shipped += len(found)
            todo = {k: t for k, t in todo.items() if k not in found}
        if todo:
            fresh = normalize_rows(self.inner.embed(list(todo.values())))
            if fresh.shape[0] != len(todo):
                raise MadragError(f"embedder {self.name} returned {fresh.shape[0]} vectors for {len(todo)} texts")
            computed = list(zip(todo, fresh, strict=True))
            self._vectors.update(computed)
            self.texts_embedded += len(todo)
            if self.store is not None:
                self.store.put(self.name, computed)
        return np.stack([self._vectors[k] for k in keys]).astype(np.float32)
