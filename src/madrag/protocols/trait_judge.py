"""Per-trait protocols: one Judge per trait, with or without a debate, with or without exemplars.

=========  ==========  =========  ==========================================================
name       debate      exemplars  the MADRAG paper
=========  ==========  =========  ==========================================================
MA         none        no         one independent judge per trait (n judges averaged: option)
MAD        adv_r1      no         Advocate -> Skeptic, Judge reads the transcript
MARAG      none        yes        Judge gets one exemplar per score level, no transcript
MADRAG     adv_r1      yes        the full method (Algorithm 1)
=========  ==========  =========  ==========================================================

``MADRAG[both_r1]`` etc. run MADRAG with another transcript variant (Appendix C.1).
Only the Judge sees exemplars (A.7, RAG isolation across roles). Two cost options differ from the paper:
``judge_exemplars=anchors`` shows one fixed exemplar per level before the essay (:mod:`madrag.retrieval.anchors`)
and ``adaptive_debate=t`` debates only the traits whose debate-free Judge is unsure (:mod:`madrag.protocols.adaptive`).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from madrag.agents.calls import AgentCall, CallContext
from madrag.agents.context import (
    essay_values,
    render_debate,
    render_evidence_feedback,
    render_exemplars,
    role_messages,
)
from madrag.agents.judge import judge_trait
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.protocols import adaptive
from madrag.protocols.base import ProtocolNeeds, judges_needed
from madrag.protocols.concurrency import gather_or_cancel
from madrag.protocols.debate import VARIANTS, Variant, debate_calls, run_debate, turn_of
from madrag.protocols.per_trait import TraitProtocol
from madrag.protocols.registry import register_protocol
from madrag.protocols.scores import TraitScore, combine_judges
from madrag.providers.base import Message
from madrag.retrieval.anchors import AnchorSource
from madrag.rubric import Trait

if TYPE_CHECKING:
    from madrag.retrieval.bank import LevelExemplar

_VARIANT = re.compile(r"^(MADRAG|MAD)\[(\w+)\]$")


@dataclass(frozen=True)
class TraitJudgeProtocol(TraitProtocol):
    """One Judge per trait (MA, MAD, MARAG, MADRAG and their variants), as in the table above."""

    name: str
    debate: Variant | None
    exemplars: bool

    @property
    def needs(self) -> ProtocolNeeds:
        """An exemplar bank for MARAG and MADRAG; a debate's chains are the debate's, shared by every protocol of
        its variant; MA's ``judges_per_trait`` independent judges (no debate, no exemplars)."""
        return ProtocolNeeds(
            bank=self.exemplars,
            chain=None if self.debate is None else f"debate/{self.debate}",
            several_judges=self.debate is None and not self.exemplars,
        )

    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it."""
        return {"name": self.name, "debate": self.debate, "exemplars": self.exemplars, "per_trait": True}

    async def score_trait(
        self, ctx: CallContext, essay: Essay, trait: Trait, source_label: str | None = None
    ) -> TraitScore:
        """Score one trait: exemplars and debate as the protocol says, then its Judge(s) (``source_label``: the
        rubric's name for the essay's source text, if it has one). Under an adaptive debate the debate-free
        Judge scores first and the debate runs only when its score is uncertain (:mod:`madrag.protocols.adaptive`)."""
        threshold = ctx.settings.adaptive_debate
        if self.debate is None or threshold is None:
            return await self._judged(ctx, essay, trait, source_label)
        screen = await self.screen.score_trait(ctx, essay, trait, source_label)
        decision = adaptive.decide(screen, threshold, self.screen.name, debate_calls(self.debate) + 1)
        if not decision["debated"]:
            return adaptive.keep_screen(self.name, screen)
        return await self._judged(ctx, essay, trait, source_label, {"adaptive": decision})

    @property
    def screen(self) -> TraitJudgeProtocol:
        """The debate-free protocol of the same exemplars (MA for MAD, MARAG for MADRAG): an adaptive debate's
        first Judge."""
        return TraitJudgeProtocol("MARAG" if self.exemplars else "MA", debate=None, exemplars=self.exemplars)

    async def _judged(
        self,
        ctx: CallContext,
        essay: Essay,
        trait: Trait,
        source_label: str | None,
        extra: dict[str, Any] | None = None,
    ) -> TraitScore:
        """Exemplars and debate as the protocol says, then its Judge(s); ``extra`` joins the Judge's context."""
        values = essay_values(
            ctx.prompts, essay, trait, ctx.settings.placeholders, ctx.self_report_confidence, source_label
        )
        context: dict[str, Any] = dict(extra or {})
        blocks = await self._blocks(ctx, essay, trait, values, context)
        anchors = self.exemplars and ctx.settings.judge_exemplars == "anchors"
        lead, blocks = (blocks["EXEMPLARS"], {**blocks, "EXEMPLARS": ""}) if anchors else ("", blocks)
        messages = role_messages(
            ctx.prompts,
            ctx.settings.prompt_layout,
            "judge_system" if self.debate is not None else "rater_system",
            "judge_user",
            {**values, **blocks},
        )
        if anchors:  # before the essay: every essay's Judge call of this trait starts with the same text
            messages = lead_with(messages, lead)
        n = judges_needed(self, ctx.settings)
        if n > 1:  # the usable-judge policy goes into every judge's record, so a stored run is read the same way
            context["judges"] = {"n": n, "min_usable": ctx.settings.usable_judges_needed}
        calls = [
            AgentCall(
                protocol=self.name,
                essay_id=essay.id,
                trait=trait.name,
                role="judge",
                index=i,
                messages=messages,
                # several independent judges need sampling to differ: a higher temperature and a seed each
                temperature=ctx.settings.judge_temperature if n == 1 else ctx.settings.debater_temperature,
                max_tokens=ctx.settings.judge_max_tokens,
                context=context,
                seed=judge_seed(ctx.settings.seed, i),
                essay=values["ESSAY"],
            )
            for i in range(n)
        ]
        records = await gather_or_cancel(*(judge_trait(ctx, call, trait) for call in calls))
        return combine_judges(self.name, trait, list(records))

    async def _blocks(
        self, ctx: CallContext, essay: Essay, trait: Trait, values: dict[str, str], context: dict[str, Any]
    ) -> dict[str, str]:
        """The Judge prompt's exemplar, debate, evidence-feedback and verify blocks (retrieving the exemplars and
        running the debate as the protocol says); what the Judge's record keeps of them goes into ``context``."""
        exemplar_text = debate_text = feedback = ""
        if self.exemplars:
            assert ctx.bank is not None
            levels = await asyncio.to_thread(judge_levels, ctx, essay, trait)
            exemplar_text = render_exemplars(ctx.prompts, trait, levels, ctx.settings.exemplar_max_words)
            context["exemplars"] = [lvl.model_dump(mode="json") for lvl in levels]
        if self.debate is not None:
            records = await run_debate(ctx, essay.id, trait, values, self.debate)
            debate_text = render_debate(ctx.prompts, [turn_of(r) for r in records])
            context["debate"] = [r.key for r in records]
            context["confidences"] = {f"{r.role}{r.round}": r.confidence for r in records}
            if ctx.settings.evidence_check == "feedback":
                feedback = render_evidence_feedback(ctx.prompts, records)
        return {
            "EXEMPLAR_HINT": " and with the scored example essays" if self.exemplars else "",
            "EXEMPLARS": exemplar_text,
            "DEBATE": debate_text,
            "EVIDENCE_FEEDBACK": feedback,
            "VERIFY_NOTE": ctx.prompts.render("verify_note").strip() + " " if ctx.settings.verify_claims else "",
        }


def judge_levels(ctx: CallContext, essay: Essay, trait: Trait) -> list[LevelExemplar]:
    """The Judge's exemplars: the MADRAG paper's procedure 2 (the nearest pool essay per score level), or the run's
    anchors (one fixed pool essay per level, :mod:`madrag.retrieval.anchors`) under ``judge_exemplars=anchors``."""
    bank = ctx.bank
    assert bank is not None
    if ctx.settings.judge_exemplars == "nearest":
        return bank.per_level(essay, trait)
    if not isinstance(bank, AnchorSource):
        raise ConfigError("--judge-exemplars anchors needs an exemplar bank that chooses anchors")
    return bank.anchors(essay, trait)


def lead_with(messages: list[Message], block: str) -> list[Message]:
    """``messages`` with ``block`` (the anchors' exemplar block) opening the user message, before the essay."""
    *head, user = messages
    return [*head, Message(role=user.role, content=f"{block}\n{user.content}")]


def judge_seed(run_seed: int | None, index: int) -> int | None:
    """The sampling seed of MA's judge ``index``: the run's seed plus the index (judge 0 keeps the run's seed;
    None when the run has none)."""
    return None if run_seed is None else run_seed + index


def variant_protocol(name: str) -> TraitJudgeProtocol | None:
    """``MAD[<variant>]`` or ``MADRAG[<variant>]`` with a transcript variant of Appendix C.1; None for any other
    name; ConfigError for an unknown variant."""
    m = _VARIANT.match(name)
    if m is None:
        return None
    base, variant = m.group(1), m.group(2)
    if variant not in VARIANTS:
        raise ConfigError(f"unknown transcript variant {variant!r}; choose from {', '.join(VARIANTS)}")
    return TraitJudgeProtocol(name, debate=cast(Variant, variant), exemplars=base == "MADRAG")


_FIXED = {
    "MA": TraitJudgeProtocol("MA", debate=None, exemplars=False),
    "MAD": TraitJudgeProtocol("MAD", debate="adv_r1", exemplars=False),
    "MARAG": TraitJudgeProtocol("MARAG", debate=None, exemplars=True),
    "MADRAG": TraitJudgeProtocol("MADRAG", debate="adv_r1", exemplars=True),
}


@register_protocol(*_FIXED, options=True, listed=tuple(f"MADRAG[{v}]" for v in VARIANTS))
def trait_judge(name: str) -> TraitJudgeProtocol | None:
    """MA, MAD, MARAG, MADRAG and ``MAD[<variant>]`` / ``MADRAG[<variant>]`` (only MADRAG's listed)."""
    return _FIXED.get(name) or variant_protocol(name)


__all__ = ["TraitJudgeProtocol", "combine_judges", "judge_seed", "trait_judge", "variant_protocol"]
