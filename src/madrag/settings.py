"""Scoring settings shared by every protocol (seed 000 A.2 defaults). Recorded with each run."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Anonymization = Literal["note", "none", "mask"]
ScoreMethod = Literal["auto", "constrained", "text"]
ReportFrom = Literal["parsed", "argmax", "expected"]
PromptLayout = Literal["shared_prefix", "seed"]


class ScoringSettings(BaseModel):
    """Sampling, score reading and prompt layout of every agent call of a run (seed 000 A.2 defaults)."""

    model_config = ConfigDict(frozen=True)

    debater_temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    judge_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    debater_max_tokens: int = Field(default=400, ge=1)
    judge_max_tokens: int = Field(default=400, ge=1)
    seed: int | None = 1234
    top_logprobs: int = Field(default=5, ge=0, le=20)
    anonymization: Anonymization = "note"
    # how the Judge's score position is read: "constrained" (rationale, then the score token restricted to
    # valid scores with their probabilities; needs prefill+choices), "text" (parse the Final score line,
    # one follow-up request if it is missing), "auto" (constrained when the backend supports it)
    score_method: ScoreMethod = "auto"
    report: ReportFrom = "parsed"
    exemplar_max_words: int | None = None  # None: exemplars are shown whole
    judges_per_trait: int = Field(default=1, ge=1)  # MA with n > 1 averages n independent judges
    # "seed": each role's instructions are its system message (the seeds' layout); "shared_prefix": one system
    # message for every role, then the essay, then the trait, then the role's instructions (same wording), so
    # all calls of an essay share a long common prefix that servers with prefix caching reuse
    prompt_layout: PromptLayout = "shared_prefix"
