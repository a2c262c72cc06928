"""Why a run's scores could not be read: every judge answer whose score is unusable, counted by cause, and the
essay-trait scores left missing, counted by cause too, per protocol: counted once when a job ends and kept in
its store (:func:`store_accounts`), for the lines ``madrag score`` ends a run with, ``runs list`` and the report
(e.g. "MA: 42 of 48 judge scores unusable: 35 cut off at the token limit (--judge-max-tokens 64), 7 no 'Final
score: N' line. 42 of 48 essay-trait scores missing: ..."; "CJ: 21 of 24 comparisons unusable: 21 no 'Answer: A'
or 'Answer: B' line. ..."; "MTS: 3 of 3 essay-trait scores missing: 3 min-max over 3 essays has no range").

A judge answer is any agent call that gives a score: a Judge (per trait, or every trait in a ``Scores:`` block,
counted per trait), a consensus judge, MTS's score turn (its 0-10 score), a comparison of comparative judgment.
Scores computed from other calls (G-Eval's expectation, MTS's min-max) are not answers of their own, nor is a
record that holds no answer (CJ's ``compared`` mark, a score an earlier madrag stored as a record). A judge
answer's cause is what the record says: cut by the token limit (``truncated``, ``finish_reason == "length"``;
such an answer that repeats itself is said to), else the reading's own problem (``error``).

One vocabulary serves both counts: an essay-trait score left missing is named by the cause of the unusable
answer behind it (the score's own record, else the essay-trait's other unusable answers: a consensus judge cut
off at the token limit leaves its score missing as "cut off at the token limit", never "no score read"); only
where every answer behind it was read does the final score's own cause show (G-Eval's "no score distribution",
MTS's min-max without a range, CJ's anchors without a line), or "no answer" when a call failed after its retries.
A CJ comparison is its essay's answer (the essay against an anchor): an essay none of whose comparisons could be
read is missing for their cause."""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from madrag.errors import hint
from madrag.protocols.scores import TraitScore
from madrag.records import AgentRecord
from madrag.store import RunStore

_PREFIX = re.compile(r"^(?:unusable score(?: for [^:]*)?|unreadable comparison): ")
_KINDS = [
    (re.compile(r" \(got .*?\)(?=,|$)"), ""),  # the value a score step gave
    (re.compile(r"^two different closing scores: .*"), "two different closing scores"),
    (re.compile(r"^score \S+ is not an integer"), "a score that is not an integer"),
    (re.compile(r"^score \S+ outside"), "a score outside"),
]
"""What is left out of a reading's problem to name its cause (the values it found)."""
_CUT_AT = re.compile(r"^cut off at the token limit \(--judge-max-tokens (\d+)")
REPEAT_RATIO = 0.12
"""An answer "repeats itself" when the second half of its text compresses (zlib) below this share of its length:
looping output compresses to a few percent, prose to about half."""
REPEAT_MIN_CHARS = 200


def repeats_itself(text: str) -> bool:
    """Whether the answer's second half is one passage over and over (degenerate repetition)."""
    half = text[len(text) // 2 :].encode("utf-8")
    return len(half) >= REPEAT_MIN_CHARS and len(zlib.compress(half, 9)) < REPEAT_RATIO * len(half)


def _cause(record: AgentRecord, problem: str | None) -> str:
    """An unusable score's cause, in words shared by every answer with that cause (values left out)."""
    if record.truncated and record.settings.get("score_reading") != "schema":
        limit = record.settings.get("max_tokens")
        where = f"--judge-max-tokens {limit}" if limit is not None else "its limit"
        looping = ", repeating itself" if repeats_itself(record.text) else ""
        return f"cut off at the token limit ({where}{looping})"
    return _words(problem or record.error or "no score")


def _words(problem: str) -> str:
    """A reading's problem as its cause: its prefix and the values it found left out (:data:`_KINDS`)."""
    text = _PREFIX.sub("", problem)
    for pattern, words in _KINDS:
        text = pattern.sub(words, text)
    return text.strip()


def _unusable_by_trait(record: AgentRecord) -> tuple[int, list[tuple[str, str]]]:
    """(scores the answer gives, (trait, cause) of each unusable one)."""
    if record.failed or record.answers == 0:
        return 0, []
    if record.trait_scores is not None:
        bad = [(t, r) for t, r in record.trait_scores.items() if r.reported is None]
        return len(record.trait_scores), [(t, _cause(record, r.invalid_raw)) for t, r in bad]
    if "score_0_10" in record.context:  # an MTS score turn: its 0-10 score, None when unreadable
        return 1, [] if record.context["score_0_10"] is not None else [(record.trait, _cause(record, record.error))]
    if record.score is not None:
        problem = record.score.invalid_raw
        return 1, [] if record.score.reported is not None else [(record.trait, _cause(record, problem))]
    if "winner" in record.context:  # a comparison of comparative judgment
        return 1, [] if record.context["winner"] is not None else [(record.trait, _cause(record, None))]
    return 0, []


def _is_comparison(record: AgentRecord) -> bool:
    return "winner" in record.context and not record.failed


@dataclass
class Unusable:
    """Judge answers' scores (``given``; ``answers``: what they are, judge scores or comparisons), the unusable
    ones by cause, and the essay-trait scores left missing of those expected (``missing`` of ``expected``), by
    cause (``missing_causes``, when the caller gave the final scores' causes)."""

    given: int = 0
    causes: Counter[str] = field(default_factory=Counter)
    missing: int = 0
    expected: int = 0
    missing_causes: Counter[str] = field(default_factory=Counter)
    answers: str = "judge scores"

    @property
    def unusable(self) -> int:
        """Unusable judge scores."""
        return sum(self.causes.values())

    def as_dict(self) -> dict[str, Any]:
        """The account as JSON, as a run's store keeps it (meta ``unusable``)."""
        return {k: dict(v) if isinstance(v, Counter) else v for k, v in vars(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Unusable:
        """The account :meth:`as_dict` wrote."""
        kept: dict[str, Any] = {f.name: data[f.name] for f in fields(cls)}
        return cls(**kept | {k: Counter(kept[k]) for k in ("causes", "missing_causes")})

    def short(self) -> str:
        """A few words for a list of runs: "all read", or "21 of 24 comparisons unusable, 3 of 3 missing"."""
        parts = [f"{self.unusable} of {self.given} {self.answers} unusable"] if self.unusable else []
        if self.missing:
            parts.append(f"{self.missing} of {self.expected} missing")
        return ", ".join(parts) or "all read"

    def line(self) -> str:
        """The run's closing line on its scores (empty when every score was read)."""
        if not self.unusable and not self.missing:
            return ""
        said = ""
        if self.unusable:
            causes = ", ".join(f"{n} {cause}" for cause, n in self.causes.most_common())
            said = f"{self.unusable} of {self.given} {self.answers} unusable: {causes}. "
        said += f"{self.missing} of {self.expected} essay-trait scores missing"
        why = ", ".join(f"{n} {cause}" for cause, n in self.missing_causes.most_common())
        said += f": {why}." if why else "."
        if cut := [int(m.group(1)) for c in self.causes if (m := _CUT_AT.search(c))]:
            said += " " + hint("larger-judge-limit", larger=2 * max(cut))
        return said


NO_ANSWER = "no answer (a call failed after its retries)"
"""Why an essay-trait has no final score at all."""


def missing_cause(score: TraitScore | None, answers: Counter[str] | None = None) -> str:
    """Why a final score is missing: the cause of the unusable answers behind it (``answers``: the causes of
    the essay-trait's unusable judge answers, the score's own record's first), else the cause its result
    records (G-Eval's, MTS's, CJ's), or :data:`NO_ANSWER` when there is no score at all."""
    if score is None:
        return NO_ANSWER
    if answers:
        return answers.most_common(1)[0][0]
    problem = score.result.invalid_raw if score.result is not None else None
    return _words(problem) if problem else "no score read"


def unusable_by_protocol(
    records: Iterable[AgentRecord],
    scores: list[TraitScore],
    essay_ids: list[str],
    traits: list[str],
    protocols: Sequence[str] | Mapping[str, Iterable[str]],
) -> dict[str, Unusable]:
    """One :class:`Unusable` per protocol of the run: its judge answers' unusable scores by cause (a record
    counts for the protocols whose records it is: ``protocols`` maps each to its record groups,
    :func:`~madrag.protocols.base.record_groups`, a consensus protocol's rounds and its shared
    round 0; a list names protocols whose records carry their own name; a debate shared by MAD and MADRAG gives no
    score, so no count), and its essay-trait scores of ``essay_ids`` x ``traits`` left missing, by cause
    (:func:`missing_cause`, the answers behind each first)."""
    groups = (
        {p: set(protocols[p]) for p in protocols} if isinstance(protocols, Mapping) else {p: {p} for p in protocols}
    )
    found = {p: Unusable(expected=len(essay_ids) * len(traits)) for p in groups}
    behind: dict[tuple[str, str, str], Counter[str]] = {}  # (protocol, essay, trait): its answers' causes
    own: dict[tuple[str, str], str] = {}  # (record key, trait): the cause of that record's unusable score
    for record in records:
        mine = [p for p, spaces in groups.items() if record.protocol in spaces]
        if not mine:
            continue
        given, bad = _unusable_by_trait(record)
        for protocol in mine:
            found[protocol].given += given
            found[protocol].causes.update(cause for _, cause in bad)
            if _is_comparison(record):  # a comparison of CJ: of its essay (essay_id) with an anchor
                found[protocol].answers = "comparisons"
            for trait, cause in bad:
                for name in traits if trait == "*" else [trait]:
                    behind.setdefault((protocol, record.essay_id, name), Counter())[cause] += 1
                    own[(record.key, name)] = cause
    by_key = {(s.protocol, s.essay_id, s.trait): s for s in scores}
    for protocol, account in found.items():
        for essay_id in essay_ids:
            for trait in traits:
                score = by_key.get((protocol, essay_id, trait))
                if score is None or score.score is None:
                    account.missing += 1
                    account.missing_causes[missing_cause(score, _answers_behind(score, behind, own))] += 1
    return found


def _answers_behind(
    score: TraitScore | None, behind: dict[tuple[str, str, str], Counter[str]], own: dict[tuple[str, str], str]
) -> Counter[str] | None:
    """The causes of the unusable answers behind a missing ``score``: its own record's, else its essay-trait's."""
    if score is None:
        return None
    if (cause := own.get((score.record_key, score.trait))) is not None:
        return Counter({cause: 1})
    return behind.get((score.protocol, score.essay_id, score.trait))


META = "unusable"
"""The run store's meta key of the accounts of the run's last finished job (:func:`store_accounts`)."""


def store_accounts(store: RunStore, accounts: dict[str, Unusable]) -> None:
    """Keep ``accounts`` (per protocol) in the run's store: the summary, ``runs list`` and the report read them."""
    store.set_meta(META, {protocol: account.as_dict() for protocol, account in accounts.items()})


def stored_accounts(store: RunStore) -> dict[str, Unusable] | None:
    """The accounts a run's last finished job stored; None for a run that never finished one (or made before
    they were kept)."""
    found = store.get_meta(META)
    return None if found is None else {p: Unusable.from_dict(d) for p, d in found.items()}


def summary_lines(accounts: dict[str, Unusable]) -> list[str]:
    """One line per protocol whose scores were not all read (``PROTOCOL: ...``); none when every score was."""
    return [f"{protocol}: {line}" for protocol, account in accounts.items() if (line := account.line())]


MODELS = "models"
"""The run store's meta key of the models its last finished job's records asked for and their answers named."""


@dataclass
class ModelsNamed:
    """The models a job's records asked for and the models their answers named (a llama.cpp server answers as
    the model it runs under any name asked: ``--model gpt-4o-mini`` there is answered by ``smollm2``), counted
    as the records are read once for :func:`unusable_by_protocol`; kept in the store for ``runs list``."""

    answered: Counter[str] = field(default_factory=Counter)
    requested: Counter[str] = field(default_factory=Counter)

    def counting(self, records: Iterable[AgentRecord]) -> Iterator[AgentRecord]:
        """``records``, each counted as it passes."""
        for record in records:
            if not record.failed and record.model:
                self.answered[record.model] += 1
            if record.requested_model:
                self.requested[record.requested_model] += 1
            yield record

    def store(self, store: RunStore) -> None:
        """Keep the counts in ``store`` (meta :data:`MODELS`)."""
        store.set_meta(MODELS, {"answered": dict(self.answered), "requested": dict(self.requested)})


def models_words(store: RunStore) -> str | None:
    """The model a run's answers named, with the one asked for where it differs ("smollm2 (asked for
    gpt-4o-mini)"); None when its last finished job counted none (a run made before they were kept)."""
    found = store.get_meta(MODELS)
    if not isinstance(found, dict) or not found.get("answered"):
        return None
    named: Counter[str] = Counter(found["answered"])
    asked = [str(name) for name in found.get("requested") or {} if name not in named]
    answered = ", ".join(name for name, _ in named.most_common())
    return answered + (f" (asked for {', '.join(asked)})" if asked else "")
