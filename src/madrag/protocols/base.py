"""The one interface every scoring method implements, so an ablation is a list of protocol names."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from madrag.agents.calls import CallContext
from madrag.data.essay import Essay
from madrag.records import ScoreResult
from madrag.rubric import Rubric


class TraitScore(BaseModel):
    """A protocol's final score for one essay and trait, with the record it came from."""

    essay_id: str
    trait: str
    protocol: str
    score: int | None
    result: ScoreResult | None = None
    rationale: str = ""
    record_key: str = ""
    n_judges: int = 1
    n_usable: int | None = None  # judges whose score could be read (None: not counted, e.g. consensus agents)
    mean_score: float | None = None  # set when several judges are averaged
    truncated: bool = False  # a Judge answer behind this score was cut by the token limit


@runtime_checkable
class ScoringProtocol(Protocol):
    """Given an essay, its rubric and a call context (provider, store, bank), score every trait."""

    @property
    def name(self) -> str:
        """The configured name (``MADRAG``, ``MADRAG[both_r1]``, ``ConsensusMAD[rounds=2]``)."""
        ...

    @property
    def uses_bank(self) -> bool:
        """Whether the protocol needs an exemplar bank in its call context."""
        ...

    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it (a resumed run must match)."""
        ...

    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        """One TraitScore per rubric trait of ``essay`` (None where no usable score was read)."""
        ...
