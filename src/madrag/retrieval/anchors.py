"""Anchor exemplars (``judge_exemplars="anchors"``): one fixed pool essay per score level, as teachers use anchor
papers.

A deliberate difference from the MADRAG paper, whose procedure 2 retrieves for every essay the pool essay nearest to it
at each score level. Here each level's exemplar is chosen once, from the pool alone: the level's *medoid*, the
pool essay with that reference score whose summed cosine similarity to the level's other essays is the largest
(ties: the smaller essay id), so the choice does not depend on the pool's order. Every essay scored on a trait
then gets the same exemplar block, which the Judge's prompt shows before the essay, so all its Judge calls share
one long prompt prefix that a server with prefix caching computes once.

The essay scored is never its own exemplar: when it is a level's medoid, the level's runner-up stands in for it
(for that essay only). An anchor's ``similarity`` is its mean cosine similarity to its level's essays (1.0 for a
level of one essay) and ``distance`` is one minus it: how central it is, not how near the essay scored.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from madrag.data.essay import Essay
from madrag.retrieval.exemplars import Exemplar, LevelExemplar, score_key
from madrag.rubric import Trait

if TYPE_CHECKING:
    from madrag.retrieval.memory import ArrayCollection

CANDIDATES = 2
"""Anchors kept per level: the medoid and its runner-up (which stands in when the essay scored is the medoid)."""
_DECIMALS = 6  # summed similarities equal to 6 decimals are ties (float32 vectors), broken by essay id


@runtime_checkable
class AnchorSource(Protocol):
    """An exemplar bank that chooses anchors (:class:`~madrag.retrieval.bank.ExemplarBank`,
    :class:`~madrag.retrieval.folds.FoldBanks`)."""

    def anchors(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        """One anchor (or none) per score level of ``trait``, never ``essay`` itself."""
        ...


def level_medoids(ids: list[str], vectors: Any, n: int = CANDIDATES) -> list[tuple[int, float]]:
    """The ``n`` most central of the unit ``vectors`` (rows, in the order of ``ids``): (row, mean cosine
    similarity to all rows), most central first; ties in the summed similarity go to the smaller id."""
    exact = np.asarray(vectors, dtype=np.float64)
    sums = exact @ exact.sum(axis=0)
    order = sorted(range(len(ids)), key=lambda i: (-round(float(sums[i]), _DECIMALS), ids[i]))
    return [(i, float(sums[i]) / len(ids)) for i in order[:n]]


class AnchorChoice:
    """The anchors of one bank's pool, chosen per trait on first use (then kept)."""

    def __init__(self, collection: ArrayCollection) -> None:
        self._collection = collection
        self._chosen: dict[str, dict[int, list[Exemplar]]] = {}
        self._lock = threading.Lock()

    def candidates(self, trait: Trait) -> dict[int, list[Exemplar]]:
        """Per score of ``trait`` (lowest first): its medoid and runner-up (fewer when the level has fewer)."""
        with self._lock:
            if trait.name not in self._chosen:
                self._chosen[trait.name] = self._choose(trait)
            return self._chosen[trait.name]

    def _choose(self, trait: Trait) -> dict[int, list[Exemplar]]:
        pool = self._collection
        column = [m.get(score_key(trait.name)) for m in pool.metadatas]
        chosen: dict[int, list[Exemplar]] = {}
        for score in trait.scores:
            rows = [i for i, value in enumerate(column) if value is not None and int(value) == score]
            picked = level_medoids([pool.ids[i] for i in rows], pool.vectors[rows]) if rows else []
            chosen[score] = [
                Exemplar.stored(pool.ids[rows[j]], pool.documents[rows[j]], pool.metadatas[rows[j]], 1.0 - mean)
                for j, mean in picked
            ]
        return chosen

    def per_level(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        """Per score of ``trait``: its anchor, or the runner-up when ``essay`` is the anchor (None: neither)."""
        levels = []
        for score, found in self.candidates(trait).items():
            usable = [ex for ex in found if ex.essay_id != essay.id]
            levels.append(LevelExemplar(trait=trait.name, score=score, exemplar=usable[0] if usable else None))
        return levels

    def chosen_ids(self, traits: list[Trait]) -> dict[str, dict[str, str | None]]:
        """What a run records: per trait, per score level, the anchor's essay id (None: the level has none)."""
        return {
            t.name: {str(score): found[0].essay_id if found else None for score, found in self.candidates(t).items()}
            for t in traits
        }
