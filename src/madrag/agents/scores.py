"""The pure reading of a Judge's score from its answer, no call made: ``<Trait>: N`` score lines, the score
distribution at the token that carries the score, and the :class:`~madrag.records.ScoreResult` built from both.

The Judge calls that use them are in :mod:`madrag.agents.judge`; what counts as the Judge's own ``Final score: N``
statement is in :mod:`madrag.agents.final_score`.
"""

from __future__ import annotations

import json
import math
import re

from madrag.agents.final_score import find_final_score
from madrag.metrics import round_half_up
from madrag.providers.base import ChatResponse, TokenLogprob, TopLogprob
from madrag.records import ScoreMode, ScoreResult
from madrag.rubric import Rubric, Trait
from madrag.settings import ReportFrom

_NUMBER = r"-?\d+(?:[.,]\d+)?"


# -- reading text ----------------------------------------------------------------------------------------------


def blank_score_line(trait: Trait) -> str:
    """The ``Scores:`` line a judge scoring every trait fills in: ``<Trait>: N (an integer from a to b)``."""
    return f"{trait.name}: N (an integer from {trait.min} to {trait.max})"


def trait_score_line(name: str, *, whole_line: bool = False) -> re.Pattern[str]:
    """A ``<Trait>: N`` score line of trait ``name`` (``Ideas: 2``, ``**Style** - 3``; any case).

    By default the pattern finds such lines anywhere in a text (multi-line) and captures the integer N.
    ``whole_line``: the pattern matches one line that only states a score, N possibly followed by ``/ M``,
    ``out of M`` or ``points`` (``**Style** - 3/4``), with no group.
    """
    head = rf"^\W*{re.escape(name)}\W*\s*[:=-]\s*\**\s*"
    if not whole_line:
        return re.compile(rf"{head}(-?\d+)", re.IGNORECASE | re.MULTILINE)
    tail = rf"{_NUMBER}\s*(?:(?:/|out\s+of)\s*{_NUMBER})?\s*(?:points?)?\W*$"
    return re.compile(head + tail, re.IGNORECASE)


def parse_trait_scores(text: str, rubric: Rubric) -> dict[str, int]:
    """The last ``<Trait>: N`` line of each trait, when N is in the trait's range."""
    found: dict[str, int] = {}
    for trait in rubric.traits:
        matches = trait_score_line(trait.name).findall(text)
        if matches and trait.contains(int(matches[-1])):
            found[trait.name] = int(matches[-1])
    return found


# -- score distributions --------------------------------------------------------------------------------------


def normalise(logprobs: dict[int, float]) -> dict[int, float]:
    """Turn log-probabilities of the valid scores into probabilities that sum to one."""
    top = max(logprobs.values())
    weights = {s: math.exp(lp - top) for s, lp in logprobs.items()}
    total = sum(weights.values())
    return {s: w / total for s, w in sorted(weights.items())}


def choice_distribution(response: ChatResponse, choices: list[str]) -> dict[int, float] | None:
    """p(score) over ``choices`` from a constrained score step's choice log-probabilities (None without them)."""
    lps = response.choice_logprobs or {}
    return normalise({int(c): lp for c, lp in lps.items() if c in choices}) if lps else None


def distribution_from_tokens(
    text: str, tokens: list[TokenLogprob], trait: Trait, essay: str | None = None
) -> dict[int, float] | None:
    """p(score) at the token that carries the final score (the value of the statement :func:`parse_score`
    reads, with the same ``essay``), from its top alternatives (:func:`distribution_at`)."""
    _, offset = find_final_score(text, essay)
    return distribution_at(offset, tokens, trait)


def json_value_offset(text: str, key: str) -> int:
    """Where the integer value of ``key`` starts in a JSON answer ``text`` (-1 when it has none): the score a
    score step under a JSON schema wrote."""
    found = re.search(re.escape(json.dumps(key, ensure_ascii=False)) + r"\s*:\s*(-?\d)", text)
    return found.start(1) if found else -1


def distribution_at(offset: int, tokens: list[TokenLogprob], trait: Trait) -> dict[int, float] | None:
    """p(score) at the generated token that covers character ``offset`` of the answer (the tokens' texts, in
    order, make the answer), from that token and its top alternatives: only the trait's valid scores count, the
    rest renormalised. None when ``offset`` is -1, or no valid score is among the alternatives."""
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
    """Build the :class:`ScoreResult`, with the reported value taken from the requested source; missing (None)
    whenever the score itself could not be read (``parsed`` None), whatever the distribution says."""
    argmax = expected = None
    if distribution:
        argmax = max(distribution, key=lambda s: (distribution[s], -s))
        expected = sum(s * p for s, p in distribution.items())
    reported: int | None = None
    if parsed is None:
        report = "parsed"  # an answer whose score could not be read is missing under every report setting
    elif report == "argmax" and argmax is not None:
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
