"""The grade of a paper on one criterion: the teacher's decision, then the AI's. The one rule every surface
(the gradebook page, its Canvas / Google Classroom / Moodle / spreadsheet files, the class overview, student
feedback) reads a grade by.

A teacher decides a score in two places: a score of their own in the class file (the human scores mapped at
upload), and an override on the review pages. The later decision wins, so an override outranks the class
file's score; either outranks the AI. Accepting the AI's score on the review pages keeps the AI's score where the
teacher gave none, but never replaces a score the teacher gave in the class file (to change that, override it).

Every surface shows ``points`` as *the* score and the AI's own score (``ai``) as "madrag suggested N"
(:func:`suggested`); a bulk approval touches only grades that are :attr:`Grade.open` (nobody decided them yet).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

By = Literal["teacher", "ai"]
How = Literal["override", "class file", "accepted", "ai", "missing"]
HOW_WORDS: dict[str, str] = {
    "override": "your score (changed on review)",
    "class file": "your score (from the class file)",
    "accepted": "AI's score, accepted by you",
    "ai": "AI's score, not reviewed",
    "missing": "no score",
}


@dataclass(frozen=True)
class Grade:
    """``points`` in force (None: no valid score from anyone), who decided it and how, the AI's own score
    beside it, and the teacher's comment when the teacher overrode it."""

    points: int | None
    by: By | None
    how: How
    ai: int | None = None
    comment: str = ""
    reviewer: str | None = None  # who overrode or accepted it on review (None: nobody, or the class file)

    @property
    def teacher(self) -> bool:
        """The teacher decided this grade (a score of their own, not the AI's)."""
        return self.by == "teacher"

    @property
    def reviewed(self) -> bool:
        """A teacher looked at it: their own score, or the AI's accepted."""
        return self.how in ("override", "class file", "accepted")

    @property
    def open(self) -> bool:
        """Nobody decided it yet: an AI score no teacher has accepted or replaced (a bulk approval's only
        target)."""
        return self.how == "ai"

    @property
    def changed(self) -> bool:
        """The teacher's grade differs from the AI's score (the AI's reasoning was written for another score)."""
        return self.teacher and self.ai is not None and self.points != self.ai

    @property
    def words(self) -> str:
        return HOW_WORDS[self.how]


def suggested(grade: Grade) -> str:
    """How the AI's own score is shown beside the grade: ``madrag suggested N`` (empty without one)."""
    return "" if grade.ai is None else f"madrag suggested {grade.ai}"


def grade_of(
    ai: int | None,
    upload: int | None = None,
    override: int | None = None,
    comment: str = "",
    accepted: bool = False,
    reviewer: str | None = None,
) -> Grade:
    """The grade in force: the teacher's override, else the teacher's class-file score, else the AI's score
    (``accepted`` when the teacher accepted it on review); None points when nobody gave a valid score."""
    if override is not None:
        return Grade(override, "teacher", "override", ai, comment, reviewer)
    if upload is not None:
        return Grade(upload, "teacher", "class file", ai)
    if ai is None:
        return Grade(None, None, "missing")
    return Grade(ai, "ai", "accepted" if accepted else "ai", ai, reviewer=reviewer if accepted else None)


class Decision(Protocol):
    """A teacher's review in force on one essay-trait (the web app's :class:`madrag.server.reviews.Review`)."""

    @property
    def action(self) -> str: ...
    @property
    def new_score(self) -> int | None: ...
    @property
    def comment(self) -> str: ...
    @property
    def reviewer(self) -> str: ...


def grade_table(
    protocols: list[str],
    essays: Mapping[str, Mapping[str, int | None]],
    ai: Mapping[tuple[str, str, str], int | None],
    reviews: Mapping[tuple[str, str, str], Decision],
) -> dict[tuple[str, str, str], Grade]:
    """The grade in force per (protocol, essay id, trait) by :func:`grade_of`: ``essays`` gives each essay's
    class-file score per trait (None: none), ``ai`` the AI's score per (protocol, essay, trait), ``reviews`` the
    review in force per (essay, trait, protocol). The one table every page, file, API answer and LMS push reads."""
    out: dict[tuple[str, str, str], Grade] = {}
    for protocol in protocols or [""]:
        for essay_id, uploads in essays.items():
            for trait, upload in uploads.items():
                review = reviews.get((essay_id, trait, protocol))
                override = review is not None and review.action == "override"
                out[(protocol, essay_id, trait)] = grade_of(
                    ai.get((protocol, essay_id, trait)),
                    upload=upload,
                    override=review.new_score if review is not None and override else None,
                    comment=review.comment if review is not None and override else "",
                    accepted=review is not None and not override,
                    reviewer=None if review is None else review.reviewer,
                )
    return out
