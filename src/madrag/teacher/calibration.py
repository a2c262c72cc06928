"""How madrag's scores agree with the teacher's, per trait in plain words ("exactly on 4 of 5, within one point on
5 of 5"; "madrag scores Conventions 1 point higher than you on 6 of 8 papers"): before the batch, on the teacher's
anchor papers (calibration: the papers it scored otherwise than the teacher, whether that is close enough to go on,
:data:`EXACT_AT`, :data:`WITHIN_AT`, and which score levels no anchor shows, so the Judge sees no example of them);
and while reviewing, between madrag's suggestions and the teacher's decisions so far (:func:`pair_agreement`, the
one computation both read)."""

from __future__ import annotations

from dataclasses import dataclass, field

from madrag.data.essay import Essay
from madrag.rubric import Rubric

EXACT_AT = 0.6
"""The share of the teacher's papers madrag must score exactly as the teacher did, on every trait, to look right."""
WITHIN_AT = 0.9
"""The share it must score within one point of the teacher, on every trait."""
THRESHOLD_WORDS = (
    f"madrag says it looks right only when, on every criterion, it gave your score exactly on at least "
    f"{EXACT_AT:.0%} of your papers and within one point on at least {WITHIN_AT:.0%}, with every paper scored"
)
DRIFT_MIN = 3
"""The fewest papers with both scores on which a lean of madrag's is put into words."""


@dataclass(frozen=True)
class Disagreement:
    """An anchor paper madrag scored otherwise than the teacher (``madrag`` None: no valid score)."""

    essay_id: str
    teacher: int
    madrag: int | None


@dataclass(frozen=True)
class TraitAgreement:
    trait: str
    n: int  # anchors with both a teacher score and a valid madrag score
    exact: int
    within_one: int
    unscored: int  # anchors madrag gave no valid score
    disagreed: tuple[Disagreement, ...] = field(default=())
    difference: int = 0  # the sum of madrag's score minus the teacher's, over the n papers
    higher: int = 0  # papers madrag scored above the teacher
    lower: int = 0  # papers madrag scored below the teacher
    in_bulk: int = 0  # madrag's scores approved in bulk: no decision of the teacher's, so not counted above

    @property
    def mean_difference(self) -> float | None:
        """madrag's score minus the teacher's, on average (None: no paper with both)."""
        return self.difference / self.n if self.n else None

    def drift(self) -> str:
        """A plain sentence when madrag leans one way on most papers (at least :data:`DRIFT_MIN` papers and more
        than half of them on one side), else empty."""
        side, count = ("higher", self.higher) if self.higher >= self.lower else ("lower", self.lower)
        if self.n < DRIFT_MIN or 2 * count <= self.n:
            return ""
        gaps = [abs(d.madrag - d.teacher) for d in self.disagreed if d.madrag is not None]
        gap = round(sum(gaps) / len(gaps)) if gaps else 1
        points = f"{gap} point{'s' if gap != 1 else ''}"
        return f"madrag scores {self.trait} {points} {side} than you on {count} of {self.n} papers"

    @property
    def looks_right(self) -> bool:
        """At or above both thresholds, every anchor scored."""
        return (
            bool(self.n)
            and not self.unscored
            and self.exact >= EXACT_AT * self.n
            and self.within_one >= WITHIN_AT * self.n
        )

    def sentence(self) -> str:
        """The agreement in words."""
        if self.n == 0:
            return f"{self.trait}: no anchor paper has both your score and a valid madrag score"
        text = f"{self.trait}: exactly on {self.exact} of {self.n}, within one point on {self.within_one} of {self.n}"
        if self.unscored:
            text += f" ({self.unscored} without a valid score)"
        return text


def anchors(essays: list[Essay]) -> list[Essay]:
    """The essays the teacher scored."""
    return [e for e in essays if e.rater_scores]


def pair_agreement(trait: str, pairs: list[tuple[str, int, int | None]], in_bulk: int = 0) -> TraitAgreement:
    """One trait's agreement over ``(essay id, teacher's score, madrag's score or None)`` pairs, the teacher's
    decided one by one; ``in_bulk``: how many of madrag's scores of the trait were approved in bulk (said beside
    the agreement, never counted in it: madrag would be agreeing with itself)."""
    n = exact = within = unscored = difference = higher = lower = 0
    disagreed = []
    for essay_id, teacher, mine in pairs:
        if mine != teacher:
            disagreed.append(Disagreement(essay_id, teacher, mine))
        if mine is None:
            unscored += 1
            continue
        n += 1
        exact += mine == teacher
        within += abs(mine - teacher) <= 1
        difference += mine - teacher
        higher += mine > teacher
        lower += mine < teacher
    return TraitAgreement(trait, n, exact, within, unscored, tuple(disagreed), difference, higher, lower, in_bulk)


def agreement(rubric: Rubric, essays: list[Essay], scores: dict[tuple[str, str], int | None]) -> list[TraitAgreement]:
    """Per trait, madrag's ``scores[(essay_id, trait)]`` against the teacher's reference of each anchor."""
    out = []
    for trait in rubric.traits:
        pairs = []
        for essay in essays:
            teacher = essay.reference(trait)
            if teacher is not None and (essay.id, trait.name) in scores:
                pairs.append((essay.id, teacher, scores[(essay.id, trait.name)]))
        out.append(pair_agreement(trait.name, pairs))
    return out


def looks_right(agreements: list[TraitAgreement]) -> bool:
    """Whether madrag agreed with the teacher well enough, on every trait, to score the class (:data:`EXACT_AT`,
    :data:`WITHIN_AT`)."""
    return bool(agreements) and all(a.looks_right for a in agreements)


def empty_levels(rubric: Rubric, essays: list[Essay]) -> dict[str, list[int]]:
    """Per trait, the score levels none of the anchors has (traits with every level shown left out)."""
    out = {}
    for trait in rubric.traits:
        shown = {essay.reference(trait) for essay in essays}
        missing = [s for s in range(trait.min, trait.max + 1) if s not in shown]
        if missing:
            out[trait.name] = missing
    return out
