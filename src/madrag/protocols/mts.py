"""MTS: multi-trait specialization (Lee et al. 2024, arXiv 2404.04941, "the MTS paper"), step for step as its
authors' code does it (github.com/sanwooo/mts-llm-aes: ``ASAP/preprocess.py``, ``ASAP/inference_llama.py``,
``ASAP/postprocess.py``), applied to each trait of the rubric:

* scoring criteria from the rubric: the trait's level descriptions, highest first (:func:`criteria`; the
  authors had ChatGPT write each trait's description and criteria once, from the rubric: madrag shows the
  rubric's own, so no extra call or stored artefact is needed);
* a new conversation per trait: the system message states the trait and its criteria; turn 1 (role ``mts``,
  round 1) asks for the essay's quotes relevant to the trait; turn 2 (round 2), after that answer, asks for a
  score on 0..10 (``MTS_SCALE``), read as the Judge's score is (constrained, or the ``Final score`` line);
* the post-processing of ``EvaluatorMTS`` (:func:`scale_over_essays`): the mean of the essay's trait scores
  (here the one conversation of the rubric trait, so the mean is that score), outliers clipped to the IQR
  fences ``Q1 - 1.5 IQR`` and ``Q3 + 1.5 IQR`` over the run's essays, min-max scaled over those essays to the
  trait's range and rounded as numpy rounds (half to even).

Min-max over the evaluated essays makes a score depend on the other essays of the run (one more essay can move
every score): the final scores are computed when the run is read (:meth:`MTSProtocol.read_scores`) from the
stored 0..10 scores; an essay whose score could not be read is missing (counted) and left out of the
quartiles and the min-max, as pandas leaves out NaN in the authors' code. When every usable raw score is the
same (one essay, or full agreement) the min-max divides zero by zero: every score is missing, as in the
authors' code. ``MTS[variant=madrag-v1]`` is madrag's earlier reading (:mod:`madrag.protocols.mts_v1`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from madrag.agents.calls import AgentCall, CallContext, debater
from madrag.agents.context import essay_values
from madrag.agents.judge import judge_trait
from madrag.agents.prompts import TRAINING_FREE_PROMPT_NAMES
from madrag.concurrency import gather_settled
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.protocols.base import RecordReader, ScoringProtocol, TraitScore
from madrag.protocols.mts_v1 import MTSv1Protocol, scale_trait
from madrag.protocols.registry import register_protocol
from madrag.protocols.scores import judge_scores
from madrag.providers.base import Message
from madrag.records import AgentRecord, ScoreResult
from madrag.rubric import Rubric, Trait

MTS_SCALE = (0, 10)
"""The scale of each trait score (the authors' ``check_score``: 0..10)."""
IQR_WIDTH = 1.5
"""The authors' ``iqr_width``: values beyond 1.5 IQR outside the quartiles are clipped to the fence."""


def criteria(trait: Trait) -> str:
    """The trait's scoring criteria as the rubric states them: one line per level, highest first."""
    return "\n".join(f"- {s}: {trait.levels[s].strip()}" for s in sorted(trait.levels, reverse=True))


def scale_over_essays(means: Sequence[float | None], lo: int, hi: int) -> list[float | None]:
    """The authors' ``map_score(mode='minmax')`` with ``clip_outliers=True`` on the essays' mean trait scores:
    clipped to the IQR fences (quartiles interpolated linearly, as pandas' ``quantile``), min-max scaled to
    ``lo..hi``; None stays None, and every value is None when the clipped values do not vary."""
    usable = np.array([m for m in means if m is not None], dtype=np.float64)
    if usable.size == 0:
        return [None] * len(means)
    q1, q3 = np.quantile(usable, 0.25), np.quantile(usable, 0.75)
    low, high = q1 - (q3 - q1) * IQR_WIDTH, q3 + (q3 - q1) * IQR_WIDTH
    clipped = np.clip(usable, low, high)
    span = float(clipped.max() - clipped.min())
    if span == 0.0:
        return [None] * len(means)
    scaled = iter((clipped - clipped.min()) / span * (hi - lo) + lo)
    return [None if m is None else float(next(scaled)) for m in means]


def numpy_round(value: float) -> int:
    """``np.round(x).astype(int)``: to the nearest integer, halves to even (the authors' rounding)."""
    return int(np.round(value))


@dataclass(frozen=True)
class MTSProtocol(ScoringProtocol):
    """The MTS of the paper's code, per rubric trait (see the module docstring)."""

    name: str = "MTS"

    @property
    def scored_over_run(self) -> bool:
        """Min-max over the run's essays: final scores are read from the store."""
        return True

    @property
    def templates(self) -> tuple[str, ...]:
        """MTS's templates (with CJ's: they are recorded as one group)."""
        return TRAINING_FREE_PROMPT_NAMES

    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it."""
        return {
            "name": self.name,
            "variant": "authors",
            "criteria": "rubric_levels",
            "turns": ["quotes", "score"],
            "scale": list(MTS_SCALE),
            "post": "mean_iqr_clip_minmax_over_run",
            "per_trait": True,
        }

    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        """Score every trait of ``essay``, the traits concurrently (a trait whose call failed is left out)."""
        label = rubric.source_label
        scores = await gather_settled(*(self.score_trait(ctx, essay, t, label) for t in rubric.traits))
        return [s for s in scores if s is not None]

    async def score_trait(self, ctx: CallContext, essay: Essay, trait: Trait, label: str | None) -> TraitScore:
        """The trait's conversation: quotes, then a 0..10 score. The score returned is provisional (None): the
        final one is scaled over the run when it is read (module docstring)."""
        values = essay_values(ctx.prompts, essay, trait, ctx.settings.placeholders, False, label)
        scale = {"Q_MIN": str(MTS_SCALE[0]), "Q_MAX": str(MTS_SCALE[1]), "CRITERIA": criteria(trait)}
        system = Message(role="system", content=ctx.prompts.render("mts_trait_system", **values, **scale))
        ask = Message(role="user", content=ctx.prompts.render("mts_retrieval", **values, **scale))
        quotes = await debater(ctx, self._call(essay, trait, ctx, 1, [system, ask], values["ESSAY"]))
        turn = Message(role="user", content=ctx.prompts.render("mts_score", **values, **scale))
        history = [system, ask, Message(role="assistant", content=quotes.text), turn]
        record = await judge_trait(
            ctx, self._call(essay, trait, ctx, 2, history, values["ESSAY"]), scale_trait(trait, MTS_SCALE)
        )
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
            temperature=ctx.settings.judge_temperature,
            max_tokens=ctx.settings.judge_max_tokens,
            context={"turn": "quotes" if turn == 1 else "score", "scale": list(MTS_SCALE)},
            essay=text,
        )

    def read_scores(self, reader: RecordReader, rubric: Rubric) -> list[TraitScore]:
        """The final scores: per trait, the stored 0..10 scores of the run's essays post-processed together
        (:func:`scale_over_essays`); a run of madrag's earlier MTS is read from its derived Judge records."""
        legacy = list(reader.records(protocol=self.name, role="judge"))
        if legacy:
            return judge_scores(legacy, rubric)
        turns = [r for r in reader.records(protocol=self.name, role="mts") if r.round == 2 and not r.failed]
        out: list[TraitScore] = []
        for trait in rubric.traits:
            raw = [_raw_score(self.name, trait, r) for r in turns if r.trait == trait.name]
            means = [s.mean_score for s in raw]
            for score, value in zip(raw, scale_over_essays(means, trait.min, trait.max), strict=True):
                out.append(_final(score, value, means))
        return out


def _raw_score(protocol: str, trait: Trait, record: AgentRecord) -> TraitScore:
    """The essay's raw trait score (``mean_score``: the mean of its 0..10 trait scores; here one) from its score
    turn's record."""
    raw = record.score.reported if record.score is not None else None
    return TraitScore(
        essay_id=record.essay_id,
        trait=trait.name,
        protocol=protocol,
        score=None,
        result=record.score,
        rationale=record.rationale or record.text or "",
        record_key=record.key,
        n_usable=0 if raw is None else 1,
        mean_score=None if raw is None else float(raw),
        truncated=record.truncated,
    )


def _final(raw: TraitScore, value: float | None, means: Sequence[float | None]) -> TraitScore:
    """The final TraitScore of a raw one and its scaled value (missing, with the reason, when None)."""
    if value is None or math.isnan(value):
        usable = sum(1 for m in means if m is not None)
        why = "unreadable 0-10 score" if raw.mean_score is None else f"min-max over {usable} essays has no range"
        return raw.model_copy(update={"result": ScoreResult(mode="failed", invalid_raw=why), "mean_score": None})
    final = numpy_round(value)
    result = ScoreResult(parsed=final, reported=final, mode="parsed_text")
    return raw.model_copy(update={"score": final, "result": result, "mean_score": value})


@register_protocol("MTS", options=True, listed=("MTS[variant=madrag-v1]",))
def mts(name: str) -> MTSProtocol | MTSv1Protocol | None:
    """``MTS`` (the paper's) or ``MTS[variant=madrag-v1]`` (madrag's earlier reading); None for other names."""
    if name == "MTS":
        return MTSProtocol(name)
    if not name.startswith("MTS["):
        return None
    if name == "MTS[variant=madrag-v1]":
        return MTSv1Protocol(name)
    raise ConfigError(f"unknown MTS option {name[3:]!r}; choose MTS or MTS[variant=madrag-v1]")
