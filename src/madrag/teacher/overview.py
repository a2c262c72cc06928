"""A class at a glance, from the gradebook's rows (the teacher's overrides applied): a students x criteria
heatmap, how the scores of each criterion are spread, and each student's weakest criterion."""

from __future__ import annotations

from dataclasses import dataclass

from madrag.teacher.gradebook import Criterion, StudentRow

HEAT_LEVELS = 5


@dataclass(frozen=True)
class Overview:
    """``heat[i][c]``: student i's place on criterion c's scale as a level 0..4 (None: no valid score);
    ``distribution[c][score]``: how many students got it; ``weakest[i]``: student i's lowest criterion by its
    place on the scale (None when a score is missing or every criterion is at the same place)."""

    heat: list[dict[str, int | None]]
    distribution: dict[str, dict[int, int]]
    weakest: list[str | None]
    missing: dict[str, int]


def _place(score: int | None, c: Criterion) -> float | None:
    if score is None or c.max <= c.min:
        return None
    return (score - c.min) / (c.max - c.min)


def _weakest(row: StudentRow, criteria: list[Criterion]) -> str | None:
    places = {c.name: _place(row.points[c.name], c) for c in criteria}
    known = {k: v for k, v in places.items() if v is not None}
    if len(known) != len(criteria) or len(set(known.values())) <= 1:
        return None
    low = min(known.values())
    return next(k for k, v in known.items() if v == low)


def overview(rows: list[StudentRow], criteria: list[Criterion]) -> Overview:
    """The class's heatmap, distributions and weakest criteria."""
    heat: list[dict[str, int | None]] = []
    distribution = {c.name: {s: 0 for s in range(c.min, c.max + 1)} for c in criteria}
    missing = {c.name: 0 for c in criteria}
    for row in rows:
        heat.append({})
        for c in criteria:
            score, place = row.points[c.name], _place(row.points[c.name], c)
            heat[-1][c.name] = None if place is None else min(HEAT_LEVELS - 1, int(place * HEAT_LEVELS))
            if score is None:
                missing[c.name] += 1
            elif score in distribution[c.name]:
                distribution[c.name][score] += 1
    return Overview(heat, distribution, [_weakest(r, criteria) for r in rows], missing)
