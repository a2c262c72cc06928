"""MTS: multi-trait specialization (Lee et al. 2024, "Unleashing Large Language Models' Proficiency in Zero-shot
Essay Scoring", "the MTS paper"), as its authors' code does it (their repository sanwooo/mts-llm-aes:
``ASAP/preprocess.py``, ``ASAP/inference_llama.py``, ``ASAP/postprocess.py``), applied by madrag to each trait of
the rubric (madrag's adaptation; the authors' own four traits per prompt, from their template file, are
``MTS[template=FILE]``: :mod:`madrag.protocols.mts_template`):

* scoring criteria from the rubric: the trait's level descriptions, highest first, each given its band of the
  0-10 scale (:func:`criteria`; four levels: 0-2, 3-5, 6-8, 9-10, the authors' bands). The authors had ChatGPT
  write each trait's description and criteria once; madrag shows the rubric's own, so no extra call or stored
  artefact is needed;
* a new conversation per trait: the system message states the trait and its criteria; turn 1 (role ``mts``,
  round 1) asks for the essay's quotations relevant to the trait and whether each is well written; turn 2
  (round 2), after that answer, asks for a score on 0..10 in the authors' ``Score: <score>...</score>`` format,
  read as they read it (:func:`madrag.protocols.mts_authors.read_score`: the first match, decimals kept);
* their sampling: temperature 0.1 (their repetition penalty 1.1 is not sent: no madrag backend takes one);
* the post-processing of ``EvaluatorMTS`` (:func:`scale_over_essays`): the mean of the essay's trait scores
  (here the one conversation of the rubric trait, so the mean is that score), outliers clipped to the IQR
  fences ``Q1 - 1.5 IQR`` and ``Q3 + 1.5 IQR`` over the run's essays, min-max scaled over those essays to the
  trait's range and rounded as numpy rounds (half to even).

``MTS[reading=integer]`` keeps madrag's earlier score turn: ``Final score: N``, an integer read as the Judge's
score is (constrained where the backend allows), at the Judge's temperature (0).

Min-max over the evaluated essays makes a score depend on the other essays of the run (one more essay can move
every score): the final scores are computed when the run is read (:meth:`MTSProtocol.read_scores`) from the
stored 0..10 scores; an essay whose score could not be read is missing (counted) and left out of the
quartiles and the min-max, as pandas leaves out NaN in the authors' code. When every usable raw score is the
same (one essay, or full agreement) the min-max divides zero by zero: every score is missing, as in the
authors' code. ``MTS[variant=madrag-v1]`` is madrag's first reading (:mod:`madrag.protocols.mts_v1`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from madrag.agents.calls import AgentCall, CallContext, debater
from madrag.agents.context import essay_values
from madrag.agents.judge import judge_trait
from madrag.agents.prompts import TRAINING_FREE_PROMPT_NAMES
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.protocols.base import ProtocolNeeds, RecordReader, ScoringProtocol, TraitScore
from madrag.protocols.mts_authors import (
    LINE_FORMAT,
    TAG_FORMAT,
    bands,
    final_score,
    sampling,
    scale_over_essays,
    score_turn,
    stored_score,
)
from madrag.protocols.mts_template import template_protocol
from madrag.protocols.mts_v1 import MTSv1Protocol, scale_trait
from madrag.protocols.per_trait import TraitProtocol
from madrag.protocols.registry import register_protocol
from madrag.providers.base import Message
from madrag.records import AgentRecord
from madrag.rubric import Rubric, Trait

MTS_SCALE = (0, 10)
"""The scale of each trait score (the authors' ``check_score``: 0..10)."""
READINGS = ("authors", "integer")
"""How the score turn asks and is read: the authors' ``Score: <score>...</score>`` (decimals kept), or madrag's
``Final score: N`` integer read as the Judge's score is (``MTS[reading=integer]``)."""


def criteria(trait: Trait) -> str:
    """The trait's scoring criteria: one line per rubric level, highest first, each under its band of the 0-10
    scale the score turn asks for (``- 9-10: <the top level's description>``)."""
    band = bands(list(trait.levels), MTS_SCALE)
    lines = []
    for level in sorted(trait.levels, reverse=True):
        lo, hi = band[level]
        lines.append(f"- {lo if lo == hi else f'{lo}-{hi}'}: {trait.levels[level].strip()}")
    return "\n".join(lines)


@dataclass(frozen=True)
class MTSProtocol(TraitProtocol):
    """The MTS of the paper's code, per rubric trait (see the module docstring)."""

    name: str = "MTS"
    reading: str = "authors"

    @property
    def needs(self) -> ProtocolNeeds:
        """Min-max over the run's essays (final scores read from the store); MTS's templates (with CJ's:
        recorded as one group)."""
        return ProtocolNeeds(over_run=True, templates=TRAINING_FREE_PROMPT_NAMES)

    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it."""
        return {
            "name": self.name,
            "variant": "authors",
            "traits": "rubric",
            "criteria": "rubric_levels_in_0_10_bands",
            "turns": ["quotes_well_written", "score"],
            "scale": list(MTS_SCALE),
            "reading": "first_match_decimal" if self.reading == "authors" else "integer_as_judge",
            "sampling": self._sampling(None),
            "post": "mean_iqr_clip_minmax_over_run",
            "per_trait": True,
        }

    async def score_trait(self, ctx: CallContext, essay: Essay, trait: Trait, label: str | None) -> TraitScore:
        """The trait's conversation: quotes, then a 0..10 score. The score returned is provisional (None): the
        final one is scaled over the run when it is read (module docstring)."""
        values = essay_values(ctx.prompts, essay, trait, ctx.settings.placeholders, False, label)
        scale = {
            "Q_MIN": str(MTS_SCALE[0]),
            "Q_MAX": str(MTS_SCALE[1]),
            "CRITERIA": criteria(trait),
            "OUTPUT_FORMAT": TAG_FORMAT if self.reading == "authors" else LINE_FORMAT,
        }
        system = Message(role="system", content=ctx.prompts.render("mts_trait_system", **values, **scale))
        ask = Message(role="user", content=ctx.prompts.render("mts_retrieval", **values, **scale))
        quotes = await debater(ctx, self._call(essay, trait, ctx, 1, [system, ask], values["ESSAY"]))
        turn = Message(role="user", content=ctx.prompts.render("mts_score", **values, **scale))
        history = [system, ask, Message(role="assistant", content=quotes.text), turn]
        call = self._call(essay, trait, ctx, 2, history, values["ESSAY"])
        if self.reading == "integer":
            record = await judge_trait(ctx, call, scale_trait(trait, MTS_SCALE))
        else:
            record = await score_turn(ctx, call)
        return _raw_score(self.name, trait, record).model_copy(update={"score": None})

    def _call(
        self, essay: Essay, trait: Trait, ctx: CallContext, turn: int, messages: list[Message], text: str
    ) -> AgentCall:
        return AgentCall(
            protocol=self.name,
            essay_id=essay.id,
            trait=trait.name,
            role="mts",
            round=turn,
            messages=messages,
            temperature=self._sampling(ctx)["temperature"],
            max_tokens=ctx.settings.judge_max_tokens,
            context={"turn": "quotes" if turn == 1 else "score", "scale": list(MTS_SCALE)},
            essay=text,
        )

    def _sampling(self, ctx: CallContext | None) -> dict[str, Any]:
        """The authors' sampling, or (``reading=integer``) the Judge's temperature, as madrag sampled MTS before."""
        if self.reading == "authors":
            return sampling(ctx.settings.judge_max_tokens if ctx is not None else 1024)
        return {"temperature": ctx.settings.judge_temperature if ctx is not None else "judge_temperature"}

    def read_scores(self, reader: RecordReader, rubric: Rubric) -> list[TraitScore]:
        """The final scores: per trait, the stored 0..10 scores of the run's essays post-processed together
        (:func:`scale_over_essays`)."""
        turns = [r for r in reader.records(protocol=self.name, role="mts") if r.round == 2 and not r.failed]
        out: list[TraitScore] = []
        for trait in rubric.traits:
            raw = [_raw_score(self.name, trait, r) for r in turns if r.trait == trait.name]
            means = [s.mean_score for s in raw]
            for score, value in zip(raw, scale_over_essays(means, trait.min, trait.max), strict=True):
                out.append(final_score(score, value, means))
        return out


def _raw_score(protocol: str, trait: Trait, record: AgentRecord) -> TraitScore:
    """The essay's raw trait score (``mean_score``: the mean of its 0..10 trait scores; here one) from its score
    turn's record."""
    raw = stored_score(record)
    return TraitScore(
        essay_id=record.essay_id,
        trait=trait.name,
        protocol=protocol,
        score=None,
        result=record.score,
        rationale=record.rationale or record.text or "",
        record_key=record.key,
        n_usable=0 if raw is None else 1,
        mean_score=raw,
        truncated=record.truncated,
    )


@register_protocol("MTS", options=True, listed=("MTS[reading=integer]", "MTS[variant=madrag-v1]"))
def mts(name: str) -> ScoringProtocol | None:
    """``MTS`` (the authors' procedure per rubric trait), ``MTS[reading=integer]``, ``MTS[template=FILE]`` (the
    authors' traits from their template file; with ``group=run``: min-max over the run's essays, not their 10%
    sample) or ``MTS[variant=madrag-v1]`` (madrag's first reading); None for other names."""
    if name == "MTS":
        return MTSProtocol(name)
    if not (name.startswith("MTS[") and name.endswith("]")):
        return None
    options = dict(item.partition("=")[::2] for item in name[4:-1].split(","))
    if options == {"variant": "madrag-v1"}:
        return MTSv1Protocol(name)
    if options.keys() == {"reading"} and options["reading"] in READINGS:
        return MTSProtocol(name, reading=options["reading"])
    if "template" in options and set(options) <= {"template", "group"}:
        return template_protocol(name, options)
    raise ConfigError(
        f"unknown MTS option {name[3:]!r}; choose MTS, MTS[reading=integer], MTS[template=FILE] "
        "(with group=sample or group=run) or MTS[variant=madrag-v1]"
    )
