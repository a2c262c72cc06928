"""Per-essay trait scores read back from a run store, joined with the human scores."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from madrag.data.essay import Essay
from madrag.protocols.base import TraitScore
from madrag.protocols.consensus import record_namespaces, stored_trait_scores
from madrag.protocols.single_judge import expand_trait_scores
from madrag.protocols.trait_judge import combine_judges
from madrag.records import AgentRecord
from madrag.rubric import Rubric
from madrag.store import RunStore


def trait_scores(store: RunStore, rubric: Rubric, protocols: Sequence[str] | None = None) -> list[TraitScore]:
    """One TraitScore per (protocol, essay, trait) from the stored records: the Judge records of the seed 000
    protocols, and the final-round agent records of seed 002's consensus protocols (SingleJudge ... ScoreMaskedMAD,
    :func:`madrag.protocols.consensus.stored_trait_scores`). Those are found by the configured protocol names -
    ``protocols``, else the names in the store's configuration - because the shared round-0 calls
    (``consensus/init``) belong to every protocol that uses them."""
    groups: dict[tuple[str, str, str], list[AgentRecord]] = defaultdict(list)
    for record in store.records(role="judge"):
        groups[(record.protocol, record.essay_id, record.trait)].append(record)
    out: list[TraitScore] = []
    for (protocol, _essay, trait_name), records in groups.items():
        if trait_name == "*":  # one call scored every trait (SA, SARAG)
            out.extend(expand_trait_scores(records[0], rubric))
            continue
        records.sort(key=lambda r: r.index)
        out.append(combine_judges(protocol, rubric.trait(trait_name), records))
    names = list(protocols) if protocols is not None else configured_protocols(store)
    spaces = record_namespaces(names)
    if spaces:
        found = (r for space in sorted(spaces) for r in store.records(protocol=space))
        out.extend(stored_trait_scores(found, rubric, names))
    return out


def configured_protocols(store: RunStore) -> list[str]:
    """The protocol names of the run's stored configuration ([] when there is none)."""
    get_meta = getattr(store, "get_meta", None)
    config = get_meta("config") if get_meta is not None else None
    if not isinstance(config, dict):
        return []
    return [str(p["name"]) for p in config.get("protocols", []) if isinstance(p, dict) and "name" in p]


def score_rows(essays: list[Essay], scores: list[TraitScore], rubric: Rubric) -> list[dict[str, Any]]:
    """Flat rows (essay x trait x protocol) for CSV/JSONL export and tables."""
    by_id = {e.id: e for e in essays}
    rows = []
    for s in scores:
        essay = by_id.get(s.essay_id)
        trait = rubric.trait(s.trait)
        result = s.result
        rows.append(
            {
                "essay_id": s.essay_id,
                "protocol": s.protocol,
                "trait": s.trait,
                "score": s.score,
                "reference": essay.reference(trait) if essay else None,
                "rater1": essay.rater(trait.name, 0) if essay else None,
                "rater2": essay.rater(trait.name, 1) if essay else None,
                "score_mode": result.mode if result else "failed",
                "expected": None if result is None or result.expected is None else round(result.expected, 4),
                "distribution": None if result is None else result.distribution,
                "n_judges": s.n_judges,
                "rationale": s.rationale,
            }
        )
    return rows
