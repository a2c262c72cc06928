"""What a run's rows are filled from, read once: its final scores, the Judge record behind each score and the
debate records those Judges read (their words, not their prompts or tokens). The Judge record behind a score is
its protocol's first Judge record of the essay-trait, else the record the score names when that record scored it
(G-Eval's rater, the screening Judge an adaptive debate kept).

The HTML report (:mod:`madrag.evaluation.report`: every essay's debate and rationale) and the MADRAG paper's
error export (``madrag errors``) read a run's sources this way."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

from madrag.evaluation.run import RunData, answer_only, open_store
from madrag.protocols.base import TraitScore
from madrag.records import AgentRecord
from madrag.store import RunStore


@dataclass(frozen=True)
class Sources:
    """What the rows are filled from: final scores, Judge records and the debate records they read."""

    scores: dict[tuple[str, str, str], TraitScore]
    judges: dict[tuple[str, str, str], AgentRecord]
    debates: dict[str, AgentRecord]

    @cached_property
    def debate_protocols(self) -> set[str]:
        """Protocols whose Judge read a debate transcript."""
        return {protocol for (protocol, _, _), judge in self.judges.items() if judge.context.get("debate")}


def first_judges(records: Iterable[AgentRecord]) -> dict[tuple[str, str, str], AgentRecord]:
    """The first Judge record (by its index) per (protocol, essay, trait) among ``records``."""
    judges: dict[tuple[str, str, str], AgentRecord] = {}
    for record in records:
        key = (record.protocol, record.essay_id, record.trait)
        if key not in judges or record.index < judges[key].index:
            judges[key] = record
    return judges


def essay_sources(store: RunStore, scores: dict[tuple[str, str, str], TraitScore], essay_ids: list[str]) -> Sources:
    """The sources of a few essays of a run (``scores``: the run's score map), their records read light in one
    query: what a reader going through a large run a few essays at a time holds (the HTML report)."""
    found = list(store.records_of(essay_ids, answers_only=True))
    by_key = {r.key: r for r in found}
    ids = set(essay_ids)
    mine = {k: s for k, s in scores.items() if k[1] in ids}
    judges = _named(first_judges(r for r in found if r.role == "judge" and not r.failed), mine, by_key.get)
    read = {str(k) for judge in judges.values() for k in judge.context.get("debate", []) or []}
    debates = {r.key: r for r in found if r.key in read}
    missing = read - set(debates)  # a debate of another essay's records (none in madrag's own protocols)
    debates.update({k: answer_only(r) for k in sorted(missing) if (r := store.get(k)) is not None})
    return Sources(scores, judges, debates)


def load_sources(run: RunData) -> Sources:
    """Scores, the first Judge record per (protocol, essay, trait) and the debate records those Judges read."""
    debates: dict[str, AgentRecord] = {}
    store = open_store(run.run_dir)
    try:
        scores, judges = run.score_map(), first_judges(run.judges)
        keys = [s.record_key for k, s in scores.items() if s.record_key and judge_for(judges, *k) is None]
        # those that scored, found by SQLite without parsing a record (a CJ or MTS run's rows name many that did not)
        scored = {key for key, found in store.each_record_fields({"score": "$.score"}, keys) if found["score"]}
        judges = _named(judges, scores, lambda key: store.get(key) if key in scored else None)
        for judge in judges.values():
            for debate_key in judge.context.get("debate", []) or []:
                if debate_key not in debates and (found := store.get(str(debate_key))) is not None:
                    debates[debate_key] = answer_only(found)  # the debate's words, not its prompt or tokens
    finally:
        store.close()
    return Sources(scores, judges, debates)


def _named(
    judges: dict[tuple[str, str, str], AgentRecord],
    scores: dict[tuple[str, str, str], TraitScore],
    find: Callable[[str], AgentRecord | None],
) -> dict[tuple[str, str, str], AgentRecord]:
    """``judges`` with, for each score that has none, the record the score names when that record scored it."""
    out = dict(judges)
    for key, score in scores.items():
        if score.record_key and judge_for(out, *key) is None:
            found = find(score.record_key)
            if found is not None and found.score is not None and not found.failed:
                out[key] = answer_only(found)
    return out


def judge_for(
    judges: dict[tuple[str, str, str], AgentRecord], protocol: str, essay_id: str, trait: str
) -> AgentRecord | None:
    """The Judge record behind a trait score: the trait's own, or the all-traits call of SA / SARAG (trait "*")."""
    return judges.get((protocol, essay_id, trait)) or judges.get((protocol, essay_id, "*"))


def debate_turns(judge: AgentRecord | None, debates: dict[str, AgentRecord]) -> list[AgentRecord]:
    """The debate records a Judge read, in the order it read them (empty for protocols without debate)."""
    if judge is None:
        return []
    return [debates[k] for k in judge.context.get("debate", []) or [] if k in debates]
