"""A run made by the previous release (``tests/data/previous_release/run``, made at commit eb6de4e by
``tests/data/previous_release/make_run.py``: 2 of 3 in-memory essays scored with MADRAG and SA on the fake
backend) opens, evaluates, exports and resumes under this code: its stored configuration (version 1, no
``config_version``) is upgraded before it is compared (:mod:`madrag.store.run_config`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from madrag.api.scoring import run_job
from madrag.cli.app import app
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.evaluation.run import load_run, open_store
from madrag.pipeline.job import ScoreJob
from madrag.pipeline.migrations import CONFIG_VERSION, identity, upgrade
from madrag.providers.spec import ProviderSpec
from madrag.settings import ScoringSettings
from madrag.store.run_config import VERSION_KEY

FIXTURE = Path(__file__).parents[2] / "data" / "previous_release" / "run"
PROTOCOLS = ["MADRAG", "SA"]


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    """A copy of the fixture run (the committed one is never written)."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    return run


def _essays(run: Path, name: str) -> list[Essay]:
    return [Essay.model_validate_json(line) for line in (run / "inputs" / name).read_text("utf-8").splitlines()]


def _job(run: Path, tmp_path: Path, **update: object) -> ScoreJob:
    """The old run's job as this code builds it (same essays, pool, rubric, protocols and backend; no limit)."""
    job = ScoreJob(
        essays=_essays(run, "essays.jsonl"),
        pool=_essays(run, "pool.jsonl"),
        rubric=run / "inputs" / "rubric.json",
        run_dir=run,
        protocols=PROTOCOLS,
        provider=ProviderSpec(kind="fake"),
        cache_dir=tmp_path / "cache",
        response_cache=False,
        embedder="hashing",
    )
    return job.model_copy(update=update)


def test_the_fixture_is_a_version_1_run_partly_finished() -> None:
    store = open_store(FIXTURE)
    try:
        config = store.get_meta("config")
        assert config is not None and VERSION_KEY not in config  # written before run configs carried a version
        assert "reference_ties" not in config["settings"]  # the previous release left the default rule out
        assert store.count() == 26 and len(store.essays()) == 2  # 2 essays x (4 traits x 3 calls + 1 SA call)
    finally:
        store.close()


def test_the_old_config_reads_as_this_version() -> None:
    store = open_store(FIXTURE)
    try:
        config = store.get_meta("config")
    finally:
        store.close()
    assert config is not None
    upgraded = upgrade(config)
    assert upgraded[VERSION_KEY] == CONFIG_VERSION
    assert upgraded["settings"]["reference_ties"] == "half_up"
    assert upgraded["prompts"] == sorted(config["prompts"])  # names; where each came from is provenance
    assert upgraded["prompt_sources"] == config["prompts"]
    assert "prompt_sources" not in identity(config)
    with pytest.raises(ConfigError, match="newer madrag"):
        upgrade({**config, VERSION_KEY: CONFIG_VERSION + 1})


def test_it_opens_evaluates_and_exports(old_run: Path, tmp_path: Path) -> None:
    data = load_run(old_run)
    assert [e.id for e in data.essays] == [e.id for e in _essays(old_run, "essays.jsonl")[:2]]
    runner = CliRunner()
    evaluated = runner.invoke(app, ["eval", str(old_run), "--bootstrap", "0", "--out", str(tmp_path / "eval")])
    assert evaluated.exit_code == 0, evaluated.output
    assert any((tmp_path / "eval").iterdir())
    exported = runner.invoke(app, ["errors", str(old_run), "--out", str(tmp_path / "errors.csv")])
    assert exported.exit_code == 0, exported.output
    assert (tmp_path / "errors.csv").read_text("utf-8").strip()
    report = runner.invoke(app, ["report", str(old_run), "--bootstrap", "0", "--out", str(tmp_path / "r.html")])
    assert report.exit_code == 0, report.output
    assert "MADRAG" in (tmp_path / "r.html").read_text("utf-8")


def test_it_resumes_reusing_every_stored_call(old_run: Path, tmp_path: Path) -> None:
    before = json.loads(json.dumps(_stored_config(old_run)))
    result = run_job(_job(old_run, tmp_path), progress=False)
    assert result.resumed
    assert result.stats.reused == 26  # every call of the old run read back, none made again
    assert result.stats.made == 4 * 3 + 1  # the third essay: MADRAG's 4 traits x 3 calls, SA's one call
    assert {s.essay_id for s in result.trait_scores} == {e.id for e in _essays(old_run, "essays.jsonl")}
    assert all(s.score is not None for s in result.trait_scores)
    assert _stored_config(old_run) == before  # the stored configuration is kept as the old release wrote it
    again = run_job(_job(old_run, tmp_path), progress=False)
    assert again.resumed and again.stats.made == 0


def test_other_settings_are_still_refused(old_run: Path, tmp_path: Path) -> None:
    job = _job(old_run, tmp_path, settings=ScoringSettings(judges_per_trait=2))
    with pytest.raises(ConfigError, match=r"different settings \(settings\.judges_per_trait\)"):
        run_job(job, progress=False)


def _stored_config(run: Path) -> object:
    store = open_store(run)
    try:
        return store.get_meta("config")
    finally:
        store.close()
