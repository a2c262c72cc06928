"""The web app's shipped ASAP exemplar pool is the job's explicit pool (``ScoreJob.pool``), not essays packed
into the data file under another fold; a run made the old way still resumes so."""

from __future__ import annotations

from pathlib import Path

from madrag.data.essay import Essay
from madrag.data.loaders import load_asap
from madrag.pipeline.job import job_rubric, select_essays
from madrag.rubric import Rubric, load_rubric
from madrag.server import library
from madrag.settings import ScoringSettings


def _inputs(asap: Path) -> tuple[Rubric, list[Essay], list[Essay]]:
    rubric = load_rubric(asap / "rubric_set7.json")
    essays = load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric)
    return rubric, essays[:3], essays[10:20]


def test_the_asap_pool_is_the_jobs_pool(tmp_path: Path, asap: Path) -> None:
    rubric, essays, pool = _inputs(asap)
    inputs = library.write_inputs(tmp_path, rubric, essays, "asap", pool, 0)
    assert inputs.eval_fold is None and inputs.pool == tmp_path / "inputs" / library.POOL_FILE
    job = library.make_job(tmp_path, inputs, ["MADRAG"], library.provider_spec("fake", None, None, "K", None),
                           ScoringSettings(), tmp_path / "cache")  # fmt: skip
    assert job.pool is not None and [e.id for e in job.pool] == [library.POOL_PREFIX + e.id for e in pool]
    assert [e.text for e in job.pool] == [e.text for e in pool]
    chosen, exemplars = select_essays(job, job_rubric(job))
    assert [e.id for e in chosen] == [e.id for e in essays]  # every uploaded essay is scored; no pool in the data
    assert exemplars == job.pool
    # the run's inputs as the server rebuilds them to resume it (no pool path given): the pool is found beside
    again = library.make_job(tmp_path, library.JobInputs(inputs.data, inputs.rubric, None), ["MADRAG"],
                             job.provider, ScoringSettings(), tmp_path / "cache")  # fmt: skip
    assert again.pool == job.pool


def test_a_run_packed_the_old_way_resumes_without_a_pool(tmp_path: Path, asap: Path) -> None:
    rubric, essays, pool = _inputs(asap)
    folder = tmp_path / "inputs"
    packed = [e.model_copy(update={"fold": 0}) for e in essays]
    packed += [e.model_copy(update={"fold": 1, "id": library.POOL_PREFIX + e.id}) for e in pool]
    library.write_essays(folder / "essays.jsonl", packed)
    (folder / "rubric.json").write_text(library.rubric_json(rubric), encoding="utf-8")
    inputs = library.JobInputs(folder / "essays.jsonl", folder / "rubric.json", 0)
    job = library.make_job(tmp_path, inputs, ["MADRAG"], library.provider_spec("fake", None, None, "K", None),
                           ScoringSettings(), tmp_path / "cache")  # fmt: skip
    assert job.pool is None and job.eval_fold == 0
    chosen, exemplars = select_essays(job, job_rubric(job))
    assert [e.id for e in chosen] == [e.id for e in essays]
    assert {e.id for e in exemplars} == {library.POOL_PREFIX + e.id for e in pool}
