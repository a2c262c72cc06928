"""A run's final scores kept as rows in its store (:meth:`madrag.store.RunStore.scores`), the one place every
reader reads them from: a protocol's scores of an essay as the essay finishes (:func:`keeper`, called by the
runner, through the store's writer thread, as records are), and a run-wide protocol's (CJ's Bradley-Terry fit,
MTS's min-max: a score depends on the run's other essays) over the whole run when a job ends
(:func:`keep_over_run`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from madrag.pipeline.migrations.scores import protocol_scores
from madrag.pipeline.unusable import missing_cause
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.rubric import Rubric
from madrag.store import RunStore
from madrag.store.writer import ScoreRow, score_row

KeepScores = Callable[[list[TraitScore]], Awaitable[None]]
"""Keeps an essay's final scores as the essay finishes (awaited before it counts as finished)."""


def rows(scores: Sequence[TraitScore]) -> list[ScoreRow]:
    """The rows ``scores`` are kept as, a missing score with its cause
    (:func:`madrag.pipeline.unusable.missing_cause`)."""
    return [score_row(s, None if s.score is not None else missing_cause(s)) for s in scores]


class ScoreSink(Protocol):
    """Where an essay's final scores are kept: a run store, or a distributed worker's stream (whose driver keeps
    them in the run's store)."""

    async def aput_scores(self, rows: Sequence[ScoreRow]) -> None: ...


def keeper(store: ScoreSink, protocols: Sequence[ScoringProtocol]) -> KeepScores:
    """What keeps an essay's final scores in ``store`` as it finishes: every protocol's but the run-wide ones'
    (their scores of one essay are provisional: :func:`keep_over_run` keeps theirs)."""
    later = {p.name for p in protocols if p.needs.over_run}

    async def keep(scores: list[TraitScore]) -> None:
        await store.aput_scores(rows([s for s in scores if s.protocol not in later]))

    return keep


def keep_over_run(
    scores: list[TraitScore], store: RunStore, protocols: Sequence[ScoringProtocol], rubric: Rubric, essay_ids: set[str]
) -> list[TraitScore]:
    """``scores`` (a job's, of ``essay_ids``) with those of the protocols scored over the run replaced by their
    final scores over the whole run's stored records, which are kept as the run's rows of those protocols (the
    rows written before replaced in one transaction); a run made by a protocol's earlier version is read as it was
    (:func:`~madrag.pipeline.migrations.scores.protocol_scores`)."""
    later = [p for p in protocols if p.needs.over_run]
    if not later:
        return scores
    final = [s for p in later for s in protocol_scores(p, store, rubric)]
    store.put_scores(rows(final), replace={p.name for p in later})
    names = {p.name for p in later}
    return [s for s in scores if s.protocol not in names] + [s for s in final if s.essay_id in essay_ids]
