"""A bank's contents in memory, answering its retrievals by exact search.

Every :class:`~madrag.retrieval.bank.ExemplarBank` answers its retrievals from an :class:`ArrayCollection`: the
bank's collection in the SQLite store (:mod:`madrag.retrieval.sqlite_banks`) is read once when the bank is opened
(or built), and a Ray worker restores one from the driver's snapshot. Once a run holds its bank, nothing another
process does to the cache folder can take it away mid-run, and a query costs one matrix product. Its answers
are Chroma's (the MADRAG paper's vector store) exact ones: Chroma's own query over the same vectors is the
reference the tests and ``bench/retrieval.py`` compare it with; docs/differences.md (``bank-store``) gives the
numbers that kept this search over Chroma's approximate one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from madrag.errors import MadragError
from madrag.retrieval.embedder import FloatArray, normalize_rows

_TIE_DECIMALS = 6  # distances equal to 6 decimals are ties (float32 vectors), kept in the pool's order


class ArrayCollection:
    """A bank's essays over arrays in memory.

    :meth:`nearest` ranks by cosine distance (as Chroma's cosine space) the essays a filter keeps. Search is exact
    (float64 cosines of the stored float32 vectors); distances equal to 6 decimals are ties and keep the pool's
    order, so float rounding never reorders essays that are equally near.
    """

    def __init__(self, ids: list[str], documents: list[str], metadatas: list[dict[str, Any]], vectors: FloatArray):
        if not len(ids) == len(documents) == len(metadatas) == vectors.shape[0]:
            raise MadragError("bank contents: ids, documents, metadatas and vectors differ in length")
        self.ids = ids
        self.documents = documents
        self.metadatas = metadatas
        self.vectors = normalize_rows(vectors)
        self._exact = self.vectors.astype(np.float64)  # what distances are computed from
        self._columns: dict[str, dict[Any, np.ndarray[Any, Any]]] = {}
        self._last: tuple[bytes, np.ndarray[Any, Any]] | None = None  # the last query's distances to every essay

    @classmethod
    def from_contents(cls, got: Mapping[str, Any]) -> ArrayCollection:
        """From a stored collection's ``get(include=["documents", "metadatas", "embeddings"])`` answer
        (:meth:`~madrag.retrieval.sqlite_banks.SqliteCollection.get`, the layout of Chroma's ``get``)."""
        return cls(
            [str(i) for i in got["ids"]],
            [str(d) for d in got["documents"]],
            [dict(m) for m in got["metadatas"]],
            np.asarray(got["embeddings"], dtype=np.float32),
        )

    def count(self) -> int:
        """The number of pool essays."""
        return len(self.ids)

    def get(self, include: list[str]) -> dict[str, Any]:
        """Every pool essay, in the stores' ``get`` layout (``ids`` and the ``include``d fields)."""
        fields = {"documents": self.documents, "metadatas": self.metadatas, "embeddings": self.vectors}
        return {"ids": list(self.ids), **{name: fields[name] for name in include}}

    def _positions(self, name: str) -> dict[Any, np.ndarray[Any, Any]]:
        """Metadata field ``name``'s index: each value, the positions of the essays that have it (built once; a
        filter then costs a lookup, not a comparison per essay)."""
        if name not in self._columns:
            found: dict[Any, list[int]] = {}
            for i, m in enumerate(self.metadatas):
                found.setdefault(m.get(name), []).append(i)
            self._columns[name] = {value: np.asarray(at, dtype=np.intp) for value, at in found.items()}
        return self._columns[name]

    def _equal(self, name: str, value: Any) -> np.ndarray[Any, Any]:
        mask = np.zeros(len(self.ids), dtype=bool)
        at = self._positions(name).get(value)
        if at is not None:
            mask[at] = True
        return mask

    def nearest(
        self, vector: FloatArray, n: int, exclude: str, level: tuple[str, int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``n`` essays nearest ``vector`` by cosine distance (1 - dot product of unit vectors), as (row,
        distance), nearest first: never one whose ``essay_id`` is ``exclude``, and with ``level`` = (metadata
        key, value) only those holding that value."""
        mask = ~self._equal("essay_id", exclude)
        if level is not None:
            mask &= self._equal(*level)
        candidates = np.flatnonzero(mask)
        distances = self._distances(vector)[candidates]
        nearest = np.argsort(np.round(distances, _TIE_DECIMALS), kind="stable")[:n]
        return [(int(candidates[j]), float(distances[j])) for j in nearest]

    def _distances(self, raw: FloatArray) -> np.ndarray[Any, Any]:
        """Cosine distances of the query to every essay; the last query's are kept, since a bank sends the same
        vector once per score level."""
        query = normalize_rows(np.asarray(raw, dtype=np.float32).reshape(1, -1))[0].astype(np.float64)
        key = query.tobytes()
        last = self._last
        if last is None or last[0] != key:
            last = (key, 1.0 - self._exact @ query)
            self._last = last
        return last[1]
