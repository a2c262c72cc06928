"""Prompts of the consensus-judging protocols (the consensus paper, "Beyond Consensus", Appendix A), and score
masking (C.2).

Templates (``madrag/prompts/cj_*.txt``, English translations of the Essay prompts):

============================  =======================================================================
``cj_single_system``          A.2 Single Judge (neutral, no role)
``cj_strict_system``          A.3 Strict Judge, Initial
``cj_lenient_system``         A.3 Lenient Judge, Initial
``cj_neutral_system``         A.5 Symmetric MAD Neutral, Initial
``cj_strict_adjust_system``   A.4 Strict Judge, Adjustment
``cj_lenient_adjust_system``  A.4 Lenient Judge, Adjustment
``cj_neutral_adjust_system``  A.5 Symmetric MAD Neutral, Adjustment
``cj_user``                   round 0: essay, rubric, role, output instructions
``cj_adjust_user``            round r >= 1: essay, rubric, role, own previous evaluation, the other's
``cj_own_block``              the agent's own round r-1 rationale and scores
``cj_other_block``            the other agent's round r-1 rationale and scores
``cj_other_masked_block``     the same without scores, numbers masked (Score-Masked MAD, C.2)
============================  =======================================================================

Adaptations. The paper's ``[ESSAY_CRITERIA]`` / ``[ESSAY_RUBRIC]`` become madrag's rubric: every trait as JSON
(name, description, integer range, level descriptions), placed after the essay as in ``sa_user`` - in the
adjustment prompts too, where the paper repeats only the criteria, because madrag's criteria and levels are one
object. "Korean essays" reads "student essays", "content, organization, and expression" reads "every rubric
trait", and the 1-5 anchors of the role principles are stated relative to each trait's own scale with the
paper's 1-5 numbers as an example ("at or below the middle of its scale (on a 1-5 scale: 3 or below)"). The
JSON output of A.1 (per-criterion rationale / adjustment notes, then the scores) becomes a rationale followed by
madrag's ``Scores:`` block, which every backend can produce and the constrained reader can fill in.

The template names are listed once, in :data:`madrag.agents.prompts.CONSENSUS_PROMPT_NAMES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from madrag.agents.calls import CallContext
from madrag.agents.context import role_messages
from madrag.agents.scores import trait_score_line
from madrag.providers.base import Message
from madrag.records import AgentRecord
from madrag.rubric import Rubric

NUM_MASK = "[NUM]"
"""What every number of the other agent's rationale becomes under Score-Masked MAD."""


@dataclass(frozen=True)
class AgentSpec:
    """One judge agent: its record role, its round-0 and adjustment templates, and how the other agent names it."""

    role: str
    initial: str
    adjust: str
    label: str  # "The <label> evaluator's evaluation", as the other agent reads it


SINGLE = AgentSpec("single", "cj_single_system", "cj_single_system", "single")
STRICT = AgentSpec("strict", "cj_strict_system", "cj_strict_adjust_system", "strict")
LENIENT = AgentSpec("lenient", "cj_lenient_system", "cj_lenient_adjust_system", "lenient")
NEUTRAL_A = AgentSpec("neutral_a", "cj_neutral_system", "cj_neutral_adjust_system", "other")
NEUTRAL_B = AgentSpec("neutral_b", "cj_neutral_system", "cj_neutral_adjust_system", "other")
"""The judge agents of the consensus protocols: SINGLE (neutral, alone), STRICT and LENIENT (role judges, paired
in the consensus MADs), NEUTRAL_A and NEUTRAL_B (Symmetric MAD's two neutral agents)."""


def initial_messages(ctx: CallContext, values: dict[str, str], agent: AgentSpec) -> list[Message]:
    """Round 0 (A.2, A.3, A.5 initial prompts): the agent's role, the essay and the rubric."""
    return role_messages(ctx.prompts, ctx.settings.prompt_layout, agent.initial, "cj_user", values)


@dataclass(frozen=True)
class Turn:
    """One agent's answer of the previous round, as an adjustment round shows it."""

    agent: AgentSpec
    record: AgentRecord


def adjust_messages(
    ctx: CallContext, values: dict[str, str], rubric: Rubric, round_: int, own: Turn, other: Turn, masked: bool
) -> list[Message]:
    """Round ``round_`` >= 1 (A.4, A.5 adjustment prompts): the agent's own round r-1 rationale and scores
    (``own``), and the other agent's round r-1 rationale with its scores (``masked``: without them, numbers
    masked, C.2)."""
    prompts = ctx.prompts
    previous = str(round_ - 1)
    own_block = prompts.render(
        "cj_own_block", ROUND=previous, RATIONALE=_rationale(own.record), SCORES=score_lines(own.record, rubric)
    )
    said = _rationale(other.record)
    if masked:
        other_block = prompts.render(
            "cj_other_masked_block", OTHER=other.agent.label, ROUND=previous, RATIONALE=mask_scores(said, rubric)
        )
    else:
        scores = score_lines(other.record, rubric)
        other_block = prompts.render(
            "cj_other_block", OTHER=other.agent.label, ROUND=previous, RATIONALE=said, SCORES=scores
        )
    return role_messages(
        prompts,
        ctx.settings.prompt_layout,
        own.agent.adjust,
        "cj_adjust_user",
        {**values, "OWN_PREVIOUS": own_block, "OTHER_PREVIOUS": other_block},
    )


def _rationale(record: AgentRecord) -> str:
    """An agent's rationale as the next round shows it (a placeholder when it gave none)."""
    return (record.rationale or "").strip() or "(no rationale given)"


def score_lines(record: AgentRecord, rubric: Rubric) -> str:
    """``<Trait>: N`` for each trait, ``(no usable score)`` where the agent's score was unusable."""
    results = record.trait_scores or {}
    reported = {name: r.reported for name, r in results.items() if r.reported is not None}
    return "\n".join(f"{t.name}: {reported.get(t.name, '(no usable score)')}" for t in rubric.traits)


_NUMBER = re.compile(r"(?<![\w@])\d+(?:[.,]\d+)*")
_SCORES_HEADER = re.compile(r"^\W*(?:final\s+)?scores?\W*$", re.IGNORECASE)


def mask_scores(text: str, rubric: Rubric) -> str:
    """The other agent's rationale as Score-Masked MAD shares it (the consensus paper's C.2).

    1. Lines that only state a score are dropped: a ``Scores:`` header (also ``Final scores``), and a line that
       is a trait name followed by ``:``, ``=`` or ``-`` and a number, optionally ``/ M``, ``out of M`` or
       ``points`` (``Ideas: 2``, ``**Style** - 3/4``).
    2. Every remaining numeric token (a run of digits, with ``.`` or ``,`` groups: ``3``, ``2.5``, ``1,000``)
       not glued to a preceding letter, digit, ``_`` or ``@`` becomes ``[NUM]``, so ``Ideas: 2 because ...``
       reads ``Ideas: [NUM] because ...`` and ``2/3`` reads ``[NUM]/[NUM]``. Anonymization placeholders such as
       ``@NUM1`` or ``@CAPS2`` stay as they are. Numbers written as words are not masked (the paper masks
       numeric tokens).
    """
    patterns = [trait_score_line(t.name, whole_line=True) for t in rubric.traits]
    kept = [
        line
        for line in text.splitlines()
        if not _SCORES_HEADER.match(line) and not any(p.match(line) for p in patterns)
    ]
    masked = _NUMBER.sub(NUM_MASK, "\n".join(kept)).strip()
    return masked or "(no rationale given)"
