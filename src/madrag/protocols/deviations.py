"""Every way madrag differs from the papers it implements, by name: the rows of docs/differences.md.

The three papers: MADRAG (the MADRAG paper), the early-token confidence paper, "Beyond consensus" (the consensus
paper); the two peers: comparative judgment (Kim & Jo 2024, CJ) and multi-trait specialization (Lee et al. 2024,
MTS). Each :class:`Deviation` has an ``id`` that is the first cell of its row in docs/differences.md, and names
what it is about: protocol names (``MTS[reading=integer]``), scoring settings (``setting:placeholders``, the
field of :class:`madrag.settings.ScoringSettings`, ``--placeholders`` on the command line) and command options
(``--reference``). ``tests/unit/protocols/test_deviations.py`` checks that every row is here and every entry has
its row, that each name it gives is in its row, and that every protocol name madrag offers and every scoring
setting is named by a row or by :data:`AS_THE_PAPERS` (what follows a paper, with where): a new option or
default cannot be added without saying whether it differs from a paper.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deviation:
    """One row of docs/differences.md: its id, the paper or peer it differs from, what it names."""

    id: str
    source: str
    names: tuple[str, ...] = ()


MADRAG = "the MADRAG paper"
CONFIDENCE = "the early-token confidence paper"
CONSENSUS = "Beyond consensus (the consensus paper)"
CJ = "Kim & Jo 2024 (CJ)"
MTS = "Lee et al. 2024 (MTS)"

DEVIATIONS: tuple[Deviation, ...] = (
    Deviation("verify-claims", MADRAG, ("setting:verify_claims",)),
    Deviation("prompt-layout", MADRAG, ("setting:prompt_layout",)),
    Deviation("consensus-reference", CONSENSUS, ("--reference",)),
    Deviation("sarag-exemplars", MADRAG, ("setting:sarag_exemplars",)),
    Deviation(
        "transcript-variants",
        MADRAG,
        tuple(f"MADRAG[{v}_r{r}]" for v in ("skp", "both", "skponly", "split") for r in (1, 2)),
    ),
    Deviation("scored-essays", MADRAG, ("--fold",)),
    Deviation("evidence-check", MADRAG, ("setting:evidence_check",)),
    Deviation("placeholders", CONFIDENCE, ("setting:placeholders",)),
    Deviation("added-wording", MADRAG, ("--prompts-dir",)),
    Deviation("merged-sets", MADRAG),
    Deviation("judge-score-reading", MADRAG),
    Deviation("error-export-rows", MADRAG, ("--protocol",)),
    Deviation("reference-ties", MADRAG, ("setting:reference_ties",)),
    Deviation("confidence-ranking", CONFIDENCE, ("--rank-by",)),
    Deviation("essay-embedding", MADRAG, ("--embedder",)),
    Deviation("bank-store", MADRAG),
    Deviation("summeval-systems", CONSENSUS),
    Deviation("nikl-layout", CONSENSUS),
    Deviation("meta-pass", CONFIDENCE),
    Deviation("geval-distribution", MADRAG, ("GEval",)),
    Deviation("cj", CJ, ("CJ", "CJ_F", "CJ[anchors=medoid]", "CJ[comparisons=2]")),
    Deviation("mts-rubric-traits", MTS, ("MTS", "MTS[variant=madrag-v1]")),
    Deviation("mts-reading", MTS, ("MTS[reading=integer]",)),
    Deviation("mts-template", MTS, ("MTS[template=FILE]", "MTS[template=FILE,group=run]")),
    Deviation("mts-repetition-penalty", MTS),
    Deviation("failed-calls", MADRAG, ("--max-failures", "--fail-fast")),
    Deviation("unreadable-score", MADRAG, ("setting:score_followup",)),
    Deviation("score-method", MADRAG, ("setting:score_method",)),
    Deviation("ma-judges", MADRAG, ("setting:judges_per_trait", "setting:min_usable_judges")),
    Deviation("token-limits", MADRAG, ("setting:debater_max_tokens", "setting:judge_max_tokens")),
    Deviation("confidence-truncated", CONFIDENCE),
    Deviation("reasoning-models", MADRAG, ("--token-param", "--sampling-params")),
    Deviation("consensus-answer-format", CONSENSUS),
    Deviation("judge-exemplars", MADRAG, ("setting:judge_exemplars",)),
    Deviation("runtime", MADRAG, ("--runtime",)),
    Deviation("adaptive-debate", MADRAG, ("setting:adaptive_debate",)),
    Deviation("constrained-score", MADRAG),
    Deviation("ma-judge-sampling", MADRAG, ("--debater-temperature",)),
    Deviation("shared-debate", MADRAG),
    Deviation("geval-prompt", MADRAG, ("setting:top_logprobs",)),
    Deviation("consensus-prompts-scale", CONSENSUS),
    Deviation("feateng-features", MADRAG, ("--features",)),
    Deviation("consensus-shared-round0", CONSENSUS, ("StrictJudge", "LenientJudge", "ConsensusMAD", "ScoreMaskedMAD")),
    Deviation("nikl-sample", CONSENSUS),
    Deviation("consensus-pooled-metrics", CONSENSUS),
    Deviation("confidence-windows", CONFIDENCE),
    Deviation("debater-temperature", CONFIDENCE, ("setting:debater_temperature",)),
    Deviation("extreme-both", MADRAG),
    Deviation("exemplar-length", MADRAG, ("setting:exemplar_max_words",)),
    Deviation("meta-eval-tokens", CONFIDENCE, ("--max-tokens",)),
    Deviation("meta-eval-followup", CONFIDENCE, ("--method",)),
    Deviation("consensus-bootstrap", CONSENSUS, ("--bootstrap",)),
    Deviation("sarag-k", MADRAG, ("--sarag-exemplars",)),
    Deviation("nikl-prompt", CONSENSUS),
    Deviation("cj-fold-each", CJ, ("--fold",)),
)
"""The rows of docs/differences.md."""

AS_THE_PAPERS: dict[str, str] = {
    "SA": "the MADRAG paper's Appendix D",
    "SARAG": "the MADRAG paper's Appendix D",
    "MA": "the MADRAG paper's 4.2.1 and Appendix D (several judges: row ma-judges)",
    "MAD": "the MADRAG paper's Algorithm 1 (its shared debate: row shared-debate)",
    "MARAG": "the MADRAG paper's Appendix D",
    "MADRAG": "the MADRAG paper's Algorithm 1",
    "MADRAG[adv_r1]": "the MADRAG paper's Tables 7-8, Adv. (R1): MADRAG itself",
    "MADRAG[adv_r2]": "the MADRAG paper's Tables 7-8, Adv. (R2)",
    "SingleJudge": "the consensus paper's Single Judge",
    "SymmetricMAD": "the consensus paper's Symmetric MAD",
    "setting:judge_temperature": "the MADRAG paper's A.2: the Judge at temperature 0.0",
    "setting:seed": "no paper gives a seed: a run's own, recorded",
    "setting:report": "the MADRAG paper's A.5: the parsed score (argmax and expected are other readings of it)",
}
"""Protocol names and scoring settings that follow a paper (or that no paper fixes), with where."""
