"""``madrag baseline``: the LLM-free baselines stored in a run and shown by ``madrag eval`` beside the protocols."""

from __future__ import annotations

import math
from pathlib import Path

from tests.unit.pipeline.test_resume_fast import _job

from madrag.data.loaders import load_essays
from madrag.evaluation.agreement import evaluate
from madrag.evaluation.costs.tally import cost_report
from madrag.evaluation.run import load_run
from madrag.paper.baselines.feature_scorer import ForestSettings, cross_validate_features
from madrag.paper.baselines.runs import FOREST_NAME, CVOptions, cross_validate_run, knn_name, score_run
from madrag.pipeline.job import execute
from madrag.records import BASELINE_ROLE
from madrag.rubric import load_rubric
from madrag.store import RunStore

FOREST = ForestSettings(n_estimators=10)


async def test_baselines_in_a_run_score_exactly_its_essays_and_show_in_eval(tmp_path: Path) -> None:
    job = _job(tmp_path, 3, ["MADRAG"])
    await execute(job)
    outcome = score_run(job.run_dir, job.cache_dir, k=3, forest=FOREST)
    assert set(outcome.predictions) == {FOREST_NAME, knn_name(3)} and outcome.written == 2 * 3 * 2
    run = load_run(job.run_dir)
    assert run.protocols == ["MADRAG", FOREST_NAME, knn_name(3)]
    essays_of = {p: {s.essay_id for s in run.scores if s.protocol == p} for p in run.protocols}
    assert essays_of[FOREST_NAME] == essays_of[knn_name(3)] == essays_of["MADRAG"]
    store = RunStore(job.run_dir / "store.sqlite")
    try:
        records = list(store.records(role=BASELINE_ROLE))
        assert {r.settings["split"] for r in records} == {"run"}
        assert all(r.score is not None and r.score.parsed == r.score.reported for r in records)
        assert {r.settings["embedder"] for r in records if r.protocol == knn_name(3)} == {"hashing-bow[dim=256]"}
        assert BASELINE_ROLE not in {c.role for c in cost_report(store).calls}  # baselines make no calls
    finally:
        store.close()
    evaluation = evaluate(job.run_dir, bootstrap=0)
    assert {FOREST_NAME, knn_name(3), "MADRAG"} <= set(evaluation.qwk["protocol"])
    again = score_run(job.run_dir, job.cache_dir, k=3, forest=FOREST)
    assert again.written == 0 and again.existing == outcome.written


def test_cross_validated_baselines_are_a_run_matching_the_cv_functions(tmp_path: Path) -> None:
    data, rubric_path = _job(tmp_path, 3, ["MADRAG"]).data, _job(tmp_path, 3, ["MADRAG"]).rubric
    run_dir = tmp_path / "cv"
    options = CVOptions(k=3, forest=FOREST, embedder="hashing")
    outcome, results = cross_validate_run(data, rubric_path, run_dir, tmp_path / "cache", options=options)
    rubric = load_rubric(rubric_path)
    direct = cross_validate_features(load_essays(data, rubric), rubric, FOREST)
    evaluation = evaluate(run_dir, bootstrap=0)
    rows = evaluation.qwk.set_index(["protocol", "trait"])
    for trait, cv in direct.traits.items():
        assert math.isclose(float(rows.loc[(FOREST_NAME, trait), "qwk"]), cv.pooled_qwk, abs_tol=1e-9)
        assert math.isclose(float(rows.loc[(knn_name(3), trait), "qwk"]), results[1].traits[trait].pooled_qwk)
    assert outcome.mode == "cross-validated over folds"


async def test_baselines_of_a_fold_each_run_score_every_fold_from_the_others(tmp_path: Path) -> None:
    """Under --fold each every essay is scored, each fold by a model of the other folds (as its exemplars were)."""
    job = _job(tmp_path, 8, ["MARAG"]).model_copy(update={"eval_fold": "each", "limit": None})
    await execute(job)
    outcome = score_run(job.run_dir, job.cache_dir, k=2, forest=FOREST)
    assert outcome.settings[FOREST_NAME]["trained_on"] == [4, 4]  # two folds of 4 essays: each model has the other
    scored = {essay_id for essay_id, _ in outcome.predictions[FOREST_NAME]}
    assert scored == {f"e{i}" for i in range(8)} == {essay_id for essay_id, _ in outcome.predictions[knn_name(2)]}
    assert outcome.mode == "the run's split (eval fold each)"
