"""The one interface every scoring method implements, so an ablation is a list of protocol names.

A protocol owns everything that makes it a method, so no caller asks what kind of protocol it holds:

* how it scores (:meth:`ScoringProtocol.score_essay`) and what it is recorded as (``describe``);
* what it needs: an exemplar bank (``uses_bank``), one call chain per trait or one for the whole essay
  (``per_trait``), the chains it shares with other protocols (``chains``: MAD and MADRAG wait on one debate);
* its prompt templates beyond the MADRAG paper's, which every run records (``templates``);
* how its final scores are read back from a run's stored records (``read_scores``, from ``record_groups``): a
  run-wide protocol's when a job ends, any protocol's for a run made before its scores were kept as rows
  (:mod:`madrag.pipeline.migrations`); every other reader reads the store's score rows. When a stored score is
  finished (``judges_needed``), and the shared calls it reads without linking them in its own records
  (``shared_calls``, for cost attribution);
* the inputs it refuses before anything is written (``check_inputs``) and the essays its paper evaluates it on
  when not every scored essay (``evaluated_on``: MTS[template=FILE]'s authors' sample).

Protocols are found by name through :func:`madrag.protocols.registry.register_protocol` (see there).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from madrag.agents.calls import CallContext
from madrag.data.essay import Essay
from madrag.protocols.scores import TraitScore, judge_scores
from madrag.records import AgentRecord
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings

__all__ = ["Population", "RecordReader", "ScoringProtocol", "TraitScore", "essay_width"]


@dataclass(frozen=True)
class Population:
    """The essays of a run that a protocol's paper computes its agreement on, when not every scored essay: their
    ids, a line saying what they are and a short tag (the evaluation shows the QWK on them, every essay's beside
    it)."""

    ids: frozenset[str]
    label: str
    tag: str
    """A few words naming the population beside the protocol's name in a table ("the MTS authors' sample")."""


class RecordReader(Protocol):
    """Where stored records are read from: a run store, or anything that serves its records the same way."""

    def records(self, protocol: str | None = None, role: str | None = None) -> Iterator[AgentRecord]:
        """The stored records, optionally those of one protocol field and/or role."""
        ...


class ScoringProtocol(ABC):
    """Given an essay, its rubric and a call context (provider, store, bank), score every trait.

    A subclass sets ``name`` (the configured name: ``MADRAG``, ``MADRAG[both_r1]``, ``ConsensusMAD[rounds=2]``)
    and implements :meth:`describe` and :meth:`score_essay`; every other member has the default of a protocol
    that stores one Judge record per score (role ``judge``, under its own name) and shares nothing.
    """

    name: str

    @property
    def uses_bank(self) -> bool:
        """Whether the protocol needs an exemplar bank in its call context (default: no)."""
        return False

    @property
    def per_trait(self) -> bool:
        """Whether it scores trait by trait (True, the default) or every trait of an essay in one go."""
        return True

    @property
    def templates(self) -> tuple[str, ...]:
        """Prompt templates it renders beyond the MADRAG paper's (:data:`madrag.agents.prompts.PROMPT_NAMES`, which
        every run records): a run records their sources and texts, and refuses to resume when they change."""
        return ()

    @property
    def scored_over_run(self) -> bool:
        """Whether a final score depends on the run's other essays (MTS's min-max, CJ's Bradley-Terry fit): then
        :meth:`score_essay` returns provisional scores and the final ones are :meth:`read_scores`' over the
        run's stored records (default: no)."""
        return False

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it (a resumed run must match)."""

    @abstractmethod
    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        """One TraitScore per rubric trait of ``essay`` (None where no usable score was read)."""

    def chains(self, traits: Sequence[str]) -> set[str]:
        """The call chains one essay keeps going with this protocol (its width: a runner keeps enough in flight
        to fill the backend's slots). Protocols naming the same chain share it (MAD and MADRAG wait on one
        debate), so it is counted once. Default: one per trait, or one for the essay."""
        return {f"{self.name}|{t}" for t in traits} if self.per_trait else {f"{self.name}|*"}

    def record_groups(self) -> frozenset[str]:
        """The protocol fields of the records its final scores are read from (default: its name)."""
        return frozenset({self.name})

    def read_scores(self, reader: RecordReader, rubric: Rubric) -> list[TraitScore]:
        """Its final scores from a run's stored records, exactly as :meth:`score_essay` returned them (an
        essay-trait whose records are missing or failed has none). Default: its Judge records
        (:func:`madrag.protocols.scores.judge_scores`)."""
        return judge_scores(reader.records(protocol=self.name, role="judge"), rubric)

    def judges_needed(self, settings: ScoringSettings) -> int:
        """Judges a finished stored trait score combines (``TraitScore.n_judges``); fewer: still to score."""
        return 1

    def check_inputs(self, rubric: Rubric, essays: Sequence[Essay]) -> None:
        """Refuse (a :class:`madrag.errors.MadragError`) a new run's rubric or essays it cannot score, before
        anything is written; default: nothing to refuse."""
        return None

    def evaluated_on(self, essays: Sequence[Essay], rubric: Rubric) -> Population | None:
        """The essays of ``essays`` its paper's agreement is computed on, when not all of them; None (the
        default): every essay."""
        return None

    def shared_calls(self) -> Mapping[str, frozenset[str]]:
        """Shared call groups (protocol field -> roles) its scores read without linking them in its own
        records (StrictJudge reads the shared round-0 Strict call); default none."""
        return {}


def essay_width(protocols: Iterable[ScoringProtocol], traits: Sequence[str]) -> int:
    """Concurrent call chains of one essay under ``protocols``: their chains, each shared one counted once."""
    return max(1, len(set().union(*(p.chains(traits) for p in protocols))))
