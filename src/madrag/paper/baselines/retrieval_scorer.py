"""Retrieval-only baseline: score an essay by the scores of its nearest pool essays (no LLM, no training).

For an essay, the bank's procedure 1 (:meth:`~madrag.retrieval.ExemplarBank.similar`) returns the ``k`` nearest
pool essays (all-MiniLM-L6-v2 cosine similarity). Each trait's score is their similarity-weighted mean
(weights = cosine similarity clipped at 0), rounded half up and clipped to the trait's range. This measures
how much of MADRAG's agreement the exemplars alone could explain: it is the "copy the neighbours" scorer.

Cross-validation uses the same ASAP folds as the feature baseline: for each fold, the bank holds the other
four folds and the fold's essays are scored. Every essay is embedded once for all five folds: a
:class:`CachingEmbedder` wraps the real embedder under the same name (the same embedding function, so the
banks' fingerprints are those of plain MiniLM banks), embeds all essays of the set in one batched call, and
then serves both the bank builds (each pool is a subset) and the query vectors from memory; the vectors are also
kept in the cache folder's vector store (:mod:`madrag.retrieval.vectors`), so a second run embeds nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.paper.baselines.feature_scorer import CVResult, evaluate_trait, fold_indices, to_scale
from madrag.retrieval import Embedder, Exemplar, ExemplarBank
from madrag.retrieval.embedder import FloatArray
from madrag.retrieval.vectors import VECTORS_FILE, CachingEmbedder
from madrag.rubric import Rubric, Trait


class SimilarBank(Protocol):
    """What the scorer needs from a bank: procedure 1 (top-k similar essays, never the query itself)."""

    def similar(self, essay: Essay, k: int, query_vector: FloatArray | None = None) -> list[Exemplar]:
        """The ``k`` pool essays nearest to ``essay`` (never ``essay`` itself), nearest first."""
        ...


def weighted_score(exemplars: Sequence[Exemplar], trait: Trait) -> int | None:
    """Similarity-weighted mean of the exemplars' ``trait`` scores, rounded half up and clipped to the range.

    Weights are cosine similarities clipped at 0. Exemplars without a score for the trait are skipped; if all
    remaining weights are 0 (no positively similar neighbour) the plain mean is used; with no scored exemplar
    the answer is None (never imputed).
    """
    scored = [(max(ex.similarity, 0.0), ex.scores[trait.name]) for ex in exemplars if trait.name in ex.scores]
    if not scored:
        return None
    weights = np.array([w for w, _ in scored], dtype=np.float64)
    values = np.array([s for _, s in scored], dtype=np.float64)
    if weights.sum() <= 0:
        weights = np.ones_like(weights)
    return to_scale(float((weights * values).sum() / weights.sum()), trait)


class RetrievalScorer:
    """Scores every trait of an essay from its ``k`` nearest pool essays (see :func:`weighted_score`)."""

    def __init__(self, bank: SimilarBank, rubric: Rubric, k: int = 5) -> None:
        if k < 1:
            raise InputError(f"k must be >= 1, got {k}")
        self.bank = bank
        self.rubric = rubric
        self.k = k

    def neighbours(self, essay: Essay, query_vector: FloatArray | None = None) -> list[Exemplar]:
        """The ``k`` nearest pool essays; the essay itself is dropped even if a bank returned it."""
        found = self.bank.similar(essay, self.k, query_vector=query_vector)
        return [ex for ex in found if ex.essay_id != essay.id][: self.k]

    def score(self, essay: Essay, query_vector: FloatArray | None = None) -> dict[str, int | None]:
        """One retrieval, then one score per rubric trait (None where no neighbour has that trait scored)."""
        near = self.neighbours(essay, query_vector)
        return {t.name: weighted_score(near, t) for t in self.rubric.traits}


BankFactory = Callable[[list[Essay], int], SimilarBank]


def minilm_bank_factory(rubric: Rubric, embedder: Embedder, cache_dir: Path) -> BankFactory:
    """Fold banks as real :class:`~madrag.retrieval.ExemplarBank` s, one bank store folder per fold.

    A rerun with the same data reuses them without embedding anything.
    """

    def build(pool: list[Essay], fold: int) -> SimilarBank:
        return ExemplarBank.build_or_load(pool, rubric, embedder, cache_dir / f"fold-{fold}")

    return build


def cross_validate_retrieval(
    essays: Sequence[Essay],
    rubric: Rubric,
    embedder: Embedder,
    cache_dir: Path,
    k: int = 5,
    *,
    bank_factory: BankFactory | None = None,
) -> CVResult:
    """5-fold CV of :class:`RetrievalScorer`: each fold is scored against a bank of the other four folds.

    Every essay is embedded at most once (see :class:`CachingEmbedder`); ``bank_factory(pool, fold)`` builds a
    fold's bank (default: :func:`minilm_bank_factory`, real banks under ``cache_dir``).
    """
    start = time.perf_counter()
    folds = fold_indices([e.fold for e in essays])
    cache_dir = Path(cache_dir)
    caching = CachingEmbedder(embedder, cache_dir / VECTORS_FILE)  # one store: the embedder is in each key
    vectors = caching.embed([e.text for e in essays])  # one batched call for the whole set
    embed_s = time.perf_counter() - start
    factory = bank_factory or minilm_bank_factory(rubric, caching, cache_dir)
    preds: dict[str, list[int | None]] = {t.name: [None] * len(essays) for t in rubric.traits}
    for fold in folds:
        bank = factory([essays[int(i)] for i in fold.train], fold.fold)
        scorer = RetrievalScorer(bank, rubric, k)
        for row in fold.test:
            for name, value in scorer.score(essays[int(row)], query_vector=vectors[int(row)]).items():
                preds[name][int(row)] = value
    traits = {t.name: evaluate_trait(t, essays, preds[t.name], folds) for t in rubric.traits}
    notes = {"k": k, "embedder": embedder.name, "texts_embedded": caching.texts_embedded, "embed_s": embed_s}
    return CVResult(f"retrieval-only (k={k})", traits, time.perf_counter() - start, notes)
