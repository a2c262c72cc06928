"""A QWK that is undefined (one essay, a rater who gave one score only) is shown as undefined everywhere: the run's
table, its markdown, the paper beside it (never compared with a paper's figure), and the merged table (issue 43)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

from madrag.evaluation.agreement import HH_EVAL, evaluate
from madrag.evaluation.merge import merge_qwk, merged_wide
from madrag.evaluation.tables import render_markdown
from madrag.paper.beside_paper import beside_markdown, beside_paper
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers.base import ChatRequest
from madrag.providers.fake import FakeProvider, FakeReply


def _one_essay_run(asap: Path, tmp_path: Path) -> Path:
    """A MAD run of one essay of set 7 whose Judge gives 0, a score its human reference is not."""

    def script(request: ChatRequest) -> FakeReply:
        return FakeReply("Weighing both arguments.\nFinal score: 0")

    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=asap / "rubric_set7.json",
        run_dir=tmp_path / "one",
        limit=1,
        protocols=["MAD"],
        cache_dir=tmp_path / "cache",
        response_cache=False,
    )
    asyncio.run(execute(job, backend=FakeProvider(script=script)))
    return job.run_dir


def test_the_qwk_of_one_essay_is_undefined_everywhere(asap: Path, tmp_path: Path) -> None:
    evaluation = evaluate(_one_essay_run(asap, tmp_path), bootstrap=50)
    rows = evaluation.qwk.set_index(["protocol", "trait"])
    mad, human = rows.loc["MAD"], rows.loc[HH_EVAL]
    assert (mad["n"] == 1).all() and (human["n"] == 1).all()  # one essay in each cell, no score equal to 0
    for frame in (mad, human):
        assert frame["qwk"].isna().all() and frame["ci_low"].isna().all()  # was 0.000 [0.000, 0.000]
    table = render_markdown(evaluation)
    for row in ("MAD", HH_EVAL):
        assert f"| {row} | undefined | undefined | undefined | undefined |" in table

    beside = beside_paper(evaluation)
    compared = beside.beside[(beside.beside["protocol"] == "MAD") & (beside.beside["metric"] == "qwk")]
    assert not compared.empty and compared["measured"].isna().all() and compared["diff"].isna().all()
    assert "not compared" in beside_markdown(beside)

    merged = merge_qwk([evaluation])
    cells = merged[merged["protocol"].isin(["MAD", HH_EVAL])]
    assert len(cells) == 8 and cells["qwk"].isna().all() and (cells["n_runs"] == 0).all()
    assert math.isnan(merged_wide(merged).loc["MAD", "mean"])
