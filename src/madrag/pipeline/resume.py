"""The fast path of resuming a finished run: are all of a job's final scores already rows in its store?

A resumed job whose every (protocol, essay, trait) has its final score kept in the store
(:meth:`madrag.store.RunStore.scores`; a trait of MA with n judges: all n of them) has nothing left to do: its
scores are those rows, and no bank, embedder or backend is built. Otherwise it is scored as usual, every stored
call reused. A call that failed after its retries left its essay-trait without a row, so a resume retries it.
"""

from __future__ import annotations

from collections.abc import Sequence

from madrag.agents.calls import CallStats
from madrag.data.essay import Essay
from madrag.protocols.base import ScoringProtocol, TraitScore, judges_needed
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings
from madrag.store import RunStore


def stored_scores(
    store: RunStore,
    essays: Sequence[Essay],
    rubric: Rubric,
    protocols: Sequence[ScoringProtocol],
    settings: ScoringSettings,
) -> tuple[list[TraitScore], CallStats] | None:
    """Every final score of the job (each essay's, protocol by protocol, trait by trait) and the statistics of
    reading them (the run's stored calls, each reused) when all of them are kept; None when the job has work left."""
    ids = {essay.id for essay in essays}
    found = {
        (s.protocol, s.essay_id, s.trait): s for s in store.scores({p.name for p in protocols}) if s.essay_id in ids
    }
    wanted = [(p, (p.name, e.id, t)) for e in essays for p in protocols for t in rubric.trait_names]
    for protocol, key in wanted:
        score = found.get(key)
        if score is None or score.n_judges < judges_needed(protocol, settings):
            return None
    return [found[key] for _, key in wanted], CallStats(reused=store.count())
