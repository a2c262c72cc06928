"""Single-agent protocols: one Judge call scores every trait at once (the MADRAG paper's Appendix D).

* ``SA``: the rubric (all traits) and the essay; no decomposition, no debate, no exemplars.
* ``SARAG``: SA plus retrieved exemplars "spanning the score range" (the MADRAG paper D). With all traits in one call,
  one exemplar per score level *per trait* would be traits x levels essays; by default (``sarag_exemplars=
  "span"``) SARAG takes one exemplar per score level of the rubric's first trait (the nearest pool essay with
  that score, the MADRAG paper's second procedure), each shown with all its human trait scores. The option
  ``sarag_exemplars="similar"`` uses the first procedure instead: the k most similar pool essays (k = the
  number of score levels of the first trait), whatever their scores.

The score is read by :func:`madrag.agents.judge.judge_all_traits`, which mirrors the per-trait Judge: with
prefill + choices (embedded model) the rationale is generated up to ``Scores:``, then each trait's score token
is restricted to that trait's valid scores, one trait after the other, each with its distribution; otherwise
each ``<Trait>: N`` line is parsed from the text, with one follow-up request for the traits still missing. A
trait never read is recorded as failed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from madrag.agents.calls import AgentCall, CallContext
from madrag.agents.context import ExemplarSource, all_traits_values, render_similar_exemplars, role_messages
from madrag.agents.judge import judge_all_traits
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.protocols.base import ProtocolNeeds, ScoringProtocol
from madrag.protocols.registry import register_protocol
from madrag.protocols.scores import ALL_TRAITS, TraitScore, expand_trait_scores
from madrag.rubric import Rubric
from madrag.settings import SaragExemplars

if TYPE_CHECKING:
    from madrag.retrieval.bank import Exemplar


def sarag_exemplars(bank: ExemplarSource, essay: Essay, rubric: Rubric, choice: SaragExemplars) -> list[Exemplar]:
    """SARAG's exemplars: ``span`` - the nearest pool essay at each score level of the rubric's first trait
    (levels without one are left out); ``similar`` - the k nearest pool essays, k = that trait's levels."""
    first = rubric.traits[0]
    if choice == "similar":
        return bank.similar(essay, len(first.scores))
    return [lvl.exemplar for lvl in bank.per_level(essay, first) if lvl.exemplar is not None]


@dataclass(frozen=True)
class WholeEssayProtocol(ScoringProtocol):
    """SA or SARAG: one Judge call scores every trait of the rubric, with or without similar exemplars."""

    name: str
    exemplars: bool

    @property
    def needs(self) -> ProtocolNeeds:
        """An exemplar bank for SARAG; one call scores every trait."""
        return ProtocolNeeds(bank=self.exemplars, per_trait=False)

    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it."""
        return {"name": self.name, "debate": None, "exemplars": self.exemplars, "per_trait": False}

    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        """Score every trait of ``essay`` in one Judge call."""
        call = await self._call(ctx, essay, rubric)
        record = await judge_all_traits(ctx, call, rubric)
        return expand_trait_scores(record, rubric)

    async def _call(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> AgentCall:
        settings = ctx.settings
        exemplar_text, context = "", {}
        if self.exemplars:
            if ctx.bank is None:
                raise ConfigError(f"protocol {self.name} needs an exemplar bank")
            found = await asyncio.to_thread(sarag_exemplars, ctx.bank, essay, rubric, settings.sarag_exemplars)
            exemplar_text = render_similar_exemplars(ctx.prompts, found, settings.exemplar_max_words)
            context["exemplars"] = [ex.model_dump(mode="json") for ex in found]
        values = {
            **all_traits_values(ctx.prompts, essay, rubric, settings.placeholders),
            "EXEMPLAR_HINT": " and the scored example essays" if self.exemplars else "",
            "EXEMPLARS": exemplar_text,
        }
        return AgentCall(
            protocol=self.name,
            essay_id=essay.id,
            trait=ALL_TRAITS,
            role="judge",
            messages=role_messages(ctx.prompts, settings.prompt_layout, "sa_system", "sa_user", values),
            temperature=settings.judge_temperature,
            max_tokens=settings.judge_max_tokens,
            context=context,
            essay=values["ESSAY"],
        )


@register_protocol("SA", "SARAG")
def whole_essay(name: str) -> WholeEssayProtocol:
    """SA (no exemplars) or SARAG (similar exemplars)."""
    return WholeEssayProtocol(name, exemplars=name == "SARAG")


__all__ = ["WholeEssayProtocol", "expand_trait_scores", "sarag_exemplars", "whole_essay"]
