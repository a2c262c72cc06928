"""The exemplar bank, built once on the driver and shipped to Ray workers through the object store.

The driver's bank lives in the bank store of the driver's cache folder, which workers on other machines cannot
open. :func:`snapshot` copies its contents (ids, texts, reference scores, the pool's vectors) into a
:class:`BankSnapshot`, a plain picklable object the driver puts into Ray's object store once (a cross-fold run,
``--fold each``, ships one per fold: :class:`ShippedBanks`); every worker restores it
(:meth:`BankSnapshot.restore`) as an ordinary :class:`~madrag.retrieval.bank.ExemplarBank` over an
:class:`~madrag.retrieval.memory.ArrayCollection`, the same in-memory contents every bank answers from (exact
cosine search). Protocols then retrieve exactly as in a local run, through the same bank code.

Query essays are embedded by each worker with its own copy of the model, one batch per shard (the default), or
on the driver, one batch per shard, their vectors shipped with the shard; :class:`ShippedEmbedder` serves
shipped vectors and embeds the rest with the worker's model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from madrag.data.essay import Essay
from madrag.errors import MadragError
from madrag.retrieval.bank import ExemplarBank
from madrag.retrieval.embedder import Embedder, FloatArray, MiniLMEmbedder, normalize_rows
from madrag.retrieval.folds import FoldBanks
from madrag.retrieval.memory import ArrayCollection
from madrag.rubric import Rubric


def text_key(text: str) -> str:
    """The key a query vector is shipped under: a hash of the essay text."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


@dataclass
class ShippedEmbedder:
    """An embedder serving vectors shipped from the driver (by text), falling back to a local model.

    ``name`` is the driver's embedder's, so the restored bank is the same bank. A text without a shipped
    vector is embedded by ``fallback()`` (built on first use), e.g. MiniLM on the worker.
    """

    name: str
    vectors: dict[str, FloatArray] = field(default_factory=dict)
    fallback: Callable[[], Embedder] = MiniLMEmbedder
    _model: Embedder | None = None

    @property
    def dim(self) -> int:
        """The vectors' dimension."""
        if self.vectors:
            return int(next(iter(self.vectors.values())).shape[0])
        return self._local().dim

    def _local(self) -> Embedder:
        if self._model is None:
            self._model = self.fallback()
            if self._model.name != self.name:
                raise MadragError(f"worker embedder {self._model.name} differs from the bank's {self.name}")
        return self._model

    def add(self, vectors: Mapping[str, FloatArray]) -> None:
        """Vectors shipped with a shard (by :func:`text_key`)."""
        self.vectors.update(vectors)

    def embed(self, texts: list[str]) -> FloatArray:
        """Shipped vectors where there are some, the local model for the rest."""
        keys = [text_key(t) for t in texts]
        missing = [t for t, k in zip(texts, keys, strict=True) if k not in self.vectors]
        if missing:
            for text, vector in zip(missing, self._local().embed(missing), strict=True):
                self.vectors[text_key(text)] = vector
        return np.stack([self.vectors[k] for k in keys]).astype(np.float32)


@dataclass
class BankSnapshot:
    """A bank's full contents, picklable: what the driver puts into Ray's object store."""

    rubric: Rubric
    fingerprint: str
    embedder_name: str
    ids: list[str]
    documents: list[str]
    metadatas: list[dict[str, Any]]
    vectors: FloatArray

    def restore(self, embedder: ShippedEmbedder) -> ExemplarBank:
        """The bank, in memory, answering retrievals as the driver's would."""
        collection = ArrayCollection(self.ids, self.documents, self.metadatas, self.vectors)
        return ExemplarBank(collection, embedder, self.rubric, self.fingerprint, built_now=False)


def snapshot(bank: ExemplarBank) -> BankSnapshot:
    """Copy ``bank`` (a stored bank on the driver) into a :class:`BankSnapshot`."""
    got = bank.contents()
    return BankSnapshot(
        rubric=bank.rubric,
        fingerprint=bank.fingerprint,
        embedder_name=bank.embedder.name,
        ids=got["ids"],
        documents=got["documents"],
        metadatas=got["metadatas"],
        vectors=got["embeddings"],
    )


SourceBank = ExemplarBank | FoldBanks
"""A run's exemplars on the driver: one bank, or one bank per fold (``--fold each``)."""


@dataclass
class ShippedBanks:
    """What the driver puts into the object store: the snapshot of each bank, by fold (key None: the one bank
    of a run that is not cross-fold)."""

    banks: dict[int | None, BankSnapshot]
    embedder_name: str

    @classmethod
    def of(cls, source: SourceBank) -> ShippedBanks:
        """Snapshots of the run's bank, or of every fold's."""
        if isinstance(source, FoldBanks):
            shots: dict[int | None, BankSnapshot] = {fold: snapshot(b) for fold, b in source.banks.items()}
        else:
            shots = {None: snapshot(source)}
        return cls(banks=shots, embedder_name=source.embedder.name)

    def restore(self, embedder: ShippedEmbedder) -> SourceBank:
        """The run's exemplars, in memory, answering as the driver's do."""
        if None in self.banks:
            return self.banks[None].restore(embedder)
        folds = {fold: shot.restore(embedder) for fold, shot in self.banks.items() if fold is not None}
        return FoldBanks(folds, embedder)


def query_vectors(source: SourceBank, essays: list[Essay]) -> dict[str, FloatArray]:
    """The query vectors of ``essays`` computed on the driver in one batch with the bank's embedder, keyed by
    :func:`text_key`."""
    texts = list(dict.fromkeys(e.text for e in essays))
    vectors = normalize_rows(source.embedder.embed(texts))
    return {text_key(t): v for t, v in zip(texts, vectors, strict=True)}
