"""A protocol's final scores (:class:`TraitScore`) and how they are read from Judge records.

One rule serves a protocol as it scores and a run's reader afterwards, so a stored run gives exactly the
scores its protocols returned: a Judge record of one trait is that trait's score, several Judge records of a
trait (MA with n judges) are averaged by :func:`combine_judges`, and a Judge record of every trait (trait
``"*"``: SA, SARAG) gives one score per rubric trait (:func:`expand_trait_scores`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from madrag.metrics import round_half_up_clamped
from madrag.records import AgentRecord, TraitScore
from madrag.rubric import Rubric, Trait

__all__ = ["ALL_TRAITS", "TraitScore", "combine_judges", "expand_trait_scores", "judge_scores"]

ALL_TRAITS = "*"
"""The trait field of a call that scores every trait at once."""


def combine_judges(protocol: str, trait: Trait, records: list[AgentRecord]) -> TraitScore:
    """One judge's score as it is; several judges' usable scores averaged (MA with n judges) when at least the
    recorded minimum of them is usable (``context["judges"]["min_usable"]``; all of them when not recorded),
    else missing. Either way the number of usable judges is kept."""
    valid = [r.score.reported for r in records if r.score is not None and r.score.reported is not None]
    first = records[0]
    one = TraitScore(
        essay_id=first.essay_id,
        trait=trait.name,
        protocol=protocol,
        score=valid[0] if valid else None,
        result=first.score,
        rationale=first.rationale or "",
        record_key=first.key,
        n_usable=len(valid),
        truncated=any(r.truncated for r in records),
    )
    if len(records) == 1:
        return one
    policy = first.context.get("judges")
    needed = int(policy.get("min_usable", len(records))) if isinstance(policy, dict) else len(records)
    mean = sum(valid) / len(valid) if valid and len(valid) >= needed else None
    return one.model_copy(
        update={
            "score": None if mean is None else round_half_up_clamped(mean, trait.min, trait.max),
            "rationale": "\n---\n".join(r.rationale or "" for r in records),
            "record_keys": [r.key for r in records],
            "n_judges": len(records),
            "mean_score": mean,
        }
    )


def expand_trait_scores(record: AgentRecord, rubric: Rubric, protocol: str | None = None) -> list[TraitScore]:
    """One TraitScore per rubric trait from a call that scored every trait (a trait it did not score: None),
    under ``protocol`` (default: the record's own protocol)."""
    results = record.trait_scores or {}
    return [
        TraitScore(
            essay_id=record.essay_id,
            trait=t.name,
            protocol=record.protocol if protocol is None else protocol,
            score=results[t.name].reported if t.name in results else None,
            result=results.get(t.name),
            rationale=record.rationale or "",
            record_key=record.key,
            truncated=record.truncated,
        )
        for t in rubric.traits
    ]


def judge_scores(records: Iterable[AgentRecord], rubric: Rubric) -> list[TraitScore]:
    """The TraitScores of Judge records (the rule of the module docstring), grouped by (protocol, essay,
    trait) in the order first seen; failed records (no answer after their retries) give none."""
    groups: dict[tuple[str, str, str], list[AgentRecord]] = defaultdict(list)
    for record in records:
        if not record.failed:
            groups[(record.protocol, record.essay_id, record.trait)].append(_score_part(record))
    out: list[TraitScore] = []
    for (protocol, _essay, trait_name), group in groups.items():
        if trait_name == ALL_TRAITS:
            out.extend(expand_trait_scores(group[0], rubric))
            continue
        group.sort(key=lambda r: r.index)
        out.append(combine_judges(protocol, rubric.trait(trait_name), group))
    return out


def _score_part(record: AgentRecord) -> AgentRecord:
    """What a score is read from (:func:`combine_judges`, :func:`expand_trait_scores`): the record without its
    prompt, answer text and tokens, so the records of a large run are not all held while they are grouped."""
    context = {"judges": record.context["judges"]} if "judges" in record.context else {}
    return record.model_copy(update={"messages": [], "tokens": None, "text": "", "context": context})
