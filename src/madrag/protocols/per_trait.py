"""The common case of a protocol: it scores an essay trait by trait, the traits concurrently
(:class:`TraitProtocol`), often with one model call per trait on MA's prompt whose read score is the trait's
score (:func:`ask_for_score`). A plugin protocol of that kind is a class with a ``name``, ``describe`` and a
``score_trait`` of one line (``tests/e2e/protocols/toy_protocol.py``)."""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from madrag.agents.calls import AgentCall, CallContext, answer_fields, build_request, finish_record, new_record, once
from madrag.agents.context import essay_values, role_messages
from madrag.agents.judge import judge_trait
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.protocols.base import ScoringProtocol
from madrag.protocols.concurrency import gather_settled
from madrag.protocols.scores import TraitScore, combine_judges
from madrag.records import AgentRecord
from madrag.rubric import Rubric, Trait

__all__ = ["NO_BLOCKS", "TraitProtocol", "ask_for_score", "read_answer", "trait_call"]

NO_BLOCKS = {"EXEMPLAR_HINT": "", "EXEMPLARS": "", "DEBATE": "", "EVIDENCE_FEEDBACK": "", "VERIFY_NOTE": ""}
"""The Judge prompt's optional blocks, empty: MA's prompt without exemplars, debate or notes."""


class TraitProtocol(ScoringProtocol):
    """A protocol that scores each trait on its own (:meth:`score_trait`), the traits concurrently."""

    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        """Score every trait of ``essay``, the traits concurrently; a trait with a call that failed after its
        retries (recorded as failed, retried on resume) is left out and the other traits are still scored."""
        if self.needs.bank and ctx.bank is None:
            raise ConfigError(f"protocol {self.name} needs an exemplar bank")
        label = rubric.source_label
        scores = await gather_settled(*(self.score_trait(ctx, essay, t, label) for t in rubric.traits))
        return [s for s in scores if s is not None]

    @abstractmethod
    async def score_trait(self, ctx: CallContext, essay: Essay, trait: Trait, source_label: str | None) -> TraitScore:
        """The score of one trait (``source_label``: the rubric's name for the essay's source text, if any)."""


def trait_call(
    ctx: CallContext,
    protocol: str,
    essay: Essay,
    trait: Trait,
    source_label: str | None = None,
    role: str = "judge",
    values: Mapping[str, str] | None = None,
) -> AgentCall:
    """One call scoring ``trait`` of ``essay`` with MA's prompt (``rater_system``, ``judge_user``; ``values``
    fill or replace its template values), under ``protocol`` and ``role``, at the Judge's temperature and token
    limit."""
    filled = essay_values(
        ctx.prompts, essay, trait, ctx.settings.placeholders, ctx.self_report_confidence, source_label
    )
    filled.update({**NO_BLOCKS, **(values or {})})
    return AgentCall(
        protocol=protocol,
        essay_id=essay.id,
        trait=trait.name,
        role=role,
        messages=role_messages(ctx.prompts, ctx.settings.prompt_layout, "rater_system", "judge_user", filled),
        temperature=ctx.settings.judge_temperature,
        max_tokens=ctx.settings.judge_max_tokens,
        essay=filled["ESSAY"],
    )


async def ask_for_score(
    ctx: CallContext, protocol: str, essay: Essay, trait: Trait, source_label: str | None = None
) -> TraitScore:
    """Ask for ``trait``'s score of ``essay`` in one Judge call (:func:`trait_call`), stored the moment it is
    answered (and answered by the store on resume); the trait's score is the call's read score."""
    record = await judge_trait(ctx, trait_call(ctx, protocol, essay, trait, source_label), trait)
    return combine_judges(protocol, trait, [record])


async def read_answer(
    ctx: CallContext, call: AgentCall, read: Callable[[str], tuple[dict[str, Any], str | None]], **fields: Any
) -> AgentRecord:
    """The record of a call whose answer a protocol reads itself (from the store, or made now): ``read`` gives
    what it found, kept in the record's context, and the error that makes it an unusable score (None when read);
    ``fields``: the record's other fields."""

    async def make() -> AgentRecord:
        request = build_request(ctx, call)
        started = time.monotonic()
        response = await ctx.provider.complete(request)
        found, error = read(response.text)
        if error is not None:
            ctx.stats.failed_scores += 1
        answered = replace(call, context={**call.context, **found})
        record = new_record(ctx, answered, **answer_fields(request, response, started), error=error, **fields)
        return await finish_record(ctx, record)

    return await once(ctx, call, make)
