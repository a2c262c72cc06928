"""A G-Eval run made before G-Eval kept its score as a row alone: besides its rater's record, its store holds the
*derived* Judge record the earlier G-Eval wrote per score (no request, the expectation as its score) and score rows
naming those records. Such a run still reads the same scores (rows, costs, unusable counts, the Judge record behind
a score), and a resume makes no call - also when the run was made before score rows existed (rows derived from its
records by madrag.pipeline.migrations)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import earlier_derived_record, make_ctx

from madrag.api.scoring import run_job
from madrag.evaluation.costs.tally import cost_report
from madrag.evaluation.run import load_run, open_store
from madrag.evaluation.sources import judge_for, load_sources
from madrag.pipeline import migrations
from madrag.pipeline.final_scores import rows
from madrag.pipeline.job import ScoreJob
from madrag.pipeline.migrations.scores import SCORES_PENDING
from madrag.pipeline.unusable import unusable_by_protocol
from madrag.providers.fake import FakeProvider
from madrag.records import TraitScore
from madrag.rubric import load_rubric


def _scores(found: list[TraitScore]) -> dict[tuple[str, str], tuple[int | None, str]]:
    return {(s.essay_id, s.trait): (s.score, s.rationale) for s in found}


def _as_the_earlier_geval_left_it(run_dir: Path, tmp_path: Path, pending: bool) -> list[TraitScore]:
    """Add to a G-Eval run's store the derived Judge record of each score, as the earlier G-Eval stored it, and
    rows naming those records (``pending``: no rows, a store made before them); the scores the earlier G-Eval
    returned."""
    store = migrations.open_store(run_dir / "store.sqlite")
    try:
        ctx = make_ctx(tmp_path / "ctx", FakeProvider())
        earlier = []
        for score in store.scores(["GEval"]):
            rater = store.get(score.record_key)
            assert rater is not None and rater.role == "rater"
            context = {"n_usable": score.n_usable}
            derived = earlier_derived_record(
                ctx, "GEval", score.essay_id, score.trait, score.result, score.rationale, context, [rater]
            )
            store.put(derived.model_copy(update={"run_id": rater.run_id}))
            earlier.append(score.model_copy(update={"record_key": derived.key}))
        store.put_scores(rows(earlier), replace={"GEval"})
        if pending:
            store._conn.execute("DELETE FROM scores")
            store.set_meta(SCORES_PENDING, True)
        return earlier
    finally:
        store.close()


def test_an_earlier_geval_run_reads_the_same_scores_and_resumes_without_a_call(asap: Path, tmp_path: Path) -> None:
    rubric = load_rubric(asap / "rubric_set7.json").only(["Ideas", "Style"])
    for pending in (False, True):
        run_dir = tmp_path / f"run-{pending}"
        job = ScoreJob(
            data=asap / "training_set_rel3_sets7_8.tsv",
            rubric=rubric,
            run_dir=run_dir,
            limit=2,
            protocols=["GEval", "MA"],
            embedder="hashing",
            cache_dir=tmp_path / "cache",
            response_cache=False,
        )
        made = run_job(job, backend=FakeProvider(), progress=False)
        earlier = _as_the_earlier_geval_left_it(run_dir, tmp_path, pending)
        assert len(earlier) == 2 * 2 and _scores(earlier) == _scores(
            [s for s in made.trait_scores if s.protocol == "GEval"]
        )
        store = open_store(run_dir)  # read-only (a store without rows: derived in memory)
        try:
            read = store.scores(["GEval"])
            costs = cost_report(store)
            records = list(store.records())
            accounts = unusable_by_protocol(
                records, store.scores(), [e.id for e in store.essays()], rubric.trait_names, ["GEval", "MA"]
            )
        finally:
            store.close()
        assert _scores(read) == _scores(earlier) and all(v is not None for v, _ in _scores(read).values())
        raters = {r.key for r in records if r.role == "rater"}  # the rows of a run made before rows name the raters
        assert {s.record_key for s in read} == (raters if pending else {s.record_key for s in earlier})
        assert len([r for r in records if r.protocol == "GEval" and r.role == "judge"]) == 4  # the derived ones
        assert len(costs.calls) == 2 * 2 * 2  # the raters' and MA's calls; the derived records are none
        assert accounts["GEval"].given == 4 and accounts["GEval"].missing == 0
        sources = load_sources(load_run(run_dir))
        for score in read:
            judge = judge_for(sources.judges, "GEval", score.essay_id, score.trait)
            assert judge is not None and judge.rationale == score.rationale
        backend = FakeProvider()
        again = run_job(job, backend=backend, progress=False)
        assert backend.calls == [] and again.stats.made == 0
        assert _scores([s for s in again.trait_scores if s.protocol == "GEval"]) == _scores(earlier)


def test_a_geval_run_today_stores_no_judge_record_and_shows_its_rater_as_the_judge(asap: Path, tmp_path: Path) -> None:
    """Today's G-Eval keeps its score as a row naming the rater's record: the report shows that record as the score's
    Judge (its rationale; on a backend without logprobs the missing expectation's cause)."""
    from madrag.evaluation.report import write_report
    from madrag.providers.base import Capabilities

    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=load_rubric(asap / "rubric_set7.json").only(["Ideas"]),
        run_dir=tmp_path / "run",
        limit=2,
        protocols=["GEval"],
        embedder="hashing",
        cache_dir=tmp_path / "cache",
        response_cache=False,
    )
    text_only = Capabilities(logprobs=False, prefill=False, choices=False, seed=True)
    run_job(job, backend=FakeProvider(caps=text_only), progress=False)
    store = open_store(job.run_dir)
    try:
        read, records = store.scores(), list(store.records())
    finally:
        store.close()
    assert {r.role for r in records} == {"rater"} and len(read) == 2
    assert {s.record_key for s in read} == {r.key for r in records} and all(s.score is None for s in read)
    sources = load_sources(load_run(job.run_dir))  # what the errors export reads
    behind = [judge_for(sources.judges, "GEval", s.essay_id, s.trait) for s in read]
    assert {j.key for j in behind if j is not None} == {r.key for r in records} and None not in behind
    report = write_report(job.run_dir, bootstrap=10).read_text(encoding="utf-8")
    assert report.count("GEval Judge: score unusable · failed · unusable score: no score distribution") == 2
