"""CJ: comparative judgment (Kim & Jo 2024, arXiv 2407.05733, "the CJ paper"): per trait, the LLM chooses the
better of two essays, a Bradley-Terry model is fitted over the comparisons, and its strengths become scores.

* comparison essays (``CJ[anchors=...,comparisons=N]``): the exemplar bank's essays of known score, never the
  essay itself: ``similar`` (default: the nearest pool essay of each level, procedure 2; with ``comparisons=N``
  the N nearest of each level) or ``medoid`` (each level's medoid, the same anchors for every essay);
* each pair is asked in both orders (role ``compare``; round 1: the essay is Essay A, round 2: it is Essay B;
  index = the anchor's level), so a model's preference for one position is measured and cancels in the fit;
* no tie: the answer ends ``Answer: A`` or ``Answer: B`` (the last such line counts); any other answer is an
  unreadable comparison: missing, counted (``failed_scores``), left out of the fit;
* two-step scoring (:mod:`madrag.protocols.bradley_terry`): (1) Bradley-Terry strengths fitted over every
  stored comparison of the trait in the run, essays and anchors together; (2) the anchors' known scores
  regressed on their strengths, each essay's score read on that line at its strength, rounded half up and
  clamped to the trait's range;
* ``CJ_F`` (the paper's fine-grained variant): the comparison prompt carries the elaborated rubric (every
  level's description) instead of the basic one (the trait's name, range and top level's description); every
  variant keeps the unrounded score of step 2 as the score's ``mean_score`` (the fine-grained score) beside
  the rounded one (how the paper made its fine-grained scores could not be read: docs/protocols.md).

Step 1 fits the run's comparisons together, so a score depends on the other essays of the run: the final
scores are computed when a run is read (:meth:`CJProtocol.read_scores`), from the stored comparisons. An
essay's comparisons are complete when its ``compared`` record is stored (no request; it lists the
comparisons); only complete essays enter the fit, so a resumed run reads the same scores. (A run made by
madrag's earlier CJ, one comparison per anchor with ties, is read by :mod:`madrag.pipeline.migrations.scores`.)
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any, Literal

from madrag.agents.calls import AgentCall, CallContext, new_record
from madrag.agents.context import essay_values, shorten
from madrag.agents.placeholders import mask_placeholders
from madrag.agents.prompts import TRAINING_FREE_PROMPT_NAMES
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.protocols.base import ProtocolNeeds, RecordReader, TraitScore
from madrag.protocols.bradley_terry import ALPHA
from madrag.protocols.cj_fit import COMPARED_ROLE, fit_trait
from madrag.protocols.concurrency import gather_or_cancel
from madrag.protocols.per_trait import TraitProtocol, read_answer
from madrag.protocols.registry import register_protocol
from madrag.providers.base import Message
from madrag.records import AgentRecord
from madrag.retrieval.anchors import AnchorSource
from madrag.retrieval.bank import Exemplar, LevelExemplar
from madrag.rubric import Rubric, Trait

Choice = Literal["A", "B"]
AnchorChoice = Literal["similar", "medoid"]
ANCHOR_CHOICES: tuple[AnchorChoice, ...] = ("similar", "medoid")
POSITIONS: tuple[Choice, Choice] = ("A", "B")
"""The essay's position in round 1 and round 2 of a pair."""
_ANSWER = re.compile(r"^\W*answer\W*\s*[:=-]\s*\**\s*(A|B)\b", re.IGNORECASE | re.MULTILINE)
_OPTIONS = re.compile(r"^(CJ|CJ_F)\[(.+)\]$")
INDEX_STRIDE = 1000
"""A comparison's index: the anchor's level, plus ``INDEX_STRIDE`` x its rank among that level's anchors."""


def parse_choice(text: str) -> Choice | None:
    """The essay an answer chooses: its last ``Answer: A|B`` line; None when it has none (no tie is read)."""
    found = _ANSWER.findall(text)
    return "A" if found and found[-1].upper() == "A" else "B" if found else None


def basic_rubric(trait: Trait) -> str:
    """The basic rubric of a trait: its name, scale and top level's description."""
    return f"{trait.name} (scores {trait.min} to {trait.max}); at its best: {trait.levels[trait.max].strip()}"


@dataclass(frozen=True)
class CJProtocol(TraitProtocol):
    """Comparative judgment with a Bradley-Terry fit (see the module docstring)."""

    name: str = "CJ"
    anchors: AnchorChoice = "similar"
    fine: bool = False
    comparisons: int = 1  # anchors per score level

    @property
    def needs(self) -> ProtocolNeeds:
        """Its comparison essays from the exemplar bank; the Bradley-Terry fit spans the run's essays (final
        scores read from the store); its comparison templates (with MTS's: recorded as one group)."""
        return ProtocolNeeds(bank=True, over_run=True, templates=TRAINING_FREE_PROMPT_NAMES)

    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it."""
        return {
            "name": self.name,
            "anchors": self.anchors,
            "comparisons": self.comparisons,
            "orders": "both",
            "ties": False,
            "fit": "bradley_terry",
            "alpha": ALPHA,
            "rubric": "elaborated" if self.fine else "basic",
            "exemplars": True,
            "per_trait": True,
        }

    async def score_trait(self, ctx: CallContext, essay: Essay, trait: Trait, label: str | None) -> TraitScore:
        """Compare ``essay`` with each level's anchor in both orders, then store that its comparisons are done.
        The score returned is provisional (None): the final one is read over the run (module docstring)."""
        assert ctx.bank is not None
        levels = await asyncio.to_thread(self._levels, ctx, essay, trait)
        anchors = [lvl for lvl in levels if lvl.exemplar is not None and lvl.exemplar.essay_id != essay.id]
        values = essay_values(ctx.prompts, essay, trait, ctx.settings.placeholders, False, label)
        values["TRAIT_RUBRIC"] = values["TRAIT_JSON"] if self.fine else basic_rubric(trait)
        calls = [
            self._call(ctx, essay, trait, values, a, pos, rank) for a, rank in ranked(anchors) for pos in POSITIONS
        ]
        records = list(await gather_or_cancel(*(compare(ctx, call) for call in calls)))
        unread = sum(1 for r in records if r.context.get("winner") is None)
        said = "\n".join(_said(r) for r in records) or "no anchor essay to compare with"
        context: dict[str, Any] = {"n_usable": len(records) - unread, "n_comparisons": len(records)}
        context["chose_first"] = sum(1 for r in records if r.context.get("choice") == "A")  # position bias
        context["exemplars"] = [lvl.model_dump(mode="json") for lvl in anchors]  # shown by the report
        context["from"] = [r.key for r in records]
        mark = await self._mark_compared(ctx, essay, trait, said, context, records)
        usable = mark.context.get("n_usable")
        return TraitScore(
            essay_id=essay.id,
            trait=trait.name,
            protocol=self.name,
            score=None,
            rationale=mark.rationale or "",
            record_key=mark.key,
            n_usable=int(usable) if isinstance(usable, int) else None,
            truncated=mark.truncated,
        )

    async def _mark_compared(
        self,
        ctx: CallContext,
        essay: Essay,
        trait: Trait,
        said: str,
        context: dict[str, Any],
        records: list[AgentRecord],
    ) -> AgentRecord:
        """Store (or find already stored) the ``compared`` record of ``essay``'s comparisons on ``trait``: no
        request (``answers=0``), ``context["from"]`` listing them. An essay with no anchor to compare with counts
        as an unusable score."""
        call = AgentCall(self.name, essay.id, trait.name, COMPARED_ROLE, [], 0.0, 0, context=context)
        if (found := ctx.store.get(call.key)) is not None:
            return found
        truncated = any(r.truncated for r in records)
        mark = new_record(
            ctx, call, text=said, rationale=said, answers=0, attempts=0, evidence=None, truncated=truncated
        )
        await ctx.store.aput(mark)
        ctx.stats.failed_scores += int(not records)
        if ctx.on_record is not None:
            ctx.on_record(mark)
        return mark

    def read_scores(self, reader: RecordReader, rubric: Rubric) -> list[TraitScore]:
        """The final scores: per trait, the Bradley-Terry fit over the run's complete comparison sets (module
        docstring)."""
        done = list(reader.records(protocol=self.name, role=COMPARED_ROLE))
        compares = list(reader.records(protocol=self.name, role="compare"))
        out: list[TraitScore] = []
        for trait in rubric.traits:
            marks = [r for r in done if r.trait == trait.name]
            if marks:
                out += fit_trait(self.name, trait, marks, [r for r in compares if r.trait == trait.name])
        return out

    def _levels(self, ctx: CallContext, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        bank = ctx.bank
        assert bank is not None
        if self.anchors == "similar" and self.comparisons > 1:
            return nearest_per_level(bank.similar(essay, 10**9), trait, self.comparisons)
        if self.anchors == "similar":
            return bank.per_level(essay, trait)
        if not isinstance(bank, AnchorSource):
            raise ConfigError(f"{self.name} needs an exemplar bank that chooses anchors")
        return bank.anchors(essay, trait)

    def _call(
        self,
        ctx: CallContext,
        essay: Essay,
        trait: Trait,
        values: dict[str, str],
        anchor: LevelExemplar,
        pos: Choice,
        rank: int = 0,
    ) -> AgentCall:
        assert anchor.exemplar is not None
        text = shorten(anchor.exemplar.text, ctx.settings.exemplar_max_words)
        if ctx.settings.placeholders == "mask":
            text = mask_placeholders(text)
        first, second = (values["ESSAY"], text) if pos == "A" else (text, values["ESSAY"])
        filled = {**values, "ESSAY_A": first, "ESSAY_B": second}
        messages = [
            Message(role="system", content=ctx.prompts.render("compare_system", **filled)),
            Message(role="user", content=ctx.prompts.render("compare_user", **filled)),
        ]
        return AgentCall(
            protocol=self.name,
            essay_id=essay.id,
            trait=trait.name,
            role="compare",
            round=1 if pos == "A" else 2,
            index=anchor.score + INDEX_STRIDE * rank,
            messages=messages,
            temperature=ctx.settings.judge_temperature,
            max_tokens=ctx.settings.judge_max_tokens,
            context={"anchor": anchor.exemplar.essay_id, "anchor_score": anchor.score, "essay_position": pos},
        )


def nearest_per_level(pool: list[Exemplar], trait: Trait, n: int) -> list[LevelExemplar]:
    """The ``n`` nearest essays of each score level of ``trait`` among ``pool`` (nearest first), lowest level first."""
    out: list[LevelExemplar] = []
    for score in trait.scores:
        found = [e for e in pool if e.scores.get(trait.name) == score][:n]
        out += [LevelExemplar(trait=trait.name, score=score, exemplar=e) for e in found]
    return out


def ranked(anchors: list[LevelExemplar]) -> list[tuple[LevelExemplar, int]]:
    """Each anchor with its rank among the anchors of its level (0: the first)."""
    seen: dict[int, int] = {}
    out = []
    for anchor in anchors:
        out.append((anchor, seen.get(anchor.score, 0)))
        seen[anchor.score] = seen.get(anchor.score, 0) + 1
    return out


def _said(record: AgentRecord) -> str:
    winner = record.context.get("winner") or "unreadable"
    return f"level {record.context.get('anchor_score')} (essay as {record.context.get('essay_position')}): {winner}"


async def compare(ctx: CallContext, call: AgentCall) -> AgentRecord:
    """The record of one comparison (from the store, or made now): the chosen position in
    ``context["choice"]`` and ``context["winner"]`` (``essay`` or ``anchor``); both None, with an ``error``,
    when the answer has no ``Answer: A|B`` line (counted as an unusable score)."""

    def read(text: str) -> tuple[dict[str, Any], str | None]:
        choice = parse_choice(text)
        if choice is None:
            return {"choice": None, "winner": None}, "unreadable comparison: no 'Answer: A' or 'Answer: B' line"
        return {"choice": choice, "winner": "essay" if choice == call.context["essay_position"] else "anchor"}, None

    return await read_answer(ctx, call, read, evidence=None)


@register_protocol("CJ", "CJ_F", options=True, listed=("CJ_F", "CJ[anchors=medoid]", "CJ[comparisons=2]"))
def parse_name(name: str) -> CJProtocol | None:
    """``CJ``, ``CJ_F`` (fine-grained), or either with options ``[anchors=similar|medoid,comparisons=N]`` (N
    anchors per level, with ``similar`` only); None for other names."""
    if name in ("CJ", "CJ_F"):
        return CJProtocol(name, fine=name == "CJ_F")
    m = _OPTIONS.match(name)
    if m is None:
        return None
    options = dict(item.partition("=")[::2] for item in m.group(2).split(","))
    unknown = set(options) - {"anchors", "comparisons"}
    if unknown:
        raise ConfigError(f"unknown CJ option {sorted(unknown)[0]!r}; choose from anchors, comparisons")
    choice = next((c for c in ANCHOR_CHOICES if c == options.get("anchors", "similar")), None)
    if choice is None:
        raise ConfigError(f"unknown CJ anchors {options['anchors']!r}; choose from {', '.join(ANCHOR_CHOICES)}")
    count = options.get("comparisons", "1")
    if not count.isdigit() or int(count) < 1:
        raise ConfigError(f"CJ comparisons must be a whole number of anchors per level >= 1, got {count!r}")
    if int(count) > 1 and choice != "similar":
        raise ConfigError("CJ comparisons > 1 needs anchors=similar (a level has one medoid)")
    return CJProtocol(name, anchors=choice, fine=m.group(1) == "CJ_F", comparisons=int(count))
