"""Adaptive debate (``adaptive_debate=t``): MAD and MADRAG debate only the traits where the debate-free Judge is
uncertain.

A deliberate difference from the MADRAG paper, which debates every trait. The debate-free Judge of the same exemplars
(MA's Judge for MAD, MARAG's for MADRAG: the same call, shared with those protocols when they are in the run)
scores the trait first. When its score distribution's top probability is at least ``t``, its score is the
protocol's score (its score row names the screening Judge's record); the debate and the debated Judge are not
called. Otherwise (below ``t``, or no distribution: a text-read score, an unusable one) the debate runs as usual and
its Judge's record carries the decision (``context["adaptive"]``). :func:`adaptive_summary` counts, from a run's
records and score rows, the traits screened, those debated and the calls not made.
"""

from __future__ import annotations

from typing import Any

from madrag.protocols.base import TraitScore
from madrag.protocols.debate import debate_calls
from madrag.protocols.registry import REGISTRY
from madrag.records import called_by
from madrag.store import RunStore


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


def keep_screen(protocol: str, screen: TraitScore) -> TraitScore:
    """The confident screening Judge's score (its first Judge's) as ``protocol``'s, from the screening record."""
    assert screen.result is not None
    return TraitScore(
        essay_id=screen.essay_id,
        trait=screen.trait,
        protocol=protocol,
        score=screen.result.reported,
        result=screen.result,
        rationale=screen.rationale,
        record_key=screen.record_key,
        n_usable=screen.n_usable,
        truncated=screen.truncated,
    )


def adaptive_summary(store: RunStore) -> dict[str, dict[str, int | float]]:
    """Per protocol with an adaptive debate: essay-traits ``screened``, ``debated`` and ``skipped``, the calls the
    skipped debates did not make (``calls_saved``), the screening calls (``screen_calls``: not extra when the
    run also has the screening protocol), ``net_saved`` (saved minus screening calls) and the ``threshold``. A
    debated trait's decision is its Judge record's; a skipped one is a score row of a debate protocol that names
    another protocol's record (the screening Judge's), under the run's threshold."""
    decisions: dict[tuple[str, str, str], dict[str, Any]] = {}
    for record in store.records(role="judge", answers_only=True):
        decision = record.context.get("adaptive")
        if not record.failed and isinstance(decision, dict):
            decisions[(record.protocol, record.essay_id, record.trait)] = decision
    config = store.get_meta("config")
    threshold = ((config or {}).get("settings") or {}).get("adaptive_debate") if isinstance(config, dict) else None
    variants: dict[str, Any] = {}  # each protocol's debate variant, looked up once
    for score in store.scores() if threshold is not None else []:
        if score.protocol not in variants:
            variants[score.protocol] = getattr(REGISTRY.find(score.protocol), "debate", None)
        variant = variants[score.protocol]
        if variant is not None and score.record_key and not called_by(score.record_key, score.protocol):
            skipped = {"threshold": threshold, "debated": False, "skippable_calls": debate_calls(variant) + 1}
            decisions.setdefault((score.protocol, score.essay_id, score.trait), skipped)
    out: dict[str, dict[str, int | float]] = {}
    for (protocol, _, _), decision in sorted(decisions.items()):
        row = out.setdefault(
            protocol,
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
