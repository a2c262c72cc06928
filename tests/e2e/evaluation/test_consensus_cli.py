"""The consensus paper from the command line: ablate-consensus on real ASAP essays (fake backend), eval-consensus,
eval."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

from madrag.store import RunStore


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=300)


def test_ablate_consensus_then_evaluate(asap: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    common = [
        "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(asap / "rubric_set7.json"),
        "--run-dir", str(run_dir), "--cache-dir", str(tmp_path / "cache"), "--provider", "fake", "--limit", "2",
    ]  # fmt: skip
    proc = _cli("ablate-consensus", *common, "--role-provider", "lenient=fake")
    assert proc.returncode == 0, proc.stderr
    # per essay: SingleJudge 1 + shared round-0 strict/lenient 2 + ConsensusMAD and ScoreMaskedMAD 2x4 rounds x 2
    # agents + SymmetricMAD 2 + 2x4 = 1 + 2 + 16 + 10 = 29 calls
    assert "58 agent calls made" in proc.stdout.replace("\n", " ")
    store = RunStore(run_dir / "store.sqlite")
    try:
        config = store.get_meta("config")
        assert set(config["role_providers"]) == {"lenient"}
        assert {p["name"] for p in config["protocols"]} >= {"ConsensusMAD", "ScoreMaskedMAD", "SingleJudge"}
    finally:
        store.close()
    again = _cli("ablate-consensus", *common, "--role-provider", "lenient=fake")
    assert again.returncode == 0 and "0 agent calls made" in again.stdout.replace("\n", " ")
    evaluated = _cli("paper", "eval-consensus", "--run-dir", str(run_dir), "--bootstrap", "50")
    assert evaluated.returncode == 0, evaluated.stderr
    rows = list(csv.DictReader((run_dir / "consensus" / "alignment.csv").open()))
    assert {r["protocol"] for r in rows} == {
        "SingleJudge", "StrictJudge", "LenientJudge", "ConsensusMAD", "SymmetricMAD", "ScoreMaskedMAD",
    }  # fmt: skip
    trajectories = list(csv.DictReader((run_dir / "consensus" / "trajectories.csv").open()))
    assert {int(r["round"]) for r in trajectories if r["protocol"] == "ConsensusMAD"} == {0, 1, 2, 3, 4}
    assert (run_dir / "consensus" / "trajectories.png").read_bytes()[:4] == b"\x89PNG"
    assert (
        "the raters' plain mean" in (run_dir / "consensus" / "consensus.md").read_text()
    )  # the consensus paper's default
    rounded_dir = tmp_path / "rounded"
    rounded = _cli("paper", "eval-consensus", "--run-dir", str(run_dir), "--bootstrap", "0", "--reference", "rounded",
                   "--out", str(rounded_dir))  # fmt: skip
    assert rounded.returncode == 0, rounded.stderr
    assert "rounded half up" in (rounded_dir / "consensus.md").read_text()
    bad = _cli("paper", "eval-consensus", "--run-dir", str(run_dir), "--reference", "median")
    assert bad.returncode == 2 and "--reference must be one of mean, rounded" in bad.stderr
    qwk = _cli("eval", "--run-dir", str(run_dir), "--bootstrap", "0")
    assert qwk.returncode == 0, qwk.stderr
    qwk_rows = list(csv.DictReader((run_dir / "eval" / "qwk.csv").open()))
    assert {"ConsensusMAD", "SingleJudge", "LenientJudge"} <= {r["protocol"] for r in qwk_rows}


def test_runs_without_consensus_protocols_keep_their_recorded_prompt_set() -> None:
    """the MADRAG paper run's configuration (checked on resume) is unchanged by the consensus paper's templates."""
    from madrag.agents.prompts import CONSENSUS_PROMPT_NAMES as CJ
    from madrag.agents.prompts import PROMPT_NAMES
    from madrag.pipeline.job import prompt_names
    from madrag.protocols import get_protocol

    assert prompt_names([get_protocol("MADRAG"), get_protocol("SA")]) == list(PROMPT_NAMES)
    assert prompt_names([get_protocol("MAD"), get_protocol("ConsensusMAD[rounds=2]")]) == [*PROMPT_NAMES, *CJ]
