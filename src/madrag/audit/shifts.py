"""Perturbation effects: per perturbation, protocol and trait, the score shift of the variants against the run's
scores of the same essays (variant minus original), with its bootstrap interval, and whether it is what a valid
scorer shows (:class:`madrag.audit.perturbations.Expectation`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from madrag.audit.perturbations import Expected, Perturbation
from madrag.audit.stats import Interval, Scores, interval, paired
from madrag.rubric import Trait


class ShiftRow(BaseModel):
    """One perturbation, protocol and trait. ``moved``: the shift's interval excludes 0 (``direction``: up or
    down); ``as_expected``: whether that is what ``expected`` says (None: no essay paired)."""

    perturbation: str
    protocol: str
    trait: str
    n: int
    shift: Interval
    share_changed: float | None
    moved: bool
    direction: str | None
    expected: Expected
    as_expected: bool | None


def _verdict(expected: Expected, moved: bool, direction: str | None) -> bool:
    if expected == "0":
        return not moved
    if expected == "down":
        return moved and direction == "down"
    if expected == "not_up":
        return direction != "up"
    return True


def shift_row(
    perturbation: Perturbation,
    protocol: str,
    trait: Trait,
    base: Scores,
    variant: Scores,
    ids: Sequence[str],
    n_boot: int,
) -> ShiftRow:
    """The shift of ``perturbation``'s variants on the essays ``ids`` (those whose text it changed)."""
    a, b = paired(base, variant, protocol, trait.name, ids)
    shift = interval(lambda x, y: float(np.mean(y - x)), a, b, n_boot, 0)
    moved = shift.excludes(0.0)
    direction = None if not moved or shift.estimate is None else ("up" if shift.estimate > 0 else "down")
    expected = perturbation.expect.of(trait)
    changed = float(np.mean(np.asarray(a) != np.asarray(b))) if a else None
    return ShiftRow(
        perturbation=perturbation.name,
        protocol=protocol,
        trait=trait.name,
        n=len(a),
        shift=shift,
        share_changed=changed,
        moved=moved,
        direction=direction,
        expected=expected,
        as_expected=_verdict(expected, moved, direction) if a else None,
    )
