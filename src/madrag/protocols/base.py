"""The one interface every scoring method implements, so an ablation is a list of protocol names.

A protocol owns everything that makes it a method, so no caller asks what kind of protocol it holds. It has five
members: its ``name``; what it needs and how a run runs it (``needs``, a :class:`ProtocolNeeds`: a bank, one
call chain per trait or one for the essay, its templates, whether its scores depend on the run's other essays,
the inputs it refuses, the essays its paper evaluates it on ...); what a run records of it (``describe``); how it
scores an essay (``score_essay``); and how its final scores are read back from a run's stored records
(``read_scores``): a run-wide protocol's (``needs.over_run``: CJ's fit, MTS's min-max) when a job ends, any
protocol's for a run made before its scores were kept as rows (:mod:`madrag.pipeline.migrations`).

The common case, a protocol that scores trait by trait with one model call per trait, is
:class:`madrag.protocols.per_trait.TraitProtocol` with :func:`~madrag.protocols.per_trait.ask_for_score`.
Protocols are found by name through :func:`madrag.protocols.registry.register_protocol` (see there).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from madrag.agents.calls import CallContext
from madrag.data.essay import Essay
from madrag.protocols.scores import TraitScore, judge_scores
from madrag.records import AgentRecord
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings

__all__ = [
    "Population",
    "ProtocolNeeds",
    "RecordReader",
    "ScoringProtocol",
    "TraitScore",
    "essay_width",
    "judges_needed",
    "record_groups",
]


@dataclass(frozen=True)
class Population:
    """The essays of a run that a protocol's paper computes its agreement on, when not every scored essay: their
    ids, a line saying what they are and a short tag (the evaluation shows the QWK on them, every essay's beside
    it)."""

    ids: frozenset[str]
    label: str
    tag: str
    """A few words naming the population beside the protocol's name in a table ("the MTS authors' sample")."""


@dataclass(frozen=True)
class ProtocolNeeds:
    """What a protocol needs and how a run runs it. Every default is that of a protocol that scores trait by
    trait, stores one Judge record per score under its own name and shares nothing."""

    bank: bool = False
    """It needs an exemplar bank in its call context."""
    per_trait: bool = True
    """It scores trait by trait (else every trait of an essay in one go: a resumed essay is scored whole)."""
    templates: tuple[str, ...] = ()
    """Prompt templates it renders beyond the MADRAG paper's (:data:`madrag.agents.prompts.PROMPT_NAMES`, which
    every run records): a run records their sources and texts, and refuses to resume when they change."""
    over_run: bool = False
    """A final score depends on the run's other essays (MTS's min-max, CJ's Bradley-Terry fit): ``score_essay``
    returns provisional scores and the final ones are ``read_scores``' over the run's stored records."""
    chain: str | None = None
    """The call chains it shares with other protocols (MAD and MADRAG wait on one debate: ``debate/adv_r1``),
    so a runner counts them once; None: its own (its name)."""
    chains: int | None = None
    """Call chains one essay keeps going, when neither one per trait nor one (MTS[template=FILE]: four)."""
    several_judges: bool = False
    """Its Judge is ``judges_per_trait`` independent judges (MA), a stored score finished when it combines them."""
    record_groups: frozenset[str] = frozenset()
    """The protocol fields of the records its final scores are read from; empty: its name."""
    shared_calls: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Shared call groups (protocol field -> roles) its scores read without linking them in its own records
    (StrictJudge reads the shared round-0 Strict call), for cost attribution."""
    check: Callable[[Rubric, Sequence[Essay]], None] | None = None
    """Refuses (a :class:`madrag.errors.MadragError`) a new run's rubric or essays it cannot score, before
    anything is written; None: nothing to refuse."""
    population: Callable[[Sequence[Essay], Rubric], Population | None] | None = None
    """The essays of a run its paper's agreement is computed on, when not all of them; None: every essay."""


class RecordReader(Protocol):
    """Where stored records are read from: a run store, or anything that serves its records the same way."""

    def records(self, protocol: str | None = None, role: str | None = None) -> Iterator[AgentRecord]:
        """The stored records, optionally those of one protocol field and/or role."""
        ...


class ScoringProtocol(ABC):
    """Given an essay, its rubric and a call context (provider, store, bank), score every trait.

    A subclass sets ``name`` (the configured name: ``MADRAG``, ``MADRAG[both_r1]``, ``ConsensusMAD[rounds=2]``)
    and implements :meth:`describe` and :meth:`score_essay`; ``needs`` and :meth:`read_scores` have the defaults
    of a protocol that stores one Judge record per score (role ``judge``, under its own name) and shares nothing.
    """

    name: str

    @property
    def needs(self) -> ProtocolNeeds:
        """What it needs and how a run runs it (default: :class:`ProtocolNeeds`' defaults)."""
        return ProtocolNeeds()

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it (a resumed run must match)."""

    @abstractmethod
    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        """One TraitScore per rubric trait of ``essay`` (None where no usable score was read)."""

    def read_scores(self, reader: RecordReader, rubric: Rubric) -> list[TraitScore]:
        """Its final scores from a run's stored records, exactly as :meth:`score_essay` returned them (an
        essay-trait whose records are missing or failed has none). Default: its Judge records
        (:func:`madrag.protocols.scores.judge_scores`)."""
        return judge_scores(reader.records(protocol=self.name, role="judge"), rubric)


def record_groups(protocol: ScoringProtocol) -> frozenset[str]:
    """The protocol fields of the records ``protocol``'s final scores are read from (its name by default)."""
    return protocol.needs.record_groups or frozenset({protocol.name})


def judges_needed(protocol: ScoringProtocol, settings: ScoringSettings) -> int:
    """Judges a finished stored trait score of ``protocol`` combines (``TraitScore.n_judges``); fewer: still to
    score."""
    return settings.judges_per_trait if protocol.needs.several_judges else 1


def _chains(protocol: ScoringProtocol, traits: Sequence[str]) -> set[str]:
    """The call chains one essay keeps going with ``protocol``: one per trait, or one for the essay, or its own
    number (``needs.chains``), under its shared chain's name when it has one."""
    needs = protocol.needs
    group = needs.chain or protocol.name
    if needs.chains is not None:
        return {f"{group}|{i}" for i in range(needs.chains)}
    return {f"{group}|{t}" for t in traits} if needs.per_trait else {f"{group}|*"}


def essay_width(protocols: Iterable[ScoringProtocol], n_traits: int) -> int:
    """Concurrent call chains of one essay of ``n_traits`` traits under ``protocols`` (a runner keeps enough in
    flight to fill the backend's slots): one per trait for a per-trait protocol, one for a protocol scoring every
    trait in one call (SA), a chain shared by several protocols (a debate) once."""
    traits = [f"trait {i}" for i in range(n_traits)]
    return max(1, len(set().union(*(_chains(p, traits) for p in protocols))))
