"""``madrag resume RUN`` continues a run from its folder alone: the settings, essays, backend and prompt templates
it recorded (a new run keeps its templates in ``RUN/prompts/``, so one made with ``--prompts-dir`` resumes without
it, under any later release's packaged texts)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from madrag.agents.prompts import PromptLibrary
from madrag.evaluation.run import open_store


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=180)


def test_resume_makes_exactly_the_calls_left_with_the_runs_own_templates(asap: Path, tmp_path: Path) -> None:
    own = tmp_path / "own_prompts"
    own.mkdir()
    (own / "judge_system.txt").write_text(PromptLibrary().text("judge_system") + " Be brief.\n", encoding="utf-8")
    run = tmp_path / "run"
    made = cli("score", "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric",
               str(asap / "rubric_set7.json"), "--run-dir", str(run), "--cache-dir", str(tmp_path / "c"),
               "--protocol", "MA", "--provider", "fake", "--limit", "2", "--prompts-dir", str(own),
               "--placeholders", "none", "--judge-temperature", "0.3")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert (run / "prompts" / "judge_system.txt").read_text(encoding="utf-8").endswith(" Be brief.\n")
    conn = sqlite3.connect(run / "store.sqlite")  # as if interrupted: one essay's Ideas call never finished
    essay = conn.execute("SELECT essay_id FROM records LIMIT 1").fetchone()[0]
    conn.execute("DELETE FROM records WHERE essay_id = ? AND trait = 'Ideas'", (essay,))
    conn.execute("DELETE FROM scores WHERE essay_id = ? AND trait = 'Ideas'", (essay,))  # kept after its call
    conn.commit()
    conn.close()
    resumed = cli("resume", str(run), "--cache-dir", str(tmp_path / "c"))  # no option of the run given again
    assert resumed.returncode == 0, resumed.stderr
    assert "1 agent calls made, 7 reused from the run store" in " ".join(resumed.stdout.split())
    store = open_store(run)
    try:
        judge = next(iter(store.records(role="judge")))
        assert store.count() == 8 and judge.settings.get("temperature") == 0.3
    finally:
        store.close()


def test_resume_of_a_folder_without_a_run_is_one_line(tmp_path: Path) -> None:
    proc = cli("resume", str(tmp_path / "nothing"))
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1 and "no run to resume" in errors[0], proc.stderr
    assert not (tmp_path / "nothing").exists()
