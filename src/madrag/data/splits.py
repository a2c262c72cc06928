"""Splits by the ``fold`` column: one fold is the evaluation part, the others the retrieval pool."""

from __future__ import annotations

from dataclasses import dataclass

from madrag.data.essay import Essay
from madrag.errors import InputError, hint


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
        raise InputError(f"data has no 'fold' for some essays; {hint('fold-all')} or add a fold column")
    eval_part = [e for e in essays if e.fold == eval_fold]
    if not eval_part:
        folds = sorted({e.fold for e in essays if e.fold is not None})
        raise InputError(f"no essays in fold {eval_fold}; folds present: {folds}")
    return Split(eval=eval_part, pool=[e for e in essays if e.fold != eval_fold], eval_fold=eval_fold)


EACH = "each"
"""``--fold each``: every fold is scored, each with the other folds as its exemplar pool (cross-fold scoring)."""

EvalFold = int | str | None
"""A run's evaluation fold: a fold number, ``"each"`` (cross-fold scoring) or None (every essay, one pool)."""


def fold_pools(essays: list[Essay]) -> dict[int, list[Essay]]:
    """Cross-fold scoring (``--fold each``): for every fold, the essays of all the *other* folds, so an essay is
    only ever given exemplars from outside its own fold (the MADRAG paper B: training split only)."""
    if any(e.fold is None for e in essays):
        raise InputError("data has no 'fold' for some essays; --fold each needs a fold column")
    folds = sorted({e.fold for e in essays if e.fold is not None})
    if len(folds) < 2:
        raise InputError(f"--fold each needs at least two folds; folds present: {folds}")
    return {f: [e for e in essays if e.fold != f] for f in folds}


def split_essays(essays: list[Essay], eval_fold: EvalFold) -> tuple[list[Essay], list[Essay]]:
    """(essays to score, retrieval pool) for a run's ``eval_fold``. Under ``"each"`` every essay is scored and
    the pool is every essay (each fold is then given its own pool, :func:`fold_pools`)."""
    if eval_fold == EACH:
        fold_pools(essays)  # checks the folds
        return list(essays), list(essays)
    if isinstance(eval_fold, str):
        raise InputError(f"eval_fold must be a fold number, {EACH!r} or None, got {eval_fold!r}")
    split = split_by_fold(essays, eval_fold)
    return split.eval, split.pool
