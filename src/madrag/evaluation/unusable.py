"""Why a run's scores could not be read: every judge answer whose score is unusable, counted by cause, and the
essay-trait scores left missing, for the line ``madrag score`` ends a run with (e.g. "42 of 48 judge scores
unusable: 35 cut off at the token limit (--judge-max-tokens 64), 7 no 'Final score: N' line").

A judge answer is any agent call that gives a score: a Judge (per trait, or every trait in a ``Scores:`` block,
counted per trait), a consensus judge, a comparison of comparative judgment. Scores derived from other calls
(G-Eval's expectation, MTS's mean) are not answers of their own; their missing scores show in the essay-trait
count. A cause is what the record says: cut by the token limit (``truncated``; such an answer that repeats
itself is said to), else the reading's own problem (``error``)."""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from madrag.protocols.scores import TraitScore
from madrag.records import AgentRecord

_PREFIX = re.compile(r"^(?:unusable score(?: for [^:]*)?|unreadable comparison): ")
_KINDS = [
    (re.compile(r" \(got .*?\)(?=,|$)"), ""),  # the value a score step gave
    (re.compile(r"^two different closing scores: .*"), "two different closing scores"),
    (re.compile(r"^score \S+ is not an integer"), "a score that is not an integer"),
    (re.compile(r"^score \S+ outside"), "a score outside"),
]
"""What is left out of a reading's problem to name its cause (the values it found)."""
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
    text = _PREFIX.sub("", problem or record.error or "no score")
    for pattern, words in _KINDS:
        text = pattern.sub(words, text)
    return text.strip()


def _unusable(record: AgentRecord) -> tuple[int, list[str]]:
    """(scores the answer gives, the cause of each unusable one)."""
    if record.failed or record.context.get("derived"):
        return 0, []
    if record.trait_scores is not None:
        bad = [r for r in record.trait_scores.values() if r.reported is None]
        return len(record.trait_scores), [_cause(record, r.invalid_raw) for r in bad]
    if record.score is not None:
        return 1, [] if record.score.reported is not None else [_cause(record, record.score.invalid_raw)]
    if "outcome" in record.context:  # a comparison of comparative judgment
        return 1, [] if record.context["outcome"] is not None else [_cause(record, None)]
    return 0, []


@dataclass
class Unusable:
    """Judge answers' scores (``given``), the unusable ones by cause, and the essay-trait scores left missing of
    those expected (``missing`` of ``expected``)."""

    given: int = 0
    causes: Counter[str] = field(default_factory=Counter)
    missing: int = 0
    expected: int = 0

    @property
    def unusable(self) -> int:
        """Unusable judge scores."""
        return sum(self.causes.values())

    def line(self) -> str:
        """The run's closing line on its scores (empty when every score was read)."""
        if not self.unusable and not self.missing:
            return ""
        causes = ", ".join(f"{n} {cause}" for cause, n in self.causes.most_common())
        said = f"{self.unusable} of {self.given} judge scores unusable" + (f": {causes}" if causes else "")
        said += f". {self.missing} of {self.expected} essay-trait scores missing."
        if any(c.startswith("cut off") for c in self.causes):
            said += " Try a larger --judge-max-tokens, or --score-method constrained where the server takes a schema."
        return said


def unusable_scores(records: Iterable[AgentRecord], scores: list[TraitScore], expected: int) -> Unusable:
    """:class:`Unusable` of ``records`` (a run's, of the essays scored) and the job's final ``scores`` (of
    ``expected`` essay x trait x protocol: one without a score, or without a row, is missing)."""
    found = Unusable(expected=expected)
    for record in records:
        given, causes = _unusable(record)
        found.given += given
        found.causes.update(causes)
    found.missing = expected - sum(s.score is not None for s in scores)
    return found
