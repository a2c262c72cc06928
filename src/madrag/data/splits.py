"""Splits by the ``fold`` column: one fold is the evaluation part, the others the retrieval pool."""

from __future__ import annotations

from dataclasses import dataclass

from madrag.data.essay import Essay
from madrag.errors import InputError


@dataclass(frozen=True)
class Split:
    """The essays to score (``eval``), the exemplar pool, and the fold scored (None: every essay)."""

    eval: list[Essay]
    pool: list[Essay]
    eval_fold: int | None


def split_by_fold(essays: list[Essay], eval_fold: int | None = 0) -> Split:
    """Fold ``eval_fold`` is scored, the rest is the exemplar pool (train split only).

    ``eval_fold=None`` scores every essay and keeps every essay in the pool; the bank never returns the
    essay being scored, so this is leak-free per query but not a held-out evaluation.
    """
    if eval_fold is None:
        return Split(eval=list(essays), pool=list(essays), eval_fold=None)
    if any(e.fold is None for e in essays):
        raise InputError("data has no 'fold' for some essays; use --fold all or add a fold column")
    eval_part = [e for e in essays if e.fold == eval_fold]
    if not eval_part:
        folds = sorted({e.fold for e in essays if e.fold is not None})
        raise InputError(f"no essays in fold {eval_fold}; folds present: {folds}")
    return Split(eval=eval_part, pool=[e for e in essays if e.fold != eval_fold], eval_fold=eval_fold)
