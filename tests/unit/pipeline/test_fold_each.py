"""Cross-fold scoring (``--fold each``): every essay of sets 7 and 8 scored with the other folds as its exemplar
pool, one bank per fold; ``eval`` then gives the MADRAG paper's Table 2's extreme-subset sizes (2,474 and 67).

The fast test replaces the bank by a stand-in (same questions, same job path); the integration test builds the
real per-fold banks (with the hashing embedder: minutes on two cores).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import madrag.retrieval.folds
from madrag.data.essay import Essay
from madrag.data.loaders import load_essays
from madrag.data.splits import fold_pools, split_essays
from madrag.errors import InputError
from madrag.evaluation.agreement import evaluate_run
from madrag.evaluation.run import load_run
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers import ProviderSpec
from madrag.retrieval.bank import Exemplar, LevelExemplar
from madrag.rubric import Rubric, Trait, load_rubric

TABLE2_N = {7: 2474, 8: 67}  # the MADRAG paper's Table 2, N per essay set


def _essay(eid: str, fold: int | None) -> Essay:
    return Essay(id=eid, text=f"essay {eid}", fold=fold)


def test_fold_pools_leave_out_each_essays_own_fold() -> None:
    essays = [_essay(f"e{i}", i % 3) for i in range(9)]
    pools = fold_pools(essays)
    assert sorted(pools) == [0, 1, 2]
    for fold, pool in pools.items():
        assert len(pool) == 6 and all(e.fold != fold for e in pool)
    with pytest.raises(InputError, match="fold"):
        fold_pools([_essay("a", 0), _essay("b", None)])
    with pytest.raises(InputError, match="two folds"):
        fold_pools([_essay("a", 0), _essay("b", 0)])
    scored, pool = split_essays(essays, "each")
    assert scored == essays and pool == essays  # every essay scored; each fold gets its own pool from the bank
    assert split_essays(essays, 1) == ([e for e in essays if e.fold == 1], [e for e in essays if e.fold != 1])
    with pytest.raises(InputError, match="eval_fold"):
        split_essays(essays, "every")


class MemoryBank:
    """A stand-in for the exemplar bank: per level, the first pool essay with that reference."""

    def __init__(self, pool: list[Essay], rubric: Rubric) -> None:
        self.pool, self.rubric = pool, rubric
        self.fingerprint, self.size, self.built_now = f"memory-{len(pool)}", len(pool), True
        self.first = {
            (t.name, s): next((e for e in pool if e.reference(t) == s), None) for t in rubric.traits for s in t.scores
        }

    @classmethod
    def build_or_load(cls, pool: list[Essay], rubric: Rubric, *_args: object, **_kwargs: object) -> MemoryBank:
        return cls(pool, rubric)

    def per_level(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        out = []
        for s in trait.scores:
            e = self.first[(trait.name, s)]
            ex = None if e is None else Exemplar(essay_id=e.id, text=e.text, distance=0.5, similarity=0.5)
            out.append(LevelExemplar(trait=trait.name, score=s, exemplar=ex))
        return out

    def similar(self, essay: Essay, k: int) -> list[Exemplar]:
        return [Exemplar(essay_id=e.id, text=e.text, distance=0.5, similarity=0.5) for e in self.pool[:k]]


@pytest.mark.parametrize("essay_set", [7, 8])
def test_fold_each_reproduces_table2_sizes_without_leaking_a_fold(
    essay_set: int, asap: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(madrag.retrieval.folds, "ExemplarBank", MemoryBank)
    _check_fold_each_run(essay_set, asap, tmp_path)


@pytest.mark.integration
@pytest.mark.parametrize("essay_set", [7, 8])
def test_fold_each_with_real_banks(essay_set: int, asap: Path, tmp_path: Path) -> None:
    """The real per-fold banks, each built from the whole set less one fold, queried for the set's first
    {REAL_SCORED} essays (every fold among them): the fast test above checks Table 2's N on every essay."""
    _check_fold_each_run(essay_set, asap, tmp_path, limit=REAL_SCORED)


REAL_SCORED = 150


def _check_fold_each_run(essay_set: int, asap: Path, tmp_path: Path, limit: int | None = None) -> None:
    """Score a set (its first ``limit`` essays; all of them by default) with ``--fold each`` (fake provider,
    MARAG); check folds and pools, and with every essay scored, Table 2's N."""
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=asap / f"rubric_set{essay_set}.json",
        run_dir=tmp_path / "run",
        eval_fold="each",
        protocols=["MARAG"],
        provider=ProviderSpec(kind="fake"),
        embedder="hashing",
        cache_dir=tmp_path / "cache",
        response_cache=False,
        limit=limit,
    )
    result = asyncio.run(execute(job))
    by_id = {e.id: e for e in load_essays(job.data, load_rubric(job.rubric))}  # the scored essays and their pools
    assert len({e.fold for e in result.essays}) == 5
    assert len(result.bank_info["per_fold"]) == 5
    run = load_run(job.run_dir)
    assert run.config["eval_fold"] == "each"  # recorded: a resume with another --fold is refused
    assert {"verify_claims": False, "sarag_exemplars": "span", "prompt_layout": "seed"}.items() <= run.config[
        "settings"
    ].items()
    seen = 0
    for record in run.judges:
        own = by_id[record.essay_id].fold
        for level in record.context["exemplars"]:
            if level["exemplar"] is not None:
                seen += 1
                assert by_id[level["exemplar"]["essay_id"]].fold != own
    assert seen > 0
    if limit is not None:
        assert len(result.essays) == limit and {r.essay_id for r in run.judges} == {e.id for e in result.essays}
        assert len({by_id[r.essay_id].fold for r in run.judges}) == 5  # every fold's bank was queried
        return
    extreme = evaluate_run(run, bootstrap=10).extreme  # what `madrag eval` computes, from the run read above
    pooled = extreme[(extreme["protocol"] == "MARAG") & (extreme["trait"] == "all")].iloc[0]
    assert pooled["n"] == TABLE2_N[essay_set]
    assert pooled["n_unusable"] == 0
