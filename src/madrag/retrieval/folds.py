"""Cross-fold exemplar banks (``--fold each``): one bank per fold, built from the other folds' essays.

The MADRAG paper reports its extreme-score subset (Table 2) over whole essay sets while retrieval draws exemplars from
the training split only. Scoring every fold with the other folds as its pool, in one run, gives both: each
essay is scored, and no essay ever sees an exemplar from its own fold. :class:`FoldBanks` answers the
agents' exemplar questions by routing each essay to the bank of its fold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.metrics import PAPER_TIES, TieRule
from madrag.retrieval.bank import Exemplar, ExemplarBank, LevelExemplar
from madrag.retrieval.embedder import Embedder
from madrag.rubric import Rubric, Trait


class FoldBanks:
    """One exemplar bank per fold; an essay is answered by the bank built without its own fold."""

    def __init__(self, banks: Mapping[int, ExemplarBank], embedder: Embedder) -> None:
        self.banks = dict(banks)
        self.embedder = embedder

    @classmethod
    def build_or_load(
        cls,
        pools: Mapping[int, list[Essay]],
        rubric: Rubric,
        embedder: Embedder,
        cache_dir: Path,
        on_progress: Callable[[int, int], None] | None = None,
        ties: TieRule = PAPER_TIES,
    ) -> FoldBanks:
        """Reuse or build (in the persistent cache under ``cache_dir``) the bank of every fold's pool;
        ``on_progress(done, total)`` reports each bank built now, fold after fold; ``ties``: the tie rule of the
        pools' reference labels."""
        banks = {
            fold: ExemplarBank.build_or_load(
                pool, rubric, embedder, cache_dir, scope_tag=f"without-fold-{fold}", on_progress=on_progress, ties=ties
            )
            for fold, pool in sorted(pools.items())
        }
        return cls(banks, embedder)

    def bank_for(self, essay: Essay) -> ExemplarBank:
        """The bank built without ``essay``'s fold."""
        if essay.fold is None or essay.fold not in self.banks:
            raise InputError(f"essay {essay.id!r} has fold {essay.fold!r}, which has no cross-fold bank")
        return self.banks[essay.fold]

    def per_level(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        """Procedure 2 (one exemplar per score level) in the bank of the other folds."""
        return self.bank_for(essay).per_level(essay, trait)

    def anchors(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        """Anchor exemplars (one fixed pool essay per score level) of the bank of the other folds."""
        return self.bank_for(essay).anchors(essay, trait)

    def anchor_ids(self) -> dict[str, Any]:
        """The anchors' essay ids of every fold's bank (per fold, trait and score level)."""
        return {"per_fold": {str(fold): b.anchor_ids() for fold, b in self.banks.items()}}

    def similar(self, essay: Essay, k: int) -> list[Exemplar]:
        """Procedure 1 (the ``k`` nearest essays) in the bank of the other folds."""
        return self.bank_for(essay).similar(essay, k)

    def info(self) -> dict[str, Any]:
        """What a run records about its banks: per fold, the fingerprint, size and whether it was built now."""
        return {
            "per_fold": {
                str(fold): {"fingerprint": b.fingerprint, "size": b.size, "built_now": b.built_now}
                for fold, b in self.banks.items()
            }
        }
