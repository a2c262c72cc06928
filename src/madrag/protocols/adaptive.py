"""Adaptive debate (``adaptive_debate=t``): MAD and MADRAG debate only the traits where the debate-free Judge is
uncertain.

A deliberate difference from the MADRAG paper, which debates every trait. The debate-free Judge of the same exemplars
(MA's Judge for MAD, MARAG's for MADRAG: the same call, shared with those protocols when they are in the run)
scores the trait first. When its score distribution's top probability is at least ``t``, its score is the
protocol's score, stored as a derived Judge record (no request; :mod:`madrag.protocols.derived`) whose
``context["adaptive"]`` says so; the debate and the debated Judge are not called. Otherwise (below ``t``, or no
distribution: a text-read score, an unusable one) the debate runs as usual and its Judge's record carries the
same ``context["adaptive"]``. :func:`adaptive_summary` counts, from a run's records, the traits screened, those
debated and the calls not made.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from madrag.agents.calls import CallContext
from madrag.protocols.base import TraitScore
from madrag.protocols.derived import Derived, store_derived
from madrag.records import AgentRecord
from madrag.rubric import Trait


def top_probability(score: TraitScore) -> float | None:
    """The largest probability of the Judge's score distribution (None: it gave none)."""
    dist = score.result.distribution if score.result is not None else None
    return max(dist.values()) if dist else None


def decide(screen: TraitScore, threshold: float, screen_protocol: str, skippable_calls: int) -> dict[str, Any]:
    """The adaptive decision as recorded: the threshold, the screening Judge's protocol, record and top
    probability, whether the trait is debated and the calls a skipped debate does not make (debaters + Judge)."""
    top = top_probability(screen)
    return {
        "threshold": threshold,
        "screen_protocol": screen_protocol,
        "screen": screen.record_key,
        "top_probability": top,
        "debated": top is None or screen.score is None or top < threshold,
        "skippable_calls": skippable_calls,
    }


async def keep_screen(
    ctx: CallContext, protocol: str, trait: Trait, screen: TraitScore, decision: dict[str, Any]
) -> TraitScore:
    """The confident screening Judge's score as ``protocol``'s, stored as a derived Judge record."""
    assert screen.result is not None
    source = ctx.store.get(screen.record_key)
    context: dict[str, Any] = {"adaptive": decision, "n_usable": screen.n_usable}
    of = Derived(protocol, screen.essay_id, trait)
    return await store_derived(ctx, of, screen.result, screen.rationale, context, [source] if source else [])


def adaptive_summary(records: Iterable[AgentRecord]) -> dict[str, dict[str, int | float]]:
    """Per protocol with an adaptive debate: essay-traits ``screened``, ``debated`` and ``skipped``, the calls the
    skipped debates did not make (``calls_saved``), the screening calls (``screen_calls``: not extra when the
    run also has the screening protocol), ``net_saved`` (saved minus screening calls) and the ``threshold``."""
    out: dict[str, dict[str, int | float]] = {}
    for record in records:
        decision = record.context.get("adaptive")
        if record.role != "judge" or record.failed or not isinstance(decision, dict):
            continue
        row = out.setdefault(
            record.protocol,
            {"screened": 0, "debated": 0, "skipped": 0, "calls_saved": 0, "threshold": decision["threshold"]},
        )
        row["screened"] += 1
        if decision["debated"]:
            row["debated"] += 1
        else:
            row["skipped"] += 1
            row["calls_saved"] += int(decision["skippable_calls"])
    for row in out.values():
        row["screen_calls"] = row["screened"]
        row["net_saved"] = row["calls_saved"] - row["screened"]
    return out
