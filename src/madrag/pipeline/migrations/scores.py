"""A run's final scores as rows, given to a run an earlier madrag made before they were kept.

A run store of schema version 2 keeps its final scores as rows (:meth:`madrag.store.RunStore.scores`), written as
the protocols finish. A run made before then has records and no rows (its store migrated to version 2 says so:
:data:`SCORES_PENDING`): opened for writing (a run resumed), its rows are derived here once, by the derivation the
readers used before the rows existed (:func:`derive_scores`: each protocol's scores read back from its records);
opened read-only, the same rows are derived into the in-memory copy the store is read from, the file left as it
is. Every reader then reads rows, whatever commit made the run.

A protocol scored over the run (``needs.over_run``: CJ's fit, MTS's min-max) stores no Judge record today. madrag's
earlier CJ and MTS, under the same names, stored a derived Judge record per score: a run that holds Judge records
of such a protocol was made by that earlier version, and its scores are those records', as they were read then
(:func:`protocol_scores`, which also reads a resumed run's when its job ends); the protocols themselves know only
their current records.

GEval, ``MTS[variant=madrag-v1]`` and the adaptive debate (a confident screening Judge's score kept) also stored,
before their scores were rows alone, a derived Judge record per score (role ``judge``, no request: ``answers``
0). A run holding them reads the same: its rows as they were kept; without rows, GEval's and MTS v1's scores are
computed again from their raters' and answers' records by the protocols' own reading (the same scores; the rows
then name those records), an adaptive debate's read from its Judge records, the derived ones among them. Those
records hold no answer, so the readers that count calls and answers leave them out as they leave out any record
without one; ``madrag costs`` counts a kept screening score from the decision it records.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from madrag.pipeline.unusable import missing_cause
from madrag.protocols import find_protocol
from madrag.protocols.base import RecordReader, ScoringProtocol, record_groups
from madrag.protocols.scores import combine_judges, judge_scores
from madrag.records import BASELINE_ROLE, AgentRecord, TraitScore
from madrag.rubric import Rubric
from madrag.store import RunStore
from madrag.store.writer import score_row

__all__ = ["SCORES_PENDING", "derive_scores", "protocol_scores", "scores_pending", "upgrade_scores"]

SCORES_PENDING = "scores_pending"
"""The meta key of a store whose final-score rows are still to be derived from its records: set by store migration
2 on a store that holds records, cleared in the transaction that writes the derived rows."""


def scores_pending(store: RunStore) -> bool:
    """Whether ``store``'s final scores are still to be derived from its records (:data:`SCORES_PENDING`)."""
    return store.get_meta(SCORES_PENDING) is not None


class _StreamedJudges:
    """A run store whose Judge records are read as they are needed, without their prompts and tokens and without
    the failed calls, none kept."""

    def __init__(self, store: RunStore) -> None:
        self._store = store

    def records(self, protocol: str | None = None, role: str | None = None) -> Iterator[AgentRecord]:
        """The records of :meth:`RunStore.records`, Judge records light and without failed calls."""
        if role == "judge":
            found = self._store.records(protocol=protocol, role="judge", answers_only=True)
            return (r for r in found if not r.failed)
        return self._store.records(protocol=protocol, role=role)


def _known_protocols(names: Iterable[str]) -> list[ScoringProtocol]:
    """The registered protocols among ``names``, each once, in order."""
    found = (find_protocol(name) for name in dict.fromkeys(names))
    return [p for p in found if p is not None]


def protocol_scores(proto: ScoringProtocol, reader: RecordReader, rubric: Rubric) -> list[TraitScore]:
    """``proto``'s scores of the run: its own reading, or, for a run made by the earlier version of a protocol now
    scored over the run (its derived Judge records stored), those records' scores (module docstring)."""
    if proto.needs.over_run:
        earlier = list(reader.records(protocol=proto.name, role="judge"))
        if earlier:
            return judge_scores(earlier, rubric)
    return proto.read_scores(reader, rubric)


def derive_scores(store: RunStore, rubric: Rubric, protocols: Sequence[str]) -> list[TraitScore]:
    """One TraitScore per (protocol, essay, trait) derived from a run's stored records, as the readers did before
    the scores were rows: each configured protocol's scores as it reads them back
    (:meth:`~madrag.protocols.base.ScoringProtocol.read_scores`), then the Judge records no configured protocol
    claims by the Judge-record rule, then the LLM-free baselines' records (role ``baseline``). Failed calls give
    no score."""
    reader = _StreamedJudges(store)
    known = _known_protocols(protocols)
    out = [score for proto in known for score in protocol_scores(proto, reader, rubric)]
    claimed = {group for proto in known for group in record_groups(proto)}
    unclaimed = sorted(store.protocols_of("judge") - claimed)
    out += judge_scores((r for group in unclaimed for r in reader.records(protocol=group, role="judge")), rubric)
    for record in store.records(role=BASELINE_ROLE):
        out.append(combine_judges(record.protocol, rubric.trait(record.trait), [record]))
    return out


def _configured(config: Any) -> tuple[Rubric | None, list[str]]:
    """The rubric and protocol names a run's stored configuration holds (None, []: none stored)."""
    if not isinstance(config, dict) or "rubric" not in config:
        return None, []
    names = [str(p["name"]) for p in config.get("protocols", []) if isinstance(p, dict) and "name" in p]
    return Rubric.model_validate(config["rubric"]), names


def upgrade_scores(store: RunStore, *, rederive: bool = False) -> bool:
    """Give a run made before its scores were rows (:func:`scores_pending`) its rows, derived from its
    records (:func:`derive_scores`): on disk for a store opened for writing (migrated, and kept beside it, when it
    was opened), in memory for one opened read-only. Whether there was anything to do. A run without a stored
    rubric has no scores to derive (its records are kept; it gets no rows). ``rederive``: derive them whatever
    the store holds (a store whose records were written one by one, as an older madrag wrote them)."""
    if not rederive and not scores_pending(store):
        return False
    rubric, names = _configured(store.get_meta("config"))
    scores = derive_scores(store, rubric, names) if rubric is not None else []
    store.put_scores([score_row(s, missing_cause(s)) for s in scores], clear=(SCORES_PENDING,))
    return True
