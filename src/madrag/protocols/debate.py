"""Advocate / Skeptic debate transcripts (the MADRAG paper's 3.4, Algorithm 1; transcript variants of Appendix C.1).

Variants (what the Judge is fed), as the MADRAG paper's C.1 reads them ("advocate-first" vs "skeptic-first" exchanges,
"concatenating both full threads"):

* ``adv_r1`` (MADRAG default): Advocate opens on strengths; the Skeptic reads it and rebuts on weaknesses.
  Judge sees [Advocate 1, Skeptic 1].
* ``adv_r2``: the same exchange for two rounds; each turn reads everything before it.
  Judge sees [Advocate 1, Skeptic 1, Advocate 2, Skeptic 2].
* ``skp_r1`` / ``skp_r2``: the Skeptic-first exchange: the Skeptic opens on weaknesses, the Advocate reads it
  and answers on strengths (1 or 2 rounds). Judge sees [Skeptic 1, Advocate 1, ...].
* ``both_r1`` / ``both_r2``: both full threads concatenated: the advocate-first exchange, then the
  skeptic-first exchange (neither thread reads the other). Judge sees [Advocate 1, Skeptic 1, ...] then
  [Skeptic 1, Advocate 1, ...].

Further variants (not in the paper's reading; kept because they isolate one side's framing):

* ``skponly_r1`` / ``skponly_r2``: the Skeptic alone, 1 or 2 turns (the second reads the first) - the
  "Skeptic-only" of the caption of the MADRAG paper's Tables 7-8. Judge sees only the Skeptic's turns.
* ``split_r1`` / ``split_r2``: two independent one-sided threads, the Advocate's and the Skeptic's, each of 1 or
  2 turns; the Judge sees the Advocate thread, then the Skeptic thread.

A debater reads the turns before it without their confidences (the MADRAG paper Algorithm 1: Skeptic(x, a)); only the
Judge is shown them.

Debate calls are keyed by variant, not by protocol, so MAD and MADRAG share one debate per essay-trait.
"""

from __future__ import annotations

from typing import Literal, get_args

from madrag.agents.calls import AgentCall, CallContext, debater
from madrag.agents.context import Turn, render_debate, role_messages
from madrag.records import AgentRecord
from madrag.rubric import Trait

Variant = Literal[
    "adv_r1", "adv_r2", "both_r1", "both_r2", "skp_r1", "skp_r2", "skponly_r1", "skponly_r2", "split_r1", "split_r2"
]
"""A transcript variant (see above)."""
VARIANTS: tuple[Variant, ...] = get_args(Variant)
"""Every transcript variant, in the order they are offered."""
SPEAKER = {"advocate": "Advocate", "skeptic": "Skeptic"}
"""How a debater's role is named in a transcript."""


def _exchange(first: str, second: str, rounds: int) -> list[tuple[str, int]]:
    """One thread where ``first`` and ``second`` alternate, ``rounds`` times each."""
    return [(role, r) for r in range(1, rounds + 1) for role in (first, second)]


def _plan(variant: Variant) -> list[list[tuple[str, int]]]:
    """Threads of (role, round); a turn reads the turns before it in its own thread."""
    rounds = int(variant[-1])
    kind = variant.split("_")[0]
    if kind == "adv":
        return [_exchange("advocate", "skeptic", rounds)]
    if kind == "skp":
        return [_exchange("skeptic", "advocate", rounds)]
    if kind == "both":
        return [_exchange("advocate", "skeptic", rounds), _exchange("skeptic", "advocate", rounds)]
    if kind == "split":
        return [
            [("advocate", r) for r in range(1, rounds + 1)],
            [("skeptic", r) for r in range(1, rounds + 1)],
        ]
    return [[("skeptic", r) for r in range(1, rounds + 1)]]


def debate_calls(variant: Variant) -> int:
    """The debater calls of one essay-trait's debate in ``variant`` (the Judge's call not counted)."""
    return sum(len(thread) for thread in _plan(variant))


def turn_of(record: AgentRecord) -> Turn:
    """A debater's record as a transcript turn."""
    return Turn(speaker=SPEAKER[record.role], round=record.round, message=record.text, confidence=record.confidence)


async def run_debate(
    ctx: CallContext, essay_id: str, trait: Trait, values: dict[str, str], variant: Variant
) -> list[AgentRecord]:
    """Run (or find in the store) every debate turn of ``variant``; records in the order the Judge reads."""
    records: list[AgentRecord] = []
    for t_index, thread in enumerate(_plan(variant)):
        seen: list[Turn] = []
        for role, round_ in thread:
            messages = role_messages(
                ctx.prompts,
                ctx.settings.prompt_layout,
                f"{role}_system",
                f"{role}_user",
                {**values, "DEBATE_SO_FAR": render_debate(ctx.prompts, seen, confidences=False)},
            )
            call = AgentCall(
                protocol=f"debate/{variant}",
                essay_id=essay_id,
                trait=trait.name,
                role=role,
                round=round_,
                index=t_index,
                messages=messages,
                temperature=ctx.settings.debater_temperature,
                max_tokens=ctx.settings.debater_max_tokens,
                context={"variant": variant, "reads": [f"{x.speaker} {x.round}" for x in seen]},
                essay=values["ESSAY"],
            )
            record = await debater(ctx, call)
            seen.append(turn_of(record))
            records.append(record)
    return records
