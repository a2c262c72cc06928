"""The grade of a paper on one criterion: the teacher's decision, then the AI's. The one rule every surface
(the gradebook page, its Canvas / Google Classroom / Moodle / spreadsheet files, the class overview, student
feedback) reads a grade by.

A teacher decides a score in two places: a score of their own in the class file (the human scores mapped at
upload), and an override on the review pages. The later decision wins, so an override outranks the class
file's score; either outranks the AI. Confirming the AI's score on the review pages keeps the AI's score where the
teacher gave none, but never replaces a score the teacher gave in the class file (to change that, override it).

A bulk approval ("Approve the N ...", one click for many scores) keeps the AI's score too, but it is not the
teacher's decision on that score: it reads "approved in bulk" everywhere (``how`` ``bulk``, ``by`` ``ai``), never
"accepted by you", and agreement with the teacher counts only the scores decided one by one
(:attr:`Grade.one_by_one`).

Every surface shows ``points`` as *the* score and the AI's own score (``ai``) as "madrag suggested N"
(:func:`suggested`); a bulk approval touches only grades that are :attr:`Grade.open` (nobody decided them yet).
A comment the teacher saved stays with the grade whatever decided it (``comment``), and decides nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

By = Literal["teacher", "ai"]
How = Literal["override", "class file", "accepted", "bulk", "ai", "missing"]
HOW_WORDS: dict[str, str] = {
    "override": "your score (changed on review)",
    "class file": "your score (from the class file)",
    "accepted": "AI's score, confirmed by you",
    "bulk": "AI's score, approved in bulk",
    "ai": "AI's score, not reviewed",
    "missing": "no score",
}


@dataclass(frozen=True)
class Grade:
    """``points`` in force (None: no valid score from anyone), who decided it and how, the AI's own score
    beside it, and the teacher's comment on it (with a decision or saved alone)."""

    points: int | None
    by: By | None
    how: How
    ai: int | None = None
    comment: str = ""
    reviewer: str | None = None  # who overrode, confirmed or bulk-approved it on review (None: nobody, class file)

    @property
    def teacher(self) -> bool:
        """The teacher decided this grade (a score of their own, not the AI's)."""
        return self.by == "teacher"

    @property
    def reviewed(self) -> bool:
        """A teacher signed it off: their own score, the AI's confirmed, or the AI's approved in bulk."""
        return self.how in ("override", "class file", "accepted", "bulk")

    @property
    def one_by_one(self) -> bool:
        """The teacher decided this score by itself: their own score (class file, override) or the AI's
        confirmed on its own; not a bulk approval (the scores agreement with the teacher is measured on)."""
        return self.how in ("override", "class file", "accepted")

    @property
    def in_bulk(self) -> bool:
        """The AI's score, approved in bulk (no decision of the teacher's on this score)."""
        return self.how == "bulk"

    @property
    def open(self) -> bool:
        """Nobody decided it yet: an AI score no teacher has confirmed, approved in bulk or replaced (a bulk
        approval's only target)."""
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
    in_bulk: bool = False,
) -> Grade:
    """The grade in force: the teacher's override, else the teacher's class-file score, else the AI's score
    (``accepted`` when the teacher confirmed it on review, ``in_bulk`` when it was approved in bulk); None points
    when nobody gave a valid score. ``comment``: the teacher's comment in force, whatever decided the grade."""
    if override is not None:
        return Grade(override, "teacher", "override", ai, comment, reviewer)
    if upload is not None:
        return Grade(upload, "teacher", "class file", ai, comment)
    if ai is None:
        return Grade(None, None, "missing", comment=comment)
    how: How = "bulk" if in_bulk else "accepted" if accepted else "ai"
    return Grade(ai, "ai", how, ai, comment, reviewer=reviewer if how != "ai" else None)


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
                out[(protocol, essay_id, trait)] = _grade(ai.get((protocol, essay_id, trait)), upload, review)
    return out


def _grade(ai: int | None, upload: int | None, review: Decision | None) -> Grade:
    """One grade from the AI's score, the class file's and the review in force (a comment alone decides nothing;
    a bulk approval is the AI's score approved in bulk)."""
    action = None if review is None else review.action
    return grade_of(
        ai,
        upload=upload,
        override=review.new_score if review is not None and action == "override" else None,
        comment="" if review is None else review.comment,
        accepted=action == "accept",
        reviewer=None if review is None or action == "comment" else review.reviewer,
        in_bulk=action == "bulk-accept",
    )
