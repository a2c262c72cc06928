"""Scoring settings shared by every protocol (seed 000 A.2 defaults). Recorded with each run."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from madrag.metrics import PAPER_TIES, TieRule

Placeholders = Literal["note", "none", "mask"]
EvidenceCheck = Literal["off", "record", "feedback"]
ScoreMethod = Literal["auto", "constrained", "text"]
ReportFrom = Literal["parsed", "argmax", "expected"]
PromptLayout = Literal["shared_prefix", "seed"]
SaragExemplars = Literal["span", "similar"]
JudgeExemplars = Literal["nearest", "anchors"]


class ScoringSettings(BaseModel):
    """Sampling, score reading, prompt layout and every other scoring choice of a run, recorded in its
    configuration (a run resumes only with the same settings).

    Defaults are the papers' behaviour; each deliberate difference is an option (README, "Differences from the
    papers").
    """

    model_config = ConfigDict(frozen=True)

    debater_temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    judge_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    # large enough that the papers' own example answers (500 tokens and more) are not cut; a cut answer is
    # recorded as truncated
    debater_max_tokens: int = Field(default=1024, ge=1)
    judge_max_tokens: int = Field(default=1024, ge=1)
    seed: int | None = 1234
    top_logprobs: int = Field(default=5, ge=0, le=20)
    # ASAP's anonymization placeholders (@CAPS1 ...): "note" (the papers' prompts: seed 001 Appendix C ends each
    # role's system prompt with "Anonymization $ANON_CONTEXT", instructions to ignore them, 4.4), "mask" (each
    # shown as a neutral word such as [name], which the note explains), "none" (no label and no context: nothing
    # said about them, as madrag's default was before)
    placeholders: Placeholders = "note"
    # quoted evidence in Advocate, Skeptic and Judge answers checked against the essay (seed 000 C3): "record"
    # counts quotes found / verified / unverified per call (no extra call), "feedback" also tells the Judge which
    # debate quotes were not found in the essay, "off" checks nothing
    evidence_check: EvidenceCheck = "record"
    # how the Judge's score position is read: "constrained" (rationale, then the score token restricted to
    # valid scores with their probabilities; needs prefill+choices), "text" (parse the Final score line),
    # "auto" (constrained when the backend supports it)
    score_method: ScoreMethod = "auto"
    report: ReportFrom = "parsed"
    # text reading: when an answer's score cannot be read, ask once more for it (a follow-up request). Off by
    # default: seed 000 A.5 records such a score as missing
    score_followup: bool = False
    exemplar_max_words: int | None = None  # None: exemplars are shown whole
    judges_per_trait: int = Field(default=1, ge=1)  # MA with n > 1 averages n independent judges
    # MA with n > 1: how many judges must give a usable score for the trait to be scored (None: all of them);
    # below it the trait's score is missing. Recorded in each judge's record (context["judges"])
    min_usable_judges: int | None = Field(default=None, ge=1)
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
    # a human reference label whose raters' mean is halfway between two scores (2.5; a third of ASAP's set 7 and
    # 8 labels): "half_up" (3; seed 000 B.5 names no tie rule), "half_even" (to the even score), "half_down".
    # Applies to the exemplar labels of the run and is what its evaluation uses unless told otherwise
    reference_ties: TieRule = PAPER_TIES
    # the per-trait Judge's exemplars (MARAG, MADRAG): "nearest" (seed 000 procedure 2: per score level the pool
    # essay nearest to the essay scored, shown after it) or "anchors" (anchor papers: per score level one fixed
    # pool essay, the level's medoid, chosen once and recorded in the run, shown before the essay, so every
    # essay's Judge calls of a trait share one long prompt prefix for servers with prefix caching)
    judge_exemplars: JudgeExemplars = "nearest"
    # adaptive debate (MAD, MADRAG): None debates every trait (the papers). A threshold t: the debate-free Judge
    # (MA's, MARAG's) scores first, and the debate and its Judge run only when that Judge's top score probability
    # is below t (or unknown); otherwise its score is the trait's score
    adaptive_debate: float | None = Field(default=None, gt=0.0, le=1.0)

    @model_validator(mode="after")
    def _judges_fit(self) -> ScoringSettings:
        if self.min_usable_judges is not None and self.min_usable_judges > self.judges_per_trait:
            raise ValueError(
                f"min_usable_judges ({self.min_usable_judges}) exceeds judges_per_trait ({self.judges_per_trait})"
            )
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Every field, but ``reference_ties``, ``judge_exemplars`` and ``adaptive_debate`` only when not the
        default: runs made before they existed resume."""
        out: dict[str, Any] = handler(self)
        if self.reference_ties == PAPER_TIES:
            out.pop("reference_ties", None)
        if self.judge_exemplars == "nearest":
            out.pop("judge_exemplars", None)
        if self.adaptive_debate is None:
            out.pop("adaptive_debate", None)
        return out

    @property
    def usable_judges_needed(self) -> int:
        """How many of MA's judges must be usable: the stated minimum, else all of them."""
        return self.min_usable_judges or self.judges_per_trait
