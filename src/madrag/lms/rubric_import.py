"""An assignment's Canvas rubric as madrag's :class:`~madrag.rubric.Rubric`: each criterion a trait, each rating a
level whose score is its points, so a grade madrag gives is the points Canvas adds up.

The mapping (docs/lms.md, "The rubric"):

- a criterion's trait is named by its description (its long description is the trait's description); two
  criteria of one name get `` (2)``, `` (3)`` ...;
- its levels run from its lowest rating's points to its highest; each rating's description (with its long
  description) is the level of its points; two ratings of the same points share the level (both texts);
- points between two ratings (ratings of 4, 2 and 0 points) get a level of their own that says so: ``between
  "Fair" (2) and "Excellent" (4)``; a range criterion (``criterion_use_range``) is read the same way;
- a rating whose points are not whole (2.5) is refused with the criterion and rating named, as is a criterion
  without ratings or with more than :data:`MAX_LEVELS` levels: madrag scores on whole points, and rounding would
  send Canvas points its rubric does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from madrag.data.documents import html_text
from madrag.errors import RubricError
from madrag.rubric import Rubric, Trait

MAX_LEVELS = 21


@dataclass(frozen=True)
class CriterionLink:
    """Which Canvas criterion a trait is, and the Canvas rating of each level that is one (None between two)."""

    trait: str
    criterion_id: str
    ratings: dict[int, str]
    points: float


def _whole(value: Any, where: str) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise RubricError(f"{where}: its points {value!r} are not a number") from None
    if not number.is_integer():
        raise RubricError(
            f"{where}: {number:g} points is not a whole number; madrag scores on whole points: change the rating "
            "to whole points in Canvas (or give the rubric as a file with --rubric)"
        )
    return int(number)


def _levels(criterion: dict[str, Any], name: str) -> tuple[dict[int, str], dict[int, str]]:
    """(level texts, rating id per level) of one criterion."""
    texts: dict[int, list[str]] = {}
    ids: dict[int, str] = {}
    for rating in criterion.get("ratings") or []:
        label = str(rating.get("description") or "").strip() or "(no description)"
        points = _whole(rating.get("points"), f"criterion {name!r}, rating {label!r}")
        long = str(rating.get("long_description") or "").strip()
        texts.setdefault(points, []).append(f"{label}: {long}" if long else label)
        ids.setdefault(points, str(rating.get("id", "")))
    if not texts:
        raise RubricError(f"criterion {name!r} has no ratings: give it ratings in Canvas, or the rubric as a file")
    low, high = min(texts), max(texts)
    if high - low + 1 > MAX_LEVELS:
        raise RubricError(
            f"criterion {name!r} runs from {low} to {high} points: madrag takes at most {MAX_LEVELS} levels"
        )
    levels: dict[int, str] = {}
    below = low
    for points in range(low, high + 1):
        if points in texts:
            levels[points] = " / ".join(texts[points])
            below = points
        else:
            above = min(p for p in texts if p > points)
            levels[points] = (
                f'between "{texts[below][0].split(":")[0]}" ({below}) and "{texts[above][0].split(":")[0]}" ({above})'
            )
    return levels, ids


def _unique(name: str, taken: set[str]) -> str:
    found, n = name, 2
    while found.casefold() in taken:
        found, n = f"{name} ({n})", n + 1
    taken.add(found.casefold())
    return found


def import_rubric(assignment: dict[str, Any]) -> tuple[Rubric, list[CriterionLink]]:
    """The assignment's rubric as madrag's, with each trait's Canvas criterion; a RubricError when it has none or
    holds what madrag cannot score (see the module's notes)."""
    criteria = assignment.get("rubric") or []
    title = str((assignment.get("rubric_settings") or {}).get("title") or assignment.get("name") or "")
    if not criteria:
        raise RubricError(
            f"Canvas assignment {assignment.get('name', '')!r} has no rubric: add one in Canvas, or give madrag's "
            "rubric file with --rubric"
        )
    traits, links, taken = [], [], set[str]()
    for criterion in criteria:
        if criterion.get("ignore_for_scoring"):
            continue
        raw = " ".join(str(criterion.get("description") or "").split()) or f"Criterion {criterion.get('id')}"
        name = _unique(raw, taken)
        levels, ratings = _levels(criterion, name)
        traits.append(
            Trait(
                name=name,
                min=min(levels),
                max=max(levels),
                levels=levels,
                description=str(criterion.get("long_description") or "").strip(),
            )
        )
        links.append(CriterionLink(name, str(criterion["id"]), ratings, float(criterion.get("points") or max(levels))))
    prompt = str(assignment.get("description") or "")
    return Rubric(traits=traits, name=title, prompt=_prompt_text(prompt)), links


def _prompt_text(html: str) -> str:
    """The assignment's description (HTML in Canvas) as the essay prompt's plain text."""
    if not html.strip():
        return ""
    return html_text(html)[1].strip()
