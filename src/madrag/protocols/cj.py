"""CJ: comparative judgment (Kim & Jo 2024, arXiv 2407.05733): per trait, the LLM compares the essay with
already scored anchor essays, pair by pair, and the score is read from the comparisons.

* anchors: the exemplar bank's per-level exemplars (procedure 2: one per score level, pool essays of the train
  split, never the essay itself); a level without one is not compared (madrag's choice);
* one call per anchor (role ``compare``, index = the anchor's level): the essay is Essay A, the anchor Essay B,
  the answer ends ``Answer: A``, ``Answer: B`` or ``Answer: tie`` (the last such line counts; anything else is
  an unreadable comparison: missing, counted, and the trait's score is then missing);
* score rule (``CJ[rule=...]``): ``highest`` (default) - the highest anchor level the essay beats or ties, the
  trait's minimum when it beats or ties none; ``count`` - the k-th lowest anchor level, k the anchors beaten or
  tied (the two agree whenever the comparisons are consistent).

The final score is a derived Judge record (:mod:`madrag.protocols.derived`). Every choice above is madrag's own
where the paper's text does not fix it (docs/protocols.md).
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, replace
from typing import Any, Literal

from madrag.agents.calls import AgentCall, CallContext, answer_fields, build_request, finish_record, new_record, once
from madrag.agents.context import essay_values, shorten
from madrag.agents.prompts import TRAINING_FREE_PROMPT_NAMES
from madrag.concurrency import gather_or_cancel, gather_settled
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.placeholders import mask_placeholders
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.protocols.derived import Derived, derived_result, store_derived
from madrag.protocols.registry import register_protocol
from madrag.providers.base import Message
from madrag.records import AgentRecord
from madrag.retrieval.bank import LevelExemplar
from madrag.rubric import Rubric, Trait

Outcome = Literal["win", "loss", "tie"]
"""The essay's result against one anchor: it is better (A), worse (B), or equally good."""
Rule = Literal["highest", "count"]
RULES: tuple[Rule, ...] = ("highest", "count")
_ANSWER = re.compile(r"^\W*answer\W*\s*[:=-]\s*\**\s*(A|B|tie)\b", re.IGNORECASE | re.MULTILINE)
_NAME = re.compile(r"^CJ\[rule=(\w+)\]$")
_OUTCOME: dict[str, Outcome] = {"a": "win", "b": "loss", "tie": "tie"}


def parse_comparison(text: str) -> Outcome | None:
    """The outcome of a comparison answer: its last ``Answer: A|B|tie`` line; None when it has none."""
    found = _ANSWER.findall(text)
    return _OUTCOME[found[-1].lower()] if found else None


def score_from_comparisons(outcomes: dict[int, Outcome | None], trait: Trait, rule: Rule = "highest") -> int | None:
    """The score the comparisons with anchors at levels ``outcomes`` imply (see the module docstring); None
    when there is no comparison or any of them is unreadable."""
    if not outcomes or any(o is None for o in outcomes.values()):
        return None
    levels = sorted(outcomes)
    not_worse = [lvl for lvl in levels if outcomes[lvl] in ("win", "tie")]
    if rule == "highest":
        return max(not_worse) if not_worse else trait.min
    k = len(not_worse)
    return levels[k - 1] if k else trait.min


@dataclass(frozen=True)
class CJProtocol(ScoringProtocol):
    """Comparative judgment against the bank's per-level anchors (see the module docstring)."""

    name: str = "CJ"
    rule: Rule = "highest"

    @property
    def uses_bank(self) -> bool:
        """CJ's anchors come from the exemplar bank."""
        return True

    @property
    def templates(self) -> tuple[str, ...]:
        """CJ's comparison templates (with MTS's: they are recorded as one group)."""
        return TRAINING_FREE_PROMPT_NAMES

    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it."""
        return {"name": self.name, "anchors": "per_level", "rule": self.rule, "exemplars": True, "per_trait": True}

    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        """Score every trait of ``essay``, the traits concurrently (a trait whose call failed is left out)."""
        if ctx.bank is None:
            raise ConfigError(f"protocol {self.name} needs an exemplar bank")
        label = rubric.source_label
        scores = await gather_settled(*(self.score_trait(ctx, essay, t, label) for t in rubric.traits))
        return [s for s in scores if s is not None]

    async def score_trait(self, ctx: CallContext, essay: Essay, trait: Trait, label: str | None) -> TraitScore:
        """Compare ``essay`` with each level's anchor on ``trait``, then store the score they imply."""
        assert ctx.bank is not None
        levels = await asyncio.to_thread(ctx.bank.per_level, essay, trait)
        anchors = [lvl for lvl in levels if lvl.exemplar is not None and lvl.exemplar.essay_id != essay.id]
        values = essay_values(ctx.prompts, essay, trait, ctx.settings.placeholders, False, label)
        calls = [self._call(ctx, essay, trait, values, anchor) for anchor in anchors]
        records = list(await gather_or_cancel(*(compare(ctx, call) for call in calls)))
        outcomes = {a.score: r.context.get("outcome") for a, r in zip(anchors, records, strict=True)}
        value = score_from_comparisons(outcomes, trait, self.rule)
        unread = sum(1 for o in outcomes.values() if o is None)
        problem = "no anchor essay to compare with" if not outcomes else f"{unread} unreadable comparison(s)"
        said = "; ".join(f"level {lvl}: {o or 'unreadable'}" for lvl, o in sorted(outcomes.items()))
        context: dict[str, Any] = {"outcomes": {str(k): v for k, v in outcomes.items()}, "rule": self.rule}
        context["n_usable"] = len(outcomes) - unread
        context["exemplars"] = [lvl.model_dump(mode="json") for lvl in anchors]  # shown by the report
        result = derived_result(value, problem)
        of = Derived(self.name, essay.id, trait)
        return await store_derived(ctx, of, result, said, context, records, not outcomes)

    def _call(
        self, ctx: CallContext, essay: Essay, trait: Trait, values: dict[str, str], anchor: LevelExemplar
    ) -> AgentCall:
        assert anchor.exemplar is not None
        text = shorten(anchor.exemplar.text, ctx.settings.exemplar_max_words)
        if ctx.settings.placeholders == "mask":
            text = mask_placeholders(text)
        filled = {**values, "ANCHOR": text}
        messages = [
            Message(role="system", content=ctx.prompts.render("compare_system", **filled)),
            Message(role="user", content=ctx.prompts.render("compare_user", **filled)),
        ]
        return AgentCall(
            protocol=self.name,
            essay_id=essay.id,
            trait=trait.name,
            role="compare",
            index=anchor.score,
            messages=messages,
            temperature=ctx.settings.judge_temperature,
            max_tokens=ctx.settings.judge_max_tokens,
            context={"anchor": anchor.exemplar.essay_id, "anchor_score": anchor.score},
        )


async def compare(ctx: CallContext, call: AgentCall) -> AgentRecord:
    """The record of one comparison (from the store, or made now): its outcome in ``context["outcome"]``
    (None, with an ``error``, when the answer has no ``Answer:`` line; counted as an unusable score)."""
    return await once(ctx, call, lambda: _compare(ctx, call))


async def _compare(ctx: CallContext, call: AgentCall) -> AgentRecord:
    request = build_request(ctx, call)
    started = time.monotonic()
    response = await ctx.provider.complete(request)
    outcome = parse_comparison(response.text)
    if outcome is None:
        ctx.stats.failed_scores += 1
    record = new_record(
        ctx,
        replace(call, context={**call.context, "outcome": outcome}),
        **answer_fields(request, response, started),
        evidence=None,
        error=None if outcome is not None else "unreadable comparison: no 'Answer: A|B|tie' line",
    )
    return await finish_record(ctx, record)


@register_protocol("CJ", options=True, listed=("CJ[rule=count]",))
def parse_name(name: str) -> CJProtocol | None:
    """``CJ`` or ``CJ[rule=highest|count]``; None for other names."""
    if name == "CJ":
        return CJProtocol()
    m = _NAME.match(name)
    if m is None:
        return None
    rule = next((r for r in RULES if r == m.group(1)), None)
    if rule is not None:
        return CJProtocol(name, rule=rule)
    rule_name = m.group(1)
    raise ConfigError(f"unknown CJ score rule {rule_name!r}; choose from {', '.join(RULES)}")
