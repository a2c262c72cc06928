"""GEval: the probability-weighted single judge (G-Eval style, Liu et al. 2023): one Judge per trait, as MA,
whose score is the expectation of its score distribution, sum_s p(s) * s, rounded half up.

The Judge call is MA's (same prompt, ``rater`` role, its record under ``GEval``); the distribution is the one
madrag already reads (the constrained score step's choice probabilities, or the top alternatives at the
``Final score`` token). A backend without logprobs gives no distribution: the GEval score is then missing and
counted (``GEval[fallback=parsed]`` takes the parsed score instead, and says so in the score's result). The
score is computed from the rater's record, as the call is made and when a run is read
(:meth:`GEvalProtocol.read_scores`); the run's score row keeps it and names the rater's record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal

from madrag.agents.calls import CallContext
from madrag.agents.judge import judge_trait
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.metrics import round_half_up_clamped
from madrag.protocols.base import RecordReader, TraitScore
from madrag.protocols.per_trait import TraitProtocol, trait_call
from madrag.protocols.registry import register_protocol
from madrag.records import AgentRecord, ScoreResult
from madrag.rubric import Rubric, Trait

Fallback = Literal["missing", "parsed"]
_NAME = re.compile(r"^GEval\[fallback=(\w+)\]$")


def expected_result(record: AgentRecord, trait: Trait, fallback: Fallback = "missing") -> ScoreResult:
    """The GEval score of a Judge record: its distribution's expectation rounded half up (``reported_from``
    ``expected``); without a distribution, missing, or the parsed score with ``fallback="parsed"``; missing
    whenever the Judge's own score could not be read."""
    found = record.score
    if found is None or found.parsed is None:
        return ScoreResult(mode="failed", invalid_raw="the Judge's score could not be read")
    if found.expected is None:
        if fallback == "parsed":
            return found.model_copy(update={"reported": found.parsed, "reported_from": "parsed"})
        return found.model_copy(
            update={
                "reported": None,
                "mode": "failed",
                "invalid_raw": "no score distribution (backend without logprobs)",
            }
        )
    value = round_half_up_clamped(found.expected, trait.min, trait.max)
    return found.model_copy(update={"reported": value, "reported_from": "expected"})


@dataclass(frozen=True)
class GEvalProtocol(TraitProtocol):
    """One probability-weighted Judge per trait (see the module docstring)."""

    name: str = "GEval"
    fallback: Fallback = "missing"

    def describe(self) -> dict[str, Any]:
        """The protocol as a run's configuration records it."""
        return {"name": self.name, "score": "expected", "fallback": self.fallback, "per_trait": True}

    async def score_trait(self, ctx: CallContext, essay: Essay, trait: Trait, label: str | None) -> TraitScore:
        """MA's Judge call for ``trait`` (role ``rater``), its expectation the score. A missing expectation of a
        readable rater's answer made now counts as an unusable score (the rater counted its own unreadable one)."""
        call = trait_call(ctx, self.name, essay, trait, label, role="rater")
        # the rater's own record keeps the expectation too (report "expected"), whatever the run's setting
        rated = replace(ctx, settings=ctx.settings.model_copy(update={"report": "expected"}))
        fresh = call.key not in ctx.inflight and ctx.store.get(call.key) is None
        record = await judge_trait(rated, call, trait)
        score = self.score_of(record, trait)
        if fresh and score.score is None and record.score is not None and record.score.parsed is not None:
            ctx.stats.failed_scores += 1
        return score

    def score_of(self, record: AgentRecord, trait: Trait) -> TraitScore:
        """The GEval score of the rater's ``record`` (:func:`expected_result`), the record it came from."""
        result = expected_result(record, trait, self.fallback)
        return TraitScore(
            essay_id=record.essay_id,
            trait=trait.name,
            protocol=self.name,
            score=result.reported,
            result=result,
            rationale=record.rationale or "",
            record_key=record.key,
            n_usable=int(result.reported is not None),
            truncated=record.truncated,
        )

    def read_scores(self, reader: RecordReader, rubric: Rubric) -> list[TraitScore]:
        """The scores of its raters' records (failed calls give none)."""
        raters = (r for r in reader.records(protocol=self.name, role="rater") if not r.failed)
        return [self.score_of(r, rubric.trait(r.trait)) for r in raters if r.trait in rubric.trait_names]


@register_protocol("GEval", options=True)
def parse_name(name: str) -> GEvalProtocol | None:
    """``GEval`` or ``GEval[fallback=missing|parsed]``; None for other names."""
    if name == "GEval":
        return GEvalProtocol()
    m = _NAME.match(name)
    if m is None:
        return None
    if m.group(1) not in ("missing", "parsed"):
        raise ConfigError(f"GEval fallback must be missing or parsed, not {m.group(1)!r}")
    return GEvalProtocol(name, fallback="parsed" if m.group(1) == "parsed" else "missing")
