"""Scoring settings shared by every protocol (seed 000 A.2 defaults). Recorded with each run."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Anonymization = Literal["note", "none", "mask"]
ScoreMethod = Literal["auto", "constrained", "text"]
ReportFrom = Literal["parsed", "argmax", "expected"]
PromptLayout = Literal["shared_prefix", "seed"]
SaragExemplars = Literal["span", "similar"]


class ScoringSettings(BaseModel):
    """Sampling, score reading, prompt layout and every other scoring choice of a run, recorded in its
    configuration (a run resumes only with the same settings).

    Defaults are the papers' behaviour; each deliberate difference is an option (README, "Differences from the
    papers").
    """

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
    prompt_layout: PromptLayout = "seed"
    # the Judge is told "Check each claim against the essay text itself before you accept it." (the remedy seed
    # 000 E.3 leaves to future work; off by default)
    verify_claims: bool = False
    # SARAG's exemplars: "span" (seed 000 D: exemplars spanning the score range - one per level of the rubric's
    # first trait, nearest first, each shown with all its trait scores) or "similar" (the k most similar essays)
    sarag_exemplars: SaragExemplars = "span"
