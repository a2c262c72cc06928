"""Reading the Judge's score: the last ``Final score: N`` in range, and the score distribution.

A failed parse is recorded as such (``mode="failed"``, ``reported=None``), never turned into a number.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from madrag.metrics import round_half_up
from madrag.providers.base import TokenLogprob, TopLogprob
from madrag.records import ScoreMode, ScoreResult
from madrag.rubric import Trait

FINAL_SCORE = re.compile(r"final\s+score\s*[:=]?\s*[*_`\"']*\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
ReportFrom = Literal["parsed", "argmax", "expected"]


def find_final_score(text: str) -> tuple[str | None, int]:
    """The raw value of the last ``Final score: N`` and the character offset where the value starts."""
    matches = list(FINAL_SCORE.finditer(text))
    if not matches:
        return None, -1
    last = matches[-1]
    return last.group(1), last.start(1)


def parse_score(text: str, trait: Trait) -> tuple[int | None, str | None]:
    """(score, problem): the last ``Final score: N`` if it is an integer in the trait's range."""
    raw, _ = find_final_score(text)
    if raw is None:
        return None, "no 'Final score: N' line"
    value = float(raw)
    if not value.is_integer():
        return None, f"score {raw} is not an integer"
    if not trait.contains(value):
        return None, f"score {raw} outside [{trait.min}, {trait.max}]"
    return int(value), None


def normalise(logprobs: dict[int, float]) -> dict[int, float]:
    """Turn log-probabilities of the valid scores into probabilities that sum to one."""
    top = max(logprobs.values())
    weights = {s: math.exp(lp - top) for s, lp in logprobs.items()}
    total = sum(weights.values())
    return {s: w / total for s, w in sorted(weights.items())}


def distribution_from_tokens(text: str, tokens: list[TokenLogprob], trait: Trait) -> dict[int, float] | None:
    """p(score) at the token that carries the final score, from its top alternatives.

    Only valid scores found among the alternatives count; None when the position or the alternatives
    are missing.
    """
    _, offset = find_final_score(text)
    if offset < 0:
        return None
    pos = 0
    for tok in tokens:
        end = pos + len(tok.token)
        if end > offset and tok.token.strip():
            valid = {str(s): s for s in trait.scores}
            found: dict[int, float] = {}
            candidates: list[TopLogprob | TokenLogprob] = [*tok.top, tok]
            for alt in candidates:
                key = alt.token.strip()
                if key in valid and valid[key] not in found:
                    found[valid[key]] = alt.logprob
            return normalise(found) if found else None
        pos = end
    return None


def summarise(
    distribution: dict[int, float] | None,
    parsed: int | None,
    mode: ScoreMode,
    report: ReportFrom,
    invalid_raw: str | None = None,
) -> ScoreResult:
    """Build the :class:`ScoreResult`, with the reported value taken from the requested source."""
    argmax = expected = None
    if distribution:
        argmax = max(distribution, key=lambda s: (distribution[s], -s))
        expected = sum(s * p for s, p in distribution.items())
    reported: int | None
    if report == "argmax" and argmax is not None:
        reported = argmax
    elif report == "expected" and expected is not None:
        reported = round_half_up(expected)
    else:
        reported = parsed
        report = "parsed"
    return ScoreResult(
        parsed=parsed,
        distribution=distribution,
        argmax=argmax,
        expected=expected,
        mode=mode if reported is not None else "failed",
        reported=reported,
        reported_from=report,
        invalid_raw=invalid_raw,
    )
