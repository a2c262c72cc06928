"""A run made by the release at commit b8ea291 (``tests/data/release_b8ea291/run``, made by ``make_run.py`` beside
it), before runs kept their prompt templates and when ``placeholders`` defaulted to ``none``, continues with
``madrag resume``: with the settings it recorded, and - since it keeps no copy of its templates - with
``--prompts-dir`` holding that release's texts (recovered from git when the fixture was made; madrag reads no git).
Without them the refusal names exactly the templates that differ and says how to resume."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from madrag.agents.prompts import PromptLibrary
from madrag.evaluation.run import open_store

FIXTURE = Path(__file__).parent / "data" / "release_b8ea291"


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


def test_without_its_templates_the_refusal_names_them_and_how(old_run: Path, tmp_path: Path) -> None:
    proc = resume(old_run, tmp_path)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    named = re.search(r"prompt templates differ from the run's: ([\w, ]+) \(", errors[0])
    assert named is not None, errors[0]
    assert sorted(named.group(1).split(", ")) == _differing()
    assert "--prompts-dir" in errors[0] and "settings." not in errors[0]  # the recorded settings are used
    assert not (old_run / "prompts").exists()  # nothing written by the refused command


def test_it_resumes_with_zero_new_calls_and_keeps_its_templates(old_run: Path, tmp_path: Path) -> None:
    proc = resume(old_run, tmp_path, "--prompts-dir", str(FIXTURE / "prompts"))
    assert proc.returncode == 0, proc.stderr
    assert "0 agent calls made" in " ".join(proc.stdout.split())
    store = open_store(old_run)
    assert store.count() == 13
    store.close()
    kept = sorted(p.stem for p in (old_run / "prompts").glob("*.txt"))
    assert kept == sorted(p.stem for p in (FIXTURE / "prompts").glob("*.txt"))
    again = resume(old_run, tmp_path)  # its own copy now: no --prompts-dir needed
    assert again.returncode == 0, again.stderr
    assert "0 agent calls made" in " ".join(again.stdout.split())
