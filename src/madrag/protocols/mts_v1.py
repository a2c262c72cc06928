"""``MTS[variant=madrag-v1]``: madrag's first reading of MTS (Lee et al. 2024, arXiv 2404.04941), kept as a
named variant (the MTS of the paper and its authors' code is :mod:`madrag.protocols.mts`): per trait, scoring
questions derived from the rubric, each answered with a score in one conversation, the mean mapped linearly
from the question scale to the trait's range (no outlier clipping, no scaling over the run's essays).

* questions (madrag's choice of source): the sentences of the trait's top level description in the rubric (its
  description of the best essays), one question each; a trait whose top description has no sentence uses the
  whole description (the paper has ChatGPT write the criteria once; madrag derives them from the rubric so
  that no extra call or stored artefact is needed, and records them in each answer's context);
* one conversation per trait: question i is asked after the questions before it and their answers (role
  ``mts``, round i), each answered with quotes and ``Final score: N``, N on the scale 1..10 (``MTS_SCALE``), read
  as the Judge's score is (:func:`madrag.agents.judge.judge_trait`: constrained, or parsed from the text);
* the trait score: the mean of the answers' scores, scaled from the question scale to the trait's range and
  rounded half up (values outside the range clipped); missing when any answer's score is unreadable (each
  unreadable answer is counted as an unusable score).

The score is computed from the answers' records, as they are made and when a run is read
(:meth:`MTSv1Protocol.read_scores`); it is kept as the run's score row, which names them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from madrag.agents.calls import AgentCall, CallContext
from madrag.agents.context import essay_values
from madrag.agents.judge import judge_trait
from madrag.agents.prompts import TRAINING_FREE_PROMPT_NAMES
from madrag.data.essay import Essay
from madrag.metrics import round_half_up_clamped
from madrag.protocols.base import ProtocolNeeds, RecordReader, TraitScore
from madrag.protocols.per_trait import TraitProtocol
from madrag.providers.base import Message
from madrag.records import AgentRecord, ScoreResult
from madrag.rubric import Rubric, Trait

MTS_SCALE = (1, 10)
"""The scale every scoring question is answered on (madrag's choice)."""
_SENTENCE = re.compile(r"(?<=[.!?;])\s+")


def questions(trait: Trait) -> list[str]:
    """The trait's scoring questions: each sentence of its top level's description (at least three words),
    else the whole description."""
    top = trait.levels[trait.max].strip()
    found = [s.strip() for s in _SENTENCE.split(top) if len(s.split()) >= 3]
    return found or [top]


def scaled_score(answers: list[int | None], trait: Trait, scale: tuple[int, int] = MTS_SCALE) -> int | None:
    """The trait score of the answers' scores: their mean, min-max scaled from ``scale`` to the trait's range,
    rounded half up and clipped; None when there is no answer or any is unreadable."""
    if not answers or any(a is None for a in answers):
        return None
    lo, hi = scale
    mean = sum(a for a in answers if a is not None) / len(answers)
    return round_half_up_clamped(trait.min + (mean - lo) / (hi - lo) * (trait.max - trait.min), trait.min, trait.max)


def scale_trait(trait: Trait, scale: tuple[int, int] = MTS_SCALE) -> Trait:
    """The question scale as a Trait, so an answer is read as a Judge's score is."""
    lo, hi = scale
    return Trait(name=trait.name, min=lo, max=hi, levels={s: str(s) for s in range(lo, hi + 1)})


@dataclass(frozen=True)
class MTSv1Protocol(TraitProtocol):
    """Trait-specific scoring questions in one conversation per trait (see the module docstring)."""

    name: str = "MTS[variant=madrag-v1]"

    @property
    def needs(self) -> ProtocolNeeds:
        """MTS's templates (with CJ's: recorded as one group)."""
        return ProtocolNeeds(templates=TRAINING_FREE_PROMPT_NAMES)

    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it."""
        return {
            "name": self.name,
            "variant": "madrag-v1",
            "questions": "rubric_top_level",
            "scale": list(MTS_SCALE),
            "per_trait": True,
        }

    async def score_trait(self, ctx: CallContext, essay: Essay, trait: Trait, label: str | None) -> TraitScore:
        """Ask the trait's questions in turn; the scaled mean of their scores."""
        values = essay_values(ctx.prompts, essay, trait, ctx.settings.placeholders, False, label)
        scale = {"Q_MIN": MTS_SCALE[0], "Q_MAX": MTS_SCALE[1]}
        asked = questions(trait)
        history = [Message(role="system", content=ctx.prompts.render("mts_system", **values, **scale))]
        records: list[AgentRecord] = []
        scale_as_trait = scale_trait(trait)
        for i, criterion in enumerate(asked):
            q = ctx.prompts.render(
                "mts_question", NUMBER=i + 1, COUNT=len(asked), TRAIT_NAME=trait.name, CRITERION=criterion, **scale
            )
            text = ctx.prompts.render("mts_first", **values, QUESTION=q) if i == 0 else q
            history = [*history, Message(role="user", content=text)]
            call = AgentCall(
                protocol=self.name,
                essay_id=essay.id,
                trait=trait.name,
                role="mts",
                round=i + 1,
                messages=history,
                temperature=ctx.settings.judge_temperature,
                max_tokens=ctx.settings.judge_max_tokens,
                context={"question": criterion, "scale": list(MTS_SCALE)},
                essay=values["ESSAY"],
            )
            record = await judge_trait(ctx, call, scale_as_trait)
            records.append(record)
            history = [*history, Message(role="assistant", content=record.text)]
        return self.score_of(trait, records)

    def score_of(self, trait: Trait, records: list[AgentRecord]) -> TraitScore:
        """The trait score of the answers' ``records`` (in the order asked), the last one's key its record's."""
        answers = [r.score.reported if r.score is not None else None for r in records]
        value = scaled_score(answers, trait)
        unread = sum(1 for a in answers if a is None)
        said = "\n".join(f"Q{i + 1} ({q}): {a}" for i, (q, a) in enumerate(zip(questions(trait), answers, strict=True)))
        result = (
            ScoreResult(mode="failed", invalid_raw=f"{unread} unreadable answer(s)")
            if value is None
            else ScoreResult(parsed=value, reported=value, mode="parsed_text")
        )
        return TraitScore(
            essay_id=records[-1].essay_id,
            trait=trait.name,
            protocol=self.name,
            score=value,
            result=result,
            rationale=said,
            record_key=records[-1].key,
            record_keys=[r.key for r in records],
            n_usable=len(answers) - unread,
            truncated=any(r.truncated for r in records),
        )

    def read_scores(self, reader: RecordReader, rubric: Rubric) -> list[TraitScore]:
        """The scores of the essay-traits whose every question was answered (failed calls give none)."""
        asked: dict[tuple[str, str], dict[int, AgentRecord]] = {}
        for record in reader.records(protocol=self.name, role="mts"):
            if not record.failed and record.trait in rubric.trait_names:
                asked.setdefault((record.essay_id, record.trait), {})[record.round] = record
        out = []
        for (_, name), rounds in sorted(asked.items()):
            trait = rubric.trait(name)
            if sorted(rounds) == list(range(1, len(questions(trait)) + 1)):
                out.append(self.score_of(trait, [rounds[i] for i in sorted(rounds)]))
        return out
