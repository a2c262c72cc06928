"""The final record of a protocol whose score is computed from other calls (GEval, CJ, MTS).

Such a protocol makes its LLM calls under its own roles (``rater``, ``compare``, ``mts``), then stores one
*derived* record under the Judge's key (role ``judge``, round 1, index 0) carrying the computed
:class:`~madrag.records.ScoreResult`: the run's readers of final scores (``madrag eval``, the report, the web
app, a resume's plan) read it like any Judge record. It sends no request (``answers=0``, no usage); its
``context["from"]`` names the calls it was computed from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from madrag.agents.calls import AgentCall, CallContext, new_record
from madrag.protocols.base import TraitScore
from madrag.records import AgentRecord, ScoreResult
from madrag.rubric import Trait


def derived_result(value: int | None, problem: str | None = None) -> ScoreResult:
    """A computed score as a ScoreResult: ``value`` reported, or missing (mode ``failed``) with ``problem``."""
    if value is None:
        return ScoreResult(mode="failed", invalid_raw=problem)
    return ScoreResult(parsed=value, reported=value, mode="parsed_text")


@dataclass(frozen=True)
class Derived:
    """Whose derived Judge record it is: the protocol that computed it, the essay and the trait."""

    protocol: str
    essay_id: str
    trait: Trait
    role: str = "judge"  # another role: a record that a protocol's calls are done, no score (CJ's ``compared``)


async def store_derived(
    ctx: CallContext,
    of: Derived,
    score: ScoreResult | None,
    rationale: str,
    context: dict[str, Any],
    sources: list[AgentRecord],
    count_missing: bool = False,
) -> TraitScore:
    """Store (or find already stored) the derived Judge record ``of`` one protocol, essay and trait (or, with
    ``of.role`` another role and ``score`` None, the record that its calls are done); its TraitScore.
    ``count_missing``: a missing score counts as an unusable score in the run's statistics (when its sources'
    own unusable answers were not counted already)."""
    call = AgentCall(
        protocol=of.protocol,
        essay_id=of.essay_id,
        trait=of.trait.name,
        role=of.role,
        messages=[],
        temperature=0.0,
        max_tokens=0,
        context={**context, "derived": True, "from": [r.key for r in sources]},
    )
    record = ctx.store.get(call.key)
    if record is None:
        record = new_record(
            ctx,
            call,
            text=rationale,
            rationale=rationale,
            score=score,
            answers=0,
            attempts=0,
            evidence=None,
            truncated=any(r.truncated for r in sources),
            error=None if score is None or score.reported is not None else f"unusable score: {score.invalid_raw}",
        )
        await ctx.store.aput(record)
        if count_missing and (score is None or score.reported is None):
            ctx.stats.failed_scores += 1
        if ctx.on_record is not None:
            ctx.on_record(record)
    return trait_score_of(record, of.trait)


def trait_score_of(record: AgentRecord, trait: Trait) -> TraitScore:
    """The TraitScore a derived record gives (its ``n_usable``: the usable source calls, when recorded)."""
    usable = record.context.get("n_usable")
    return TraitScore(
        essay_id=record.essay_id,
        trait=trait.name,
        protocol=record.protocol,
        score=record.score.reported if record.score is not None else None,
        result=record.score,
        rationale=record.rationale or "",
        record_key=record.key,
        n_usable=int(usable) if isinstance(usable, int) else None,
        truncated=record.truncated,
    )
