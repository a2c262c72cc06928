"""A run made by the release at commit b8ea291 (``tests/data/release_b8ea291/run``, made by ``make_run.py`` beside
it), before runs kept their prompt templates and when ``placeholders`` defaulted to ``none``: ``madrag resume``
continues it with the settings it recorded. It is finished, so its scores are read with 0 new calls (its prompts are
not used, and the note says they are not this release's). A job with calls left is refused in one line naming the
template this release uses that b8ea291 did not (debater_turn: the debaters read the turns through it since), even
with that release's texts (``prompts/``, recovered from git when the fixture was made; madrag reads no git)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from madrag.agents.prompts import PromptLibrary
from madrag.api.scoring import run_job
from madrag.errors import ConfigError
from madrag.evaluation.run import open_store
from madrag.pipeline.recorded import recorded_job

FIXTURE = Path(__file__).parents[2] / "data" / "release_b8ea291"


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE / "run", run)
    return run


def resume(run: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = ["resume", str(run), "--cache-dir", str(tmp_path / "cache"), *extra]
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=180)


def _differing() -> list[str]:
    """The templates whose text the release changed since b8ea291 (of those the run used), found by comparing files."""
    today = PromptLibrary()
    return sorted(
        p.stem for p in (FIXTURE / "prompts").glob("*.txt") if p.read_text("utf-8").rstrip("\n") != today.text(p.stem)
    )


def test_the_fixture_is_an_old_finished_run_without_its_templates() -> None:
    store = open_store(FIXTURE / "run")
    try:
        config = store.get_meta("config")
        assert config is not None and config["settings"]["placeholders"] == "none"  # that release's default
        assert store.count() == 13 and len(store.essays()) == 1  # 4 traits x 3 calls + 1 SA call
    finally:
        store.close()
    assert not (FIXTURE / "run" / "prompts").exists()
    assert _differing()  # the packaged texts changed since: what made the run refused


def test_resume_reads_its_finished_scores_with_zero_new_calls(old_run: Path, tmp_path: Path) -> None:
    proc = resume(old_run, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "0 agent calls made" in " ".join(proc.stdout.split())
    note = " ".join(proc.stderr.split())
    assert "debater_turn" in note and "none was used" in note  # said, not hidden: its prompts are not this release's
    store = open_store(old_run)
    assert store.count() == 13 and len(store.essays()) == 1
    store.close()
    assert not (old_run / "prompts").exists()  # never a copy of texts the run was not made with


@pytest.mark.parametrize("with_old_texts", [False, True])
def test_calls_left_are_refused_naming_the_templates(old_run: Path, tmp_path: Path, with_old_texts: bool) -> None:
    """The run's second essay would need new calls: this release's debaters read the turns through a template
    (debater_turn) b8ea291 did not have, so no call can be made as that run made its own, even with that release's
    texts (--prompts-dir): the refusal says so in one line and writes nothing."""
    job = recorded_job(old_run, tmp_path / "cache", FIXTURE / "prompts" if with_old_texts else None)
    with pytest.raises(ConfigError) as caught:
        run_job(job.model_copy(update={"ids": None}), progress=False)
    message = str(caught.value)
    assert "\n" not in message and "settings." not in message  # its recorded settings (placeholders none) match
    assert "templates the run's release did not have: debater_turn" in message
    assert "continue it with the release that made it" in message
    store = open_store(old_run)
    assert store.count() == 13 and len(store.essays()) == 1  # nothing written
    store.close()
