"""Stability: the sampled essays scored again with other seeds (and the debaters' temperature), against the run's
own scores. Per repeat, protocol and trait: exact agreement and QWK between the run's score and the repeat's;
per protocol and trait over every repeat: the share of essays whose score flips (differs in at least one
repeat) and the spread of the Judge's score distribution (its standard deviation, where the Judge's scores were
read with probabilities)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from madrag.audit.stats import Interval, Scores, interval, mean_interval, paired
from madrag.metrics import qwk
from madrag.protocols.base import TraitScore
from madrag.rubric import Rubric, Trait


class RepeatRow(BaseModel):
    """One repeat (``condition``) of one protocol and trait against the run's scores."""

    condition: str
    protocol: str
    trait: str
    n: int
    exact: Interval
    qwk: Interval
    mean_abs_diff: float | None


class StabilityRow(BaseModel):
    """One protocol and trait over every repeat: ``flip_share`` of the essays scored in the run and in every
    repeat; ``judge_sd``: the mean standard deviation of the Judge's score distribution (None: no distribution
    recorded, e.g. text-read scores); ``unstable``: the flip share's interval lies above 0."""

    protocol: str
    trait: str
    n: int
    repeats: int
    flip_share: Interval
    judge_sd: Interval
    unstable: bool


def _exact(x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    return float(np.mean(x == y))


def repeat_row(
    condition: str, protocol: str, trait: Trait, base: Scores, other: Scores, ids: Sequence[str], n_boot: int
) -> RepeatRow:
    """Agreement of one repeat with the run's scores on the sampled essays ``ids``."""
    a, b = paired(base, other, protocol, trait.name, ids)
    kappa = interval(lambda x, y: qwk(x, y, trait.min, trait.max), a, b, n_boot, 0)
    diff = float(np.mean(np.abs(np.subtract(a, b)))) if a else None
    exact = interval(_exact, a, b, n_boot, 0)
    return RepeatRow(
        condition=condition, protocol=protocol, trait=trait.name, n=len(a), exact=exact, qwk=kappa, mean_abs_diff=diff
    )


def distribution_sd(score: TraitScore) -> float | None:
    """The standard deviation of a score's recorded distribution (None without one)."""
    dist = None if score.result is None else score.result.distribution
    if not dist:
        return None
    mean = sum(int(k) * p for k, p in dist.items())
    return math.sqrt(max(0.0, sum(p * (int(k) - mean) ** 2 for k, p in dist.items())))


def stability_row(
    protocol: str, trait: str, base: Scores, repeats: Mapping[str, Scores], ids: Sequence[str], n_boot: int
) -> StabilityRow:
    """Flip share and Judge spread of one protocol and trait over the run's scores and every repeat."""
    flips: list[float] = []
    spreads: list[float] = []
    for essay_id in ids:
        found = [s.get((protocol, essay_id, trait)) for s in (base, *repeats.values())]
        values = [f.score for f in found if f is not None]
        if len(values) == len(found) and None not in values:
            flips.append(float(len(set(values)) > 1))
        spreads += [sd for f in found if f is not None and (sd := distribution_sd(f)) is not None]
    share = mean_interval(flips, n_boot, 0)
    return StabilityRow(
        protocol=protocol,
        trait=trait,
        n=len(flips),
        repeats=len(repeats),
        flip_share=share,
        judge_sd=mean_interval(spreads, n_boot, 0),
        unstable=share.excludes(0.0),
    )


def stability_tables(
    rubric: Rubric,
    protocols: Sequence[str],
    base: Scores,
    repeats: Mapping[str, Scores],
    ids: Sequence[str],
    n_boot: int,
) -> tuple[list[RepeatRow], list[StabilityRow]]:
    """Every repeat's rows, and the per-protocol-and-trait summary (empty without repeats)."""
    if not repeats:
        return [], []
    rows = [
        repeat_row(name, p, t, base, scores, ids, n_boot)
        for name, scores in repeats.items()
        for p in protocols
        for t in rubric.traits
    ]
    summary = [stability_row(p, t.name, base, repeats, ids, n_boot) for p in protocols for t in rubric.traits]
    return rows, summary
