"""Essay: id, text, prompt, metadata and per-rater trait scores when known."""

from __future__ import annotations

import unicodedata
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from madrag.errors import InputError
from madrag.metrics import PAPER_TIES, TieRule, round_ties, round_to_scale
from madrag.rubric import Rubric, Trait


def reference_label(rater_scores: list[float], trait: Trait, ties: TieRule = PAPER_TIES) -> int | None:
    """The MADRAG paper, Appendix B.5: the mean of the available raters, rounded to the nearest valid integer; a mean
    halfway between two scores by ``ties`` (half up, the paper's, unless a run's ``reference_ties`` says otherwise:
    the caller passes the rule)."""
    if not rater_scores:
        return None
    return round_to_scale(sum(rater_scores) / len(rater_scores), trait.min, trait.max, ties)


def essay_id(value: Any, where: str) -> str:
    """The essay id ``value`` as it is used (a string, outer whitespace removed), or a one-line InputError at
    ``where`` when it cannot be one: missing (None), empty, ``.`` or ``..`` (web addresses and paths resolve them
    away, so such an essay's page could never be opened), or holding a control character. Every loader and the
    Python API check ids here. Other characters, ``/`` included, are kept: the web app quotes ids in its URLs.

    >>> essay_id(" 17 ", "essays.csv:2")
    '17'
    """
    if value is None:
        raise InputError(f"{where}: the essay id is missing")
    if isinstance(value, dict | list | tuple | set):
        raise InputError(f"{where}: the essay id must be a text or a number, not a {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise InputError(f"{where}: the essay id is empty")
    if text in {".", ".."}:
        raise InputError(f"{where}: essay id {text!r} cannot be used (it names a folder in paths); give another id")
    bad = next((c for c in text if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise InputError(
            f"{where}: essay id {text!r} contains the control character U+{ord(bad):04X}; ids may not hold "
            "control characters"
        )
    return text


class Essay(BaseModel):
    """One essay to score. ``rater_scores[trait][i]`` is rater i's score for the trait (missing raters omitted).

    ``source`` is the text the essay is written from, when the task has one (a summary's source article, as in
    SummEval): the prompts show it under the rubric's ``source_label``.
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    prompt: str = ""
    essay_set: int | None = None
    fold: int | None = None
    rater_scores: dict[str, list[float]] = Field(default_factory=dict)
    # rater index (0-based) for each entry of rater_scores[trait], so rater 1 vs rater 2 can be compared
    rater_ids: dict[str, list[int]] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str | None = None

    def reference(self, trait: Trait, ties: TieRule = PAPER_TIES) -> int | None:
        """The essay's reference label for ``trait`` (:func:`reference_label` of its raters); None without any."""
        return reference_label(self.rater_scores.get(trait.name, []), trait, ties)

    def references_by_name(self, ties: TieRule = PAPER_TIES) -> dict[str, int | None]:
        """Reference labels for every trait with rater scores: the raters' mean, a tie rounded by ``ties`` (not
        clamped: no trait scale here)."""
        return {t: round_ties(sum(v) / len(v), ties) for t, v in self.rater_scores.items() if v}

    def rater(self, trait: str, rater_index: int) -> float | None:
        """Score given by rater ``rater_index`` (0-based) for ``trait``, or None."""
        ids = self.rater_ids.get(trait, list(range(len(self.rater_scores.get(trait, [])))))
        for idx, score in zip(ids, self.rater_scores.get(trait, []), strict=False):
            if idx == rater_index:
                return score
        return None


def traits_without_scores(essays: list[Essay], rubric: Rubric) -> list[Trait]:
    """The rubric's traits for which no essay has a human score (no reference, so no QWK and no exemplars)."""
    return [t for t in rubric.traits if not any(e.rater_scores.get(t.name) for e in essays)]


def no_scores_line(trait: Trait) -> str:
    """One line saying that ``trait`` has no human score in the data, and which columns were looked for."""
    column = trait.column or trait.name
    return (
        f"trait {trait.name!r} has no human score in the data (looked for a column {column!r} or "
        f"'rater<i>_{column}'): it is scored, but has no reference, no QWK and no exemplars"
    )
