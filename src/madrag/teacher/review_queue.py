"""Which trait scores a teacher should look at first: essay-traits ranked by how likely their score is wrong.

Four signals, each from 0 (no doubt) to 1 (much doubt), read from what the agents answered:

* **spread**: the Judge's score distribution is wide (its standard deviation over half the scale's range) or
  its two likeliest scores are close (1 when equally likely, 0 when half the mass or more lies between them);
* **balanced debate**: the Advocate and the Skeptic were about equally sure (1 minus the gap between their
  confidences), so the Judge had to break a tie;
* **unverified quotes**: the agents quoted text that is not in the essay (one is enough);
* **protocols disagree**: other protocols gave the same essay-trait a different score (the gap over the range).

A score that could not be read at all ranks first. A signal that could not be read (no distribution, no
confidences) is left out rather than counted as certain; the doubt is the weighted mean of the signals known.
An item is *flagged* when the spread or the unverified quotes reach :data:`FLAG_AT`, when protocols disagree at
all, or when it has no score; a balanced debate alone raises the doubt but flags nothing (every debate of a
well-matched pair is balanced), so it is a *note*, not a reason: an item is flagged exactly when it has a reason
to look, and the queue's count of the items that need a look is the count of the items listing one. The others
are *agreeing* and can be approved in one click.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

WEIGHTS = {"spread": 0.4, "debate": 0.2, "quotes": 0.2, "protocols": 0.2}
FLAG_AT = 0.6
FLAGGING = ("spread", "quotes")


@dataclass(frozen=True)
class ItemSignals:
    """What is known about one essay-trait score (``score`` None: no valid score)."""

    essay_id: str
    trait: str
    score: int | None
    lo: int
    hi: int
    distribution: dict[int, float] | None = None
    advocate_confidence: float | None = None
    skeptic_confidence: float | None = None
    unverified_quotes: int | None = None
    other_scores: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class QueueItem:
    """A ranked essay-trait: its doubt (0..1, None where nothing could be read), signals and reasons."""

    essay_id: str
    trait: str
    score: int | None
    doubt: float | None
    signals: dict[str, float]
    reasons: list[str]  # why to look (non-empty exactly when flagged)
    flagged: bool
    notes: list[str] = field(default_factory=list)  # what raised the doubt without being a reason to look


def spread(distribution: dict[int, float] | None, lo: int, hi: int) -> float | None:
    """The distribution's standard deviation over half the range (1: as wide as a scale can be)."""
    if not distribution or hi <= lo:
        return None
    total = sum(distribution.values())
    if total <= 0:
        return None
    mean = sum(s * p for s, p in distribution.items()) / total
    var = sum(p * (s - mean) ** 2 for s, p in distribution.items()) / total
    top = [*sorted((p / total for p in distribution.values()), reverse=True), 0.0]
    close = max(0.0, 1.0 - (top[0] - top[1]) / 0.5)
    return min(1.0, max(math.sqrt(var) / ((hi - lo) / 2), close))


def _signals(item: ItemSignals) -> dict[str, float]:
    out: dict[str, float] = {}
    width = spread(item.distribution, item.lo, item.hi)
    if width is not None:
        out["spread"] = width
    if item.advocate_confidence is not None and item.skeptic_confidence is not None:
        out["debate"] = 1.0 - min(1.0, abs(item.advocate_confidence - item.skeptic_confidence))
    if item.unverified_quotes is not None:
        out["quotes"] = min(1.0, float(item.unverified_quotes))
    if item.other_scores and item.score is not None and item.hi > item.lo:
        gap = max(abs(item.score - s) for s in item.other_scores)
        out["protocols"] = min(1.0, gap / (item.hi - item.lo))
    return out


def _reasons(item: ItemSignals, signals: dict[str, float]) -> list[str]:
    reasons = []
    if item.score is None:
        reasons.append("no valid score: the Judge's answer could not be read")
    if signals.get("spread", 0) >= FLAG_AT and item.distribution:
        top = sorted(item.distribution, key=lambda s: -item.distribution[s])[:2]  # type: ignore[index]
        reasons.append(f"the Judge was torn between {min(top)} and {max(top)}")
    if item.unverified_quotes:
        n = item.unverified_quotes
        reasons.append(f"{n} quote{'s' if n != 1 else ''} not found in the essay")
    if signals.get("protocols", 0) > 0 and item.score is not None:
        others = ", ".join(str(s) for s in sorted(set(item.other_scores)))
        reasons.append(f"another method scored it {others}, not {item.score}")
    return reasons


def _notes(signals: dict[str, float]) -> list[str]:
    if signals.get("debate", 0) >= 1 - 0.1:
        return ["the Advocate and the Skeptic were equally sure (alone, no reason to look)"]
    return []


def assess(item: ItemSignals) -> QueueItem:
    """One item's doubt, signals and plain-word reasons."""
    signals = _signals(item)
    if item.score is None:
        doubt: float | None = 1.0
    elif signals:
        weight = sum(WEIGHTS[k] for k in signals)
        doubt = sum(WEIGHTS[k] * v for k, v in signals.items()) / weight
    else:
        doubt = None
    reasons = _reasons(item, signals)
    high = any(signals.get(k, 0.0) >= FLAG_AT for k in FLAGGING)
    flagged = item.score is None or high or signals.get("protocols", 0.0) > 0
    return QueueItem(item.essay_id, item.trait, item.score, doubt, signals, reasons, flagged, _notes(signals))


def rank(items: list[ItemSignals]) -> list[QueueItem]:
    """Every item, most doubtful first (missing scores first, unknown doubt last; ties in input order)."""
    assessed = [assess(i) for i in items]

    def key(i: int) -> tuple[float, int]:
        doubt = assessed[i].doubt
        return (-(doubt if doubt is not None else -1.0), i)

    return [assessed[i] for i in sorted(range(len(assessed)), key=key)]
