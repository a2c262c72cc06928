"""Resuming a finished run answers from the store alone: no exemplar bank, embedder or backend is built."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import Any

import pytest

from madrag.pipeline import job as job_module
from madrag.pipeline.hooks import RunHooks
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers.spec import ProviderSpec


class Stages(RunHooks):
    """Hooks that keep the run's stage lines."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def on_stage(self, message: str) -> None:
        self.lines.append(message)


def _files(tmp_path: Path, n: int = 8) -> tuple[Path, Path]:
    rubric = {
        "name": "letters",
        "prompt": "Write a letter about a park.",
        "traits": [{"name": t, "min": 1, "max": 4, "levels": {s: f"{t} {s}" for s in range(1, 5)}} for t in ("A", "B")],
    }
    rubric_path = tmp_path / "rubric.json"
    rubric_path.write_text(json.dumps(rubric), encoding="utf-8")
    data = tmp_path / "essays.csv"
    with data.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "text", "fold", "A", "B"])
        for i in range(n):
            writer.writerow(
                [f"e{i}", f"Essay {i} about parks, trees and benches {i % 3}.", i % 2, 1 + i % 4, 4 - i % 4]
            )
    return data, rubric_path


def _job(tmp_path: Path, limit: int, protocols: list[str]) -> ScoreJob:
    data, rubric = _files(tmp_path)
    return ScoreJob(
        data=data,
        rubric=rubric,
        run_dir=tmp_path / "run",
        limit=limit,
        protocols=protocols,
        provider=ProviderSpec(kind="fake"),
        cache_dir=tmp_path / "cache",
        response_cache=False,
        embedder="hashing",
    )


def _forbid_building(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a finished run built a bank or a backend")

    monkeypatch.setattr(job_module, "build_bank", refuse)
    monkeypatch.setattr(job_module, "managed", refuse)


@pytest.mark.parametrize(
    "protocols",
    [
        ["MADRAG"],
        ["SA", "SARAG", "MA", "MAD", "MARAG", "MADRAG"],
        ["SingleJudge", "StrictJudge", "ConsensusMAD", "ScoreMaskedMAD"],
    ],
)
async def test_a_finished_run_resumes_without_bank_or_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocols: list[str]
) -> None:
    job = _job(tmp_path, 3, protocols)
    first = await execute(job)
    assert not first.resumed and first.stats.made > 0
    _forbid_building(monkeypatch)
    stages: list[str] = []
    started = time.perf_counter()
    again = await execute(job, Stages(stages))
    elapsed = time.perf_counter() - started
    assert again.resumed and any("nothing left to do" in s for s in stages)
    key = {(s.protocol, s.essay_id, s.trait): s.score for s in first.scores}
    assert {(s.protocol, s.essay_id, s.trait): s.score for s in again.scores} == key
    assert again.stats.reused > 0 and again.bank_info == first.bank_info
    assert elapsed < 5.0, f"resuming a finished 3-essay run took {elapsed:.1f} s"


async def test_a_run_with_work_left_still_builds_and_scores(tmp_path: Path) -> None:
    await execute(_job(tmp_path, 2, ["MADRAG"]))
    stages: list[str] = []
    more = await execute(_job(tmp_path, 3, ["MADRAG"]), Stages(stages))
    assert not any("nothing left to do" in s for s in stages)
    assert len({s.essay_id for s in more.scores}) == 3 and all(s.score is not None for s in more.scores)
    assert more.stats.reused > 0


def test_every_run_reading_command_takes_the_run_folder_as_an_argument(tmp_path: Path) -> None:
    """``madrag eval RUN_DIR`` (and report, errors, costs, runs export) as the docs write them."""
    from typer.testing import CliRunner

    from madrag.cli.app import app

    runner = CliRunner()
    missing = tmp_path / "nothing-here"
    for command in (["eval"], ["report"], ["errors"], ["costs"], ["runs", "export"], ["eval-consensus"]):
        positional = runner.invoke(app, [*command, str(missing)])
        option = runner.invoke(app, [*command, "--run-dir", str(missing)])
        for result in (positional, option):
            assert "unexpected extra argument" not in result.output
            assert isinstance(result.exception, Exception) and f"no run at {missing}" in str(result.exception)


async def test_a_run_opens_its_store_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new run, a resumed one with calls left, and a finished one each open the run store once (the stored
    configuration is read from the store the run writes, not from a store opened beside it)."""
    from madrag.store import RunStore

    opened: list[bool] = []
    real_init = RunStore.__init__

    def counting(self: RunStore, path: str | Path, *, read_only: bool = False, **kwargs: Any) -> None:
        if Path(path).parent == tmp_path / "run":
            opened.append(read_only)
        real_init(self, path, read_only=read_only, **kwargs)

    monkeypatch.setattr(RunStore, "__init__", counting)
    for limit in (2, 4, 4):  # new; resumed with two essays left; finished
        opened.clear()
        await execute(_job(tmp_path, limit, ["MA"]))
        assert opened == [False], f"limit {limit}: the store was opened {len(opened)} times ({opened})"
