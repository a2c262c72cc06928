"""Planning a distributed run: which essay-traits are still to score, cut into shards a worker scores whole.

A *unit* is one protocol on one essay: the traits it still has to score (for a protocol that scores every
trait in one call, e.g. SA or the consensus judges, all of them or none). The plan reads the run store once: a
(protocol, essay, trait) whose final score is already a row of the store (:meth:`madrag.store.RunStore.scores`;
MA with n judges needs all n) is finished and never handed out again. Essays that still have units are cut into
shards in the run's order; a shard carries the records its essays already have (the debate turns of a
half-finished essay-trait), so a worker continues exactly where the run stopped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from madrag.data.essay import Essay
from madrag.protocols.base import ScoringProtocol, TraitScore, judges_needed
from madrag.retrieval.embedder import FloatArray
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings
from madrag.store import RunStore

Todo = dict[str, list[str]]
"""Protocol name -> the trait names it still scores on one essay."""


@dataclass
class Shard:
    """Essays one worker scores in one go, with what is left of each and what is already stored."""

    index: int
    essays: list[Essay]
    todo: dict[str, Todo]  # essay id -> protocol -> traits
    known: list[str] = field(default_factory=list)  # JSON of records these essays already have
    vectors: dict[str, FloatArray] = field(default_factory=dict)  # query vectors, when the driver embeds
    attempt: int = 1

    @property
    def units(self) -> int:
        """(essay, protocol, trait) scores this shard produces."""
        return sum(len(traits) for todo in self.todo.values() for traits in todo.values())


@dataclass
class Plan:
    """What a (resumed) run still has to do."""

    finished: dict[str, list[TraitScore]]  # essay id -> the scores already stored
    todo: dict[str, Todo]  # essay id -> what is left (only essays with something left)
    partial: set[str]  # essays with something left and some record stored (a score, or debate turns)


def plan_run(
    store: RunStore,
    essays: Sequence[Essay],
    rubric: Rubric,
    protocols: Sequence[ScoringProtocol],
    settings: ScoringSettings,
) -> Plan:
    """Read the store's score rows once and list, per essay, the finished scores and the units still to score."""
    by_name = {p.name: p for p in protocols}
    names = list(by_name)
    selected = {e.id for e in essays}
    done: dict[tuple[str, str, str], TraitScore] = {}
    for score in store.scores(set(names)):
        proto = by_name[score.protocol]
        if score.essay_id in selected and score.n_judges >= judges_needed(proto, settings):
            done[(score.protocol, score.essay_id, score.trait)] = score
    recorded = store.recorded_essay_ids()
    finished: dict[str, list[TraitScore]] = {}
    todo: dict[str, Todo] = {}
    all_traits = rubric.trait_names
    for essay in essays:
        have = [done[k] for p in names for t in all_traits if (k := (p, essay.id, t)) in done]
        left: Todo = {}
        for proto in protocols:
            missing = [t for t in all_traits if (proto.name, essay.id, t) not in done]
            if missing:
                left[proto.name] = missing if proto.needs.per_trait else list(all_traits)
        finished[essay.id] = have
        if left:
            todo[essay.id] = left
    return Plan(finished=finished, todo=todo, partial={e for e in todo if e in recorded})


def shard_size(essays_in_flight: int, n_essays: int, workers: int, shards_per_worker: int) -> int:
    """Essays per shard: four times what one shard keeps in flight, but small enough that every worker slot
    gets at least two shards (so a lost shard is a small part of the run and the tail stays short)."""
    fill = max(1, 4 * essays_in_flight)
    spread = max(1, math.ceil(n_essays / max(1, 2 * workers * shards_per_worker)))
    return max(1, min(fill, spread))


def make_shards(essays: Sequence[Essay], plan: Plan, size: int) -> list[Shard]:
    """The essays with work left, in the run's order, ``size`` per shard."""
    pending = [e for e in essays if e.id in plan.todo]
    return [
        Shard(index=i, essays=chunk, todo={e.id: plan.todo[e.id] for e in chunk})
        for i, chunk in enumerate(pending[k : k + size] for k in range(0, len(pending), size))
    ]


def known_records(store: RunStore, shard: Shard, essay_ids: set[str]) -> list[str]:
    """JSON of the stored records of the shard's essays among ``essay_ids`` (those with records), for the
    traits still to score and the calls that score every trait."""
    wanted = {e.id for e in shard.essays if e.id in essay_ids}
    if not wanted:
        return []
    traits = {e: {t for traits in shard.todo[e].values() for t in traits} | {"*"} for e in wanted}
    return [r.model_dump_json() for r in store.records_of(wanted) if r.trait in traits[r.essay_id]]
