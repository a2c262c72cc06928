"""The confidence paper's Table 2 (the ASAP subsets used): computed from the runs' data, one row per set."""

from __future__ import annotations

import asyncio
from pathlib import Path

from madrag.paper.confidence.subsets import subsets_markdown, subsets_table
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers import ProviderSpec


def _run(asap: Path, tmp_path: Path, essay_set: int) -> Path:
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=asap / f"rubric_set{essay_set}.json",
        run_dir=tmp_path / f"set{essay_set}",
        limit=3,
        protocols=["MA"],
        provider=ProviderSpec(kind="fake"),
        cache_dir=tmp_path / "cache",
        response_cache=False,
    )
    asyncio.run(execute(job))
    return job.run_dir


def test_table2_counts_each_set_from_its_data(asap: Path, tmp_path: Path) -> None:
    table = subsets_table({"Set 7": _run(asap, tmp_path, 7), "Set 8": _run(asap, tmp_path, 8)})
    rows = table.set_index("set").to_dict(orient="index")
    # the MADRAG paper's Table 6 gives the same sizes (1,569 and 723) and trait counts (4 and 6)
    assert rows["Set 7"]["essays"] == 1569 and rows["Set 8"]["essays"] == 723
    assert rows["Set 7"]["essays_in_run"] == 3 and rows["Set 7"]["traits"] == 4 and rows["Set 8"]["traits"] == 6
    assert rows["Set 7"]["score_ranges"] == "0-3" and rows["Set 8"]["score_ranges"] == "1-6"
    assert rows["Set 7"]["raters"] == "2" and rows["Set 8"]["raters"] == "2 (3 on 128 essays)"
    assert rows["Set 7"]["prompt"].startswith("Write about patience")
    assert 100 < rows["Set 7"]["mean_words"] < rows["Set 8"]["mean_words"]
    assert "| Set 8 | 8 | 723 |" in subsets_markdown(table)


def test_a_run_without_a_rubric_is_a_row_of_missing_cells(tmp_path: Path) -> None:
    table = subsets_table({"x": tmp_path / "nothing"})
    assert table["essays"].isna().all() and table["note"].iloc[0].startswith("not read")
