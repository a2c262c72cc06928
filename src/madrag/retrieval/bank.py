"""The exemplar bank: scored pool essays in a persistent collection, and the MADRAG paper's two retrievals.

The MADRAG paper, 3.3: every pool essay (the training split only) is stored with its vector, its text and one
reference score per rubric trait (metadata key ``score::<trait name>``; absent when the essay has no rater for
the trait).
Procedure 1 (:meth:`ExemplarBank.similar`) returns the top-k nearest essays; procedure 2
(:meth:`ExemplarBank.per_level`) returns, for every score level of a trait, the nearest essay whose reference
score for that trait equals the level, or records that none is available. The query essay is never returned:
it is excluded by id in the query's filter and again after the query.

Embedding the pool is the slow part, so a bank is kept in a persistent collection (madrag's SQLite store,
:mod:`madrag.retrieval.sqlite_banks`; the MADRAG paper names Chroma: docs/differences.md, ``bank-store``) named
by a fingerprint
of everything that determines its content (pool ids, texts and reference scores, trait names, the embedder's
name, which includes its chunking settings, and the bank's format); a later run with the same inputs reuses it
without embedding anything, and a changed pool gets a bank of its own. The rules of the shared cache folder
(nothing deleted implicitly, leases on banks in use, atomic builds) are in :mod:`madrag.retrieval.bank_store`.
A bank, once opened, answers from its contents in memory (:class:`~madrag.retrieval.memory.ArrayCollection`,
exact cosine search), so nothing done to the cache folder afterwards can change or remove it mid-run.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from madrag.data.essay import Essay
from madrag.data.reading import check_unique
from madrag.errors import InputError, MadragError
from madrag.metrics import PAPER_TIES, TieRule
from madrag.retrieval import bank_store
from madrag.retrieval.anchors import AnchorChoice
from madrag.retrieval.embedder import Embedder, FloatArray, normalize_rows
from madrag.retrieval.exemplars import Exemplar as Exemplar
from madrag.retrieval.exemplars import LevelExemplar as LevelExemplar
from madrag.retrieval.exemplars import score_key as score_key
from madrag.retrieval.memory import ArrayCollection
from madrag.retrieval.sqlite_banks import MAX_BATCH, SqliteBanks, SqliteCollection
from madrag.rubric import Rubric, Trait

BANK_FORMAT = 1
_QUERY_CACHE_SIZE = 10_000


def pool_fingerprint(pool: Sequence[Essay], rubric: Rubric, embedder_name: str, ties: TieRule = PAPER_TIES) -> str:
    """SHA-256 over everything that determines a bank's content (order of the pool does not matter); ``ties``:
    the tie rule of the pool's reference labels (a run's ``reference_ties``)."""
    rows = sorted((e.id, e.text, [e.reference(t, ties) for t in rubric.traits], e.essay_set) for e in pool)
    payload = {"format": BANK_FORMAT, "embedder": embedder_name, "traits": rubric.trait_names, "pool": rows}
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


def bank_scope(pool: Sequence[Essay], rubric: Rubric, tag: str = "") -> str:
    """What a bank is for (the rubric's traits, the pool's essay sets and an optional ``tag``, e.g. the fold a
    cross-fold bank leaves out), not its exact pool or embedder.

    Recorded in the bank's metadata, for ``madrag cache list``; no bank is ever deleted because of it.
    """
    sets = sorted({e.essay_set for e in pool if e.essay_set is not None})
    payload: dict[str, object] = {"traits": rubric.trait_names, "sets": sets}
    if tag:
        payload["tag"] = tag
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()[:32]


def _metadata(essay: Essay, rubric: Rubric, ties: TieRule) -> dict[str, str | int]:
    meta: dict[str, str | int] = {"essay_id": essay.id}
    if essay.essay_set is not None:
        meta["essay_set"] = essay.essay_set
    for trait in rubric.traits:
        ref = essay.reference(trait, ties)
        if ref is not None:
            meta[score_key(trait.name)] = ref
    return meta


@dataclass(frozen=True)
class _Target:
    """Where a bank is built: the cache folder's store, the folder, the bank's name and its metadata."""

    client: SqliteBanks
    cache_dir: Path
    name: str
    metadata: dict[str, str | int]


class ExemplarBank:
    """Scored pool essays (cosine space) answering the MADRAG paper's two retrieval procedures from memory.

    Use :meth:`build_or_load`; a Ray worker builds one over a restored snapshot. Query vectors are cached per
    essay (id and text) in memory, so scoring every trait of an essay embeds it once. ``lease`` keeps the
    persistent bank it came from from being pruned while this object lives.
    """

    def __init__(
        self,
        collection: ArrayCollection,
        embedder: Embedder,
        rubric: Rubric,
        fingerprint: str,
        built_now: bool,
        lease: bank_store.BankLease | None = None,
    ) -> None:
        self._collection = collection
        self.embedder = embedder
        self.rubric = rubric
        self.fingerprint = fingerprint
        self.built_now = built_now
        self.lease = lease
        self.size: int = int(collection.count())
        self._cache: OrderedDict[tuple[str, str], FloatArray] = OrderedDict()
        self._cache_lock = threading.Lock()

    # ---------------------------------------------------------------- building

    @classmethod
    def build_or_load(
        cls,
        pool: list[Essay],
        rubric: Rubric,
        embedder: Embedder,
        cache_dir: Path,
        *,
        batch_size: int = 256,
        scope_tag: str = "",
        on_progress: Callable[[int, int], None] | None = None,
        ties: TieRule = PAPER_TIES,
    ) -> ExemplarBank:
        """Reuse the bank of this pool, rubric and embedder under ``cache_dir``, or embed the pool and build it;
        either way its contents are read into memory once.

        ``batch_size`` essays are embedded and added per step (capped by the store's maximum batch size).
        ``scope_tag`` is recorded with a new bank (e.g. the fold a cross-fold bank leaves out).
        ``on_progress(done, total)`` is called after each embedded batch when the bank is built now.
        ``ties``: how the pool's reference labels (the exemplars' scores) round a tie (a run's ``reference_ties``).
        Banks of other pools in ``cache_dir`` are left as they are (``madrag cache prune`` removes unused ones).
        """
        if not pool:
            raise InputError("the exemplar pool is empty: the bank needs scored essays from the training split")
        check_unique(list(pool), "the exemplar pool")
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        cache_dir = Path(cache_dir)
        fingerprint = pool_fingerprint(pool, rubric, embedder.name, ties)
        name = bank_store.bank_name(fingerprint)
        lease = bank_store.BankLease(cache_dir, name)  # before the lookup: prune cannot take it from here on
        client = bank_store.open_client(cache_dir)
        with bank_store.folder_lock(cache_dir, write=False):
            collection = bank_store.find_finished(client, name, fingerprint, len(pool))
            contents = None if collection is None else cls._read(collection)
        built_now = contents is None
        if contents is None:
            metadata: dict[str, str | int] = {
                "fingerprint": fingerprint,
                "scope": bank_scope(pool, rubric, scope_tag),
                "embedder": embedder.name,
                "traits": json.dumps(rubric.trait_names, ensure_ascii=False),
                "size": len(pool),
                "format": BANK_FORMAT,
            }
            target = _Target(client, cache_dir, name, metadata)
            contents = cls._build(target, pool, rubric, embedder, batch_size, on_progress, ties)
        return cls(contents, embedder, rubric, fingerprint, built_now, lease=lease)

    @staticmethod
    def _read(collection: SqliteCollection) -> ArrayCollection:
        return ArrayCollection.from_contents(collection.get(include=["documents", "metadatas", "embeddings"]))

    @staticmethod
    def _build(
        target: _Target,
        pool: list[Essay],
        rubric: Rubric,
        embedder: Embedder,
        batch_size: int,
        on_progress: Callable[[int, int], None] | None = None,
        ties: TieRule = PAPER_TIES,
    ) -> ArrayCollection:
        """Embed the pool in batches into a temporary collection, rename it to ``target.name`` when complete, and
        return the finished bank's contents (another process's, when it finished the same bank first)."""
        client, cache_dir, name, metadata = target.client, target.cache_dir, target.name, target.metadata
        temp = bank_store.temporary_name(name)
        building = bank_store.BankLease(cache_dir, temp)  # a live build is not a leftover to prune
        try:
            with bank_store.folder_lock(cache_dir, write=True):
                collection = client.create_collection(temp, metadata=metadata)
            step = max(1, min(batch_size, MAX_BATCH))
            for done in range(0, len(pool), step):
                batch = pool[done : done + step]
                vectors = normalize_rows(embedder.embed([e.text for e in batch]))
                if vectors.shape[0] != len(batch):
                    raise MadragError(f"embedder {embedder.name} returned {vectors.shape[0]} vectors for {len(batch)}")
                with bank_store.folder_lock(cache_dir, write=True):
                    collection.add(
                        ids=[e.id for e in batch],
                        embeddings=vectors,
                        documents=[e.text for e in batch],
                        metadatas=[_metadata(e, rubric, ties) for e in batch],
                    )
                if on_progress is not None:
                    on_progress(done + len(batch), len(pool))
            with bank_store.folder_lock(cache_dir, write=True):
                final = bank_store.finish_build(client, temp, name, str(metadata["fingerprint"]), len(pool))
                return ExemplarBank._read(final)
        except BaseException:
            with contextlib.suppress(Exception), bank_store.folder_lock(cache_dir, write=True):
                client.delete_collection(temp)  # a failed build leaves nothing behind (a killed one: prune)
            raise
        finally:
            building.release()

    def contents(self) -> dict[str, Any]:
        """Every pool essay as stored: ``ids``, ``documents``, ``metadatas`` (lists) and ``embeddings`` (an
        ``(n, dim)`` float32 array), e.g. to ship the bank to processes that cannot open this cache."""
        got = self._collection.get(include=["documents", "metadatas", "embeddings"])
        return got | {"documents": list(got["documents"]), "metadatas": [dict(m) for m in got["metadatas"]]}

    # ---------------------------------------------------------------- query vectors

    def query_vector(self, essay: Essay) -> FloatArray:
        """The essay's embedding (1-D), computed once per essay and cached in memory."""
        key = essay.id, hashlib.sha1(essay.text.encode("utf-8")).hexdigest()  # ids can be reused: the text too
        with self._cache_lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                cached: FloatArray = self._cache[key]
                return cached
        vector: FloatArray = normalize_rows(self.embedder.embed([essay.text]))[0]
        self._remember(key, vector)
        return vector

    def _remember(self, key: tuple[str, str], vector: FloatArray) -> None:
        with self._cache_lock:
            self._cache[key] = vector
            while len(self._cache) > _QUERY_CACHE_SIZE:
                self._cache.popitem(last=False)

    def _vector(self, essay: Essay, query_vector: FloatArray | None) -> FloatArray:
        vector = self.query_vector(essay) if query_vector is None else query_vector
        return np.asarray(vector, np.float32).reshape(-1)

    # ---------------------------------------------------------------- retrieval

    def _query(self, vector: FloatArray, n: int, exclude: str, level: tuple[str, int] | None = None) -> list[Exemplar]:
        c = self._collection
        found = [(i, d) for i, d in c.nearest(vector, max(1, min(n, self.size)), exclude, level) if c.ids[i] != exclude]
        return [Exemplar.stored(c.ids[i], c.documents[i], c.metadatas[i], d) for i, d in found[:n]]

    def similar(self, essay: Essay, k: int, query_vector: FloatArray | None = None) -> list[Exemplar]:
        """Procedure 1: the ``k`` pool essays nearest to ``essay`` (never ``essay`` itself), nearest first."""
        if k < 1:
            raise InputError(f"k must be >= 1, got {k}")
        return self._query(self._vector(essay, query_vector), k, exclude=essay.id)

    def per_level(self, essay: Essay, trait: Trait, query_vector: FloatArray | None = None) -> list[LevelExemplar]:
        """Procedure 2: for each score of ``trait`` (lowest first) the nearest pool essay with that reference.

        A level without any such pool essay (other than ``essay`` itself) yields ``exemplar=None``.
        """
        self._check_trait(trait)
        vector = self._vector(essay, query_vector)
        levels = []
        for score in trait.scores:
            found = self._query(vector, 1, essay.id, (score_key(trait.name), score))
            levels.append(LevelExemplar(trait=trait.name, score=score, exemplar=found[0] if found else None))
        return levels

    def per_level_all(
        self, essay: Essay, traits: Sequence[Trait] | None = None, query_vector: FloatArray | None = None
    ) -> dict[str, list[LevelExemplar]]:
        """Procedure 2 for several traits (default: the whole rubric), embedding ``essay`` only once."""
        chosen = list(traits) if traits is not None else list(self.rubric.traits)
        vector = self._vector(essay, query_vector)
        return {t.name: self.per_level(essay, t, query_vector=vector) for t in chosen}

    @functools.cached_property
    def _anchor_choice(self) -> AnchorChoice:
        return AnchorChoice(self._collection)

    def anchors(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        """Anchor exemplars (:mod:`madrag.retrieval.anchors`): per score of ``trait`` the level's medoid, the
        same for every essay (never ``essay`` itself: then the level's runner-up)."""
        self._check_trait(trait)
        return self._anchor_choice.per_level(essay, trait)

    def anchor_ids(self) -> dict[str, dict[str, str | None]]:
        """The anchors' essay ids, per trait and score level, as a run records them."""
        return self._anchor_choice.chosen_ids(list(self.rubric.traits))

    def _check_trait(self, trait: Trait) -> None:
        if trait.name not in self.rubric.trait_names:
            raise InputError(f"trait {trait.name!r} is not in the bank's rubric {self.rubric.trait_names}")
