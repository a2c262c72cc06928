"""A ``ScoreJob`` takes its rubric as a file or in memory, as it takes its essays: an in-memory rubric is not
written anywhere before the run, and the run directory keeps a copy of it (``inputs/rubric.json``)."""

from __future__ import annotations

from pathlib import Path

from madrag.api.scoring import run_job
from madrag.data.essay import Essay
from madrag.pipeline.job import ScoreJob, job_rubric
from madrag.providers.spec import ProviderSpec
from madrag.rubric import Rubric, Trait, load_rubric

RUBRIC = Rubric(name="r", traits=[Trait(name="Ideas", min=0, max=3, levels=dict.fromkeys(range(4), "..."))])


def test_an_in_memory_rubric_is_held_by_the_job_and_kept_by_the_run(tmp_path: Path) -> None:
    job = ScoreJob(
        essays=[Essay(id="a", text="An essay."), Essay(id="b", text="Another one.")],
        rubric=RUBRIC,
        run_dir=tmp_path / "run",
        eval_fold=None,
        protocols=["MA"],
        provider=ProviderSpec(kind="fake"),
        cache_dir=tmp_path / "cache",
    )
    assert job.rubric is RUBRIC and job_rubric(job) is RUBRIC
    assert not (tmp_path / "run").exists()  # nothing written to build the job
    result = run_job(job, progress=False)
    assert result.rubric == RUBRIC and len(result.trait_scores) == 2
    assert load_rubric(tmp_path / "run" / "inputs" / "rubric.json") == RUBRIC
    again = run_job(job.model_copy(update={"rubric": tmp_path / "run" / "inputs" / "rubric.json"}), progress=False)
    assert again.resumed and again.stats.made == 0  # the file and the object are the same rubric
