"""Scoring settings shared by every protocol (the MADRAG paper's A.2 defaults). Recorded with each run.

:class:`ScoringSettings` is the one home of a setting: its type, default, bounds and description here are what
``madrag score``'s options are generated from (:mod:`madrag.cli.groups`), what the Python API and the web app
accept, and what a run's configuration records. A setting added later reads, in the configuration of a run made
before it existed, as the value that reproduces that run's behaviour (:func:`stored_settings`): its default, or
the value its field names with ``json_schema_extra={"before": value}`` when the default changes what runs did.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from madrag.metrics import PAPER_TIES, TieRule

# each Literal lists its values in the order the CLI's errors and help name them
Placeholders = Literal["note", "mask", "none"]
EvidenceCheck = Literal["record", "feedback", "off"]
ScoreMethod = Literal["auto", "constrained", "text"]
ReportFrom = Literal["parsed", "argmax", "expected"]
PromptLayout = Literal["seed", "shared_prefix"]
SaragExemplars = Literal["span", "similar"]
JudgeExemplars = Literal["nearest", "anchors"]


class ScoringSettings(BaseModel):
    """Sampling, score reading, prompt layout and every other scoring choice of a run, recorded in its
    configuration (a run resumes only with the same settings).

    Defaults are the papers' behaviour; each deliberate difference is an option (the docs' "Differences from the
    papers" page, ``docs/differences.md``). Each field's description is its ``madrag score`` option's help.
    """

    model_config = ConfigDict(frozen=True)

    debater_temperature: float = Field(
        default=0.7, ge=0.0, le=2.0, description="Sampling temperature of Advocate/Skeptic messages."
    )
    judge_temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="Sampling temperature of the Judge.")
    # large enough that the papers' own example answers (500 tokens and more) are not cut
    debater_max_tokens: int = Field(
        default=1024,
        ge=1,
        description="Token limit of Advocate/Skeptic messages (a cut answer is recorded as truncated).",
    )
    judge_max_tokens: int = Field(
        default=1024, ge=1, description="Token limit of the Judge's answer (a cut answer is recorded as truncated)."
    )
    seed: int | None = Field(default=1234, description="Sampling seed.")
    top_logprobs: int = Field(
        default=5, ge=0, le=20, description="Alternatives per token asked for with logprobs (score probabilities)."
    )
    # ASAP's anonymization placeholders: the confidence paper's Appendix C ends each role's system prompt with
    # "Anonymization
    # $ANON_CONTEXT", instructions to ignore them (4.4); "none" is what madrag did before
    placeholders: Placeholders = Field(
        default="note",
        description="ASAP placeholders (@CAPS1...): note (default, the papers' prompts: each role's system prompt "
        "ends with an anonymization note saying what they are and to ignore them), mask (shown as neutral words "
        "like [name], which the note explains) or none (no note).",
    )
    # the MADRAG paper C3; "record" makes no extra call
    evidence_check: EvidenceCheck = Field(
        default="record",
        description="Quotes in debater and Judge answers checked against the essay: record (counts per call, no "
        "extra call; default), feedback (also tells the Judge which debate quotes are not in the essay) or off.",
    )
    # "constrained" needs prefill+choices or a server that honours a JSON schema; "auto": constrained when the
    # backend has prefill+choices (the embedded model), else the text (the MADRAG paper's A.5's parse-or-missing)
    score_method: ScoreMethod = Field(
        default="auto",
        description="How the Judge's score is read: constrained (rationale, then the score token restricted to "
        "valid scores with their probabilities; on an OpenAI-compatible server that honours a JSON schema, such as "
        "llama.cpp's or vLLM's, the score asked for in a second request limited to the valid integers), text (the "
        "Final score line) or auto (constrained on backends with prefill and choices, such as the embedded model, "
        "else text).",
    )
    report: ReportFrom = Field(default="parsed", description="Reported judge score: parsed, argmax or expected.")
    # off by default: the MADRAG paper's A.5 records such a score as missing
    score_followup: bool = Field(
        default=False,
        description="Text reading: ask once more when a Judge's score cannot be read (default: missing, the MADRAG "
        "paper's A.5).",
    )
    exemplar_max_words: int | None = Field(
        default=None, description="Shorten exemplars in prompts (default: shown whole)."
    )
    judges_per_trait: int = Field(default=1, ge=1, description="MA: independent judges averaged per trait.")
    # recorded in each judge's record (context["judges"])
    min_usable_judges: int | None = Field(
        default=None,
        ge=1,
        description="MA with several judges: usable judges a trait needs to be scored (default: all of them).",
    )
    # "shared_prefix": one system message for every role, then the essay, the trait, the role's instructions (same
    # wording), so all calls of an essay share a long prefix that servers with prefix caching reuse
    prompt_layout: PromptLayout = Field(
        default="seed",
        description="seed (the papers' layout: the role's instructions are the system message; default) or "
        "shared_prefix (essay first, one system message for every role: a cost option for prefix caching).",
    )
    # the remedy the MADRAG paper's E.3 leaves to future work
    verify_claims: bool = Field(
        default=False,
        description="Tell the Judge to check each claim against the essay text (the MADRAG paper's E.3's future "
        "work; off).",
    )
    # "span": the MADRAG paper D, one exemplar per level of the rubric's first trait, nearest first, each with all
    # its scores
    sarag_exemplars: SaragExemplars = Field(
        default="span",
        description="SARAG's exemplars: span (one per score level, the MADRAG paper; default) or similar (the k "
        "most similar).",
    )
    # a third of ASAP's set 7 and 8 labels are such ties; the MADRAG paper's B.5 names no tie rule
    reference_ties: TieRule = Field(
        default=PAPER_TIES,
        description="How a reference label rounds a raters' mean halfway between two scores (2.5), for the "
        "exemplars' labels and the run's evaluation: half_up (default; the MADRAG paper's B.5 gives no tie rule), "
        "half_even "
        "or half_down.",
    )
    judge_exemplars: JudgeExemplars = Field(
        default="nearest",
        description="MARAG/MADRAG Judge's exemplars: nearest (per score level the pool essay nearest the essay, "
        "after it; the MADRAG paper, default) or anchors (one fixed pool essay per level, its medoid, recorded in "
        "the run "
        "and shown before the essay: every essay's Judge calls share the prompt prefix; a cost option).",
    )
    # None debates every trait (the papers); a threshold t: the debate-free Judge (MA's, MARAG's) scores first,
    # and the debate and its Judge run only when that Judge's top score probability is below t (or unknown)
    adaptive_debate: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        description="MAD/MADRAG: debate a trait only when the debate-free Judge's top score probability is below "
        "this threshold in (0, 1] (or unknown); else keep that Judge's score (default: debate every trait, the "
        "papers).",
    )

    @model_validator(mode="after")
    def _judges_fit(self) -> ScoringSettings:
        if self.min_usable_judges is not None and self.min_usable_judges > self.judges_per_trait:
            raise ValueError(
                f"min_usable_judges ({self.min_usable_judges}) exceeds judges_per_trait ({self.judges_per_trait})"
            )
        return self

    @property
    def usable_judges_needed(self) -> int:
        """How many of MA's judges must be usable: the stated minimum, else all of them."""
        return self.min_usable_judges or self.judges_per_trait


def value_before(model: type[BaseModel], name: str) -> Any:
    """The value of setting ``name`` that reproduces what runs did before it existed: the ``"before"`` its field
    declares (``json_schema_extra={"before": value}``), else its default."""
    field = model.model_fields[name]
    extra = field.json_schema_extra
    if isinstance(extra, dict) and "before" in extra:
        return extra["before"]
    return field.get_default(call_default_factory=True)


def stored_settings(stored: dict[str, Any], model: type[BaseModel] = ScoringSettings) -> dict[str, Any]:
    """A run's recorded settings with every field of ``model`` it lacks (a setting added after the run was made)
    filled by :func:`value_before`, in the model's order, then any key the model does not know (kept, so a
    setting this code lacks still tells the runs apart)."""
    filled = {name: stored[name] if name in stored else value_before(model, name) for name in model.model_fields}
    return {**filled, **{k: v for k, v in stored.items() if k not in filled}}
