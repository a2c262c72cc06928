"""CJ's scores read from a run's stored comparisons: the two steps of :mod:`madrag.protocols.cj` over one trait.

Each essay whose comparisons are complete has a ``compared`` record listing them (``context["from"]``); each
comparison record names its anchor (``anchor``, ``anchor_score``) and its winner (``essay``, ``anchor``, or
None when the answer could not be read). Items of the fit are essays by id: an anchor is the pool essay it is,
whichever essays it was compared with.
"""

from __future__ import annotations

from collections.abc import Sequence

from madrag.metrics import round_half_up_clamped
from madrag.protocols.bradley_terry import fit_strengths, score_at
from madrag.protocols.scores import TraitScore
from madrag.records import AgentRecord, ScoreResult
from madrag.rubric import Trait

COMPARED_ROLE = "compared"
"""The role of the record that an essay's comparisons on a trait are complete (no request)."""


def comparison_pairs(
    marks: Sequence[AgentRecord], compares: Sequence[AgentRecord]
) -> tuple[list[tuple[str, str]], dict[str, float]]:
    """The (winner id, loser id) pairs of the complete essays' readable comparisons, and each anchor's known
    score."""
    wanted = {key for mark in marks for key in mark.context.get("from", [])}
    pairs: list[tuple[str, str]] = []
    anchor_scores: dict[str, float] = {}
    for record in compares:
        if record.key not in wanted or record.failed:
            continue
        anchor = str(record.context["anchor"])
        anchor_scores[anchor] = float(record.context["anchor_score"])
        winner = record.context.get("winner")
        if winner == "essay":
            pairs.append((record.essay_id, anchor))
        elif winner == "anchor":
            pairs.append((anchor, record.essay_id))
    return pairs, anchor_scores


def fit_trait(
    protocol: str, trait: Trait, marks: Sequence[AgentRecord], compares: Sequence[AgentRecord]
) -> list[TraitScore]:
    """One TraitScore per complete essay of ``trait``: step 1, Bradley-Terry strengths over every pair; step 2,
    the anchors' scores regressed on their strengths, read at the essay's strength, rounded half up and
    clamped (missing, with the reason, when the essay has no readable comparison or the anchors' strengths do
    not vary)."""
    pairs, anchor_scores = comparison_pairs(marks, compares)
    ids = sorted({i for pair in pairs for i in pair})  # an item without a readable comparison has no strength
    index = {item: n for n, item in enumerate(ids)}
    strengths = fit_strengths(len(ids), [(index[w], index[lo]) for w, lo in pairs])
    anchors = [a for a in sorted(anchor_scores) if a in index]
    xs = [float(strengths[index[a]]) for a in anchors]
    ys = [anchor_scores[a] for a in anchors]
    out: list[TraitScore] = []
    for mark in marks:
        fine = score_at(float(strengths[index[mark.essay_id]]), xs, ys) if mark.essay_id in index else None
        if mark.essay_id not in index:
            result = ScoreResult(mode="failed", invalid_raw="no readable comparison")
        elif fine is None:
            result = ScoreResult(mode="failed", invalid_raw="the anchors' strengths do not vary: no line to read")
        else:
            value = round_half_up_clamped(fine, trait.min, trait.max)
            result = ScoreResult(parsed=value, reported=value, mode="parsed_text")
        usable = mark.context.get("n_usable")
        out.append(
            TraitScore(
                essay_id=mark.essay_id,
                trait=trait.name,
                protocol=protocol,
                score=result.reported,
                result=result,
                rationale=mark.rationale or "",
                record_key=mark.key,
                n_usable=int(usable) if isinstance(usable, int) else None,
                mean_score=fine,
                truncated=mark.truncated,
            )
        )
    return out
