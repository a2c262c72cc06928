"""Feedback a student can read, per criterion: "what works" (from the Advocate), "what to work on next"
(from the Skeptic) and "why this score" (from the Judge), addressed to the student, with the essay's own
sentences that the agents quoted highlighted (verified quotes only: a quote not found in the essay is never
shown). The teacher edits any of it; an edit replaces the drafted text. Where the grade is the teacher's, the
feedback carries the teacher's score and comment, and the Judge's reasoning (for a score that no longer stands)
is left out."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from madrag.agents.evidence import extract_quotes, normalise, verify_quote
from madrag.records import AgentRecord
from madrag.rubric import Trait
from madrag.teacher.grades import Grade

_SCORE_LINE = re.compile(r"^\s*(final score|score|confidence)\s*[:=].*$", re.IGNORECASE | re.MULTILINE)
_SCORE_INLINE = re.compile(r"\b(final score|confidence)\s*[:=]\s*[\d.]+%?", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?]+[.!?]*\s*")
_POSSESSIVE = re.compile(r"\b([Tt])he (essay|response|writer|student|author)'s\b")
_ESSAY = re.compile(r"\b([Tt])he (essay|response)\b")
_PERSON_VERB = re.compile(r"\b([Tt])he (writer|student|author) ([a-z]+)\b")
_PERSON = re.compile(r"\b([Tt])he (writer|student|author)\b")
_IRREGULAR = {"is": "are", "was": "were", "has": "have", "does": "do", "goes": "go"}
MAX_CHARS = 320


@dataclass
class TraitFeedback:
    """One criterion's feedback; ``quotes`` are the verified quotes of the essay behind it."""

    trait: str
    works: str
    next: str
    why: str
    quotes: list[str] = field(default_factory=list)
    edited: bool = False
    debated: bool = True  # the grading method had an Advocate and a Skeptic (a quick method has neither)


def _you(m: re.Match[str]) -> str:
    return "You" if m.group(1) == "T" else "you"


def _second_person(verb: str) -> str:
    """``gives`` -> ``give``, ``tries`` -> ``try``, ``is`` -> ``are`` (a word that is not a verb in -s stays)."""
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    if verb.endswith(("sses", "shes", "ches", "xes")):
        return verb[:-2]
    if verb.endswith("s") and not verb.endswith("ss") and len(verb) > 2:
        return verb[:-1]
    return verb


def to_student(text: str) -> str:
    """An agent's sentences about "the essay" / "the writer" addressed to the student ("your essay", "you")."""
    text = _POSSESSIVE.sub(lambda m: "Your" if m.group(1) == "T" else "your", text)
    text = _ESSAY.sub(lambda m: ("Your " if m.group(1) == "T" else "your ") + m.group(2), text)
    text = _PERSON_VERB.sub(lambda m: f"{_you(m)} {_second_person(m.group(3))}", text)
    return _PERSON.sub(_you, text)


def summary(text: str, sentences: int = 2) -> str:
    """The first sentences of an answer (score and confidence lines left out), at most :data:`MAX_CHARS`."""
    body = " ".join(_SCORE_INLINE.sub("", _SCORE_LINE.sub("", text or "")).split())
    found = [s.strip() for s in _SENTENCE.findall(body) if s.strip()][:sentences]
    out = " ".join(found)
    return out if len(out) <= MAX_CHARS else out[: MAX_CHARS - 1].rsplit(" ", 1)[0] + "…"


def verified_quotes(texts: list[str], essay: str) -> list[str]:
    """The quotes of the agents' answers that are in the essay (in order, each once)."""
    out: list[str] = []
    for text in texts:
        for quote in extract_quotes(text or ""):
            if quote not in out and verify_quote(quote, essay).verified:
                out.append(quote)
    return out


def draft(trait: str, advocate: str, skeptic: str, judge: str, essay: str) -> TraitFeedback:
    """The drafted feedback of one criterion from the three agents' answers (a method without a debate, the
    Judge's alone: no "what works" / "what next" is drafted, and ``debated`` says so)."""
    return TraitFeedback(
        debated=bool(advocate or skeptic),
        trait=trait,
        works=to_student(summary(advocate)),
        next=to_student(summary(skeptic)),
        why=to_student(summary(judge, 1)),
        quotes=verified_quotes([advocate, skeptic, judge], essay),
    )


def highlight(essay: str, quotes: list[str]) -> list[tuple[str, bool]]:
    """The essay as (text, highlighted) pieces: a sentence holding one of ``quotes`` is highlighted."""
    wanted = [normalise(q).strip(" .,;:!?\"'") for q in quotes]
    pieces = []
    for sentence in _SENTENCE.findall(essay) or [essay]:
        flat = normalise(sentence)
        pieces.append((sentence, any(w and w in flat for w in wanted)))
    return pieces


def with_grade(item: dict[str, Any], grade: Grade, max_points: int) -> dict[str, Any]:
    """A criterion's feedback with the grade in force: the teacher's score and comment where the teacher graded
    it (the AI's "why this score" dropped), else the AI's score and its reasoning. Where the teacher's score
    differs from the AI's, the debaters' "what works" / "what to work on next" were written for another score and
    are dropped too, unless the teacher wrote them (``edited``): the feedback never argues for a score that no
    longer stands (``dropped`` says so, for the teacher's page)."""
    stale = grade.changed and not item.get("edited", False)
    return {
        **item,
        "works": "" if stale else item.get("works", ""),
        "next": "" if stale else item.get("next", ""),
        "quotes": [] if stale else item.get("quotes", []),
        "why": "" if grade.teacher else item.get("why", ""),
        "score": grade.points,
        "max": max_points,
        "teacher": grade.teacher,
        "comment": grade.comment,
        "graded": grade.words,
        "dropped": stale,
        "suggested": grade.ai,
    }


def _latest(turns: list[AgentRecord], role: str) -> str:
    mine = [t for t in turns if t.role == role]
    return max(mine, key=lambda t: t.round).text if mine else ""


def criteria(
    essay: str,
    traits: list[Trait],
    judges: dict[str, AgentRecord | None],
    records: dict[str, AgentRecord],
    edits: dict[str, dict[str, str]],
    grades: dict[str, Grade],
) -> list[dict[str, Any]]:
    """One student's feedback per criterion with the grade in force (:func:`with_grade`): drafted from the Judge
    record of each trait (``judges``) and the debate it read (in ``records``), the teacher's edits (``edits``:
    trait -> works / next) in place of the drafted text. The feedback page, its export and an LMS push read it."""
    out = []
    for trait in traits:
        judge = judges.get(trait.name)
        turns = [records[k] for k in (judge.context.get("debate") or [] if judge else []) if k in records]
        judged = "" if judge is None else (judge.rationale or judge.text)
        item = draft(trait.name, _latest(turns, "advocate"), _latest(turns, "skeptic"), judged, essay)
        if trait.name in edits:
            item.works, item.next, item.edited = edits[trait.name]["works"], edits[trait.name]["next"], True
            item.debated = True  # her wording is shown whatever the method
        out.append(with_grade(asdict(item), grades[trait.name], trait.max))
    return out
