"""``madrag eval-consensus RUN_A RUN_B ...`` on runs of the fake backend: each run's own tables, the averages over
the judge models, the cross-model grid and Figure 2."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from madrag.store import RunStore


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=300)


def _copy_with(run: Path, to: Path, **changes: Any) -> Path:
    """A copy of ``run`` whose stored configuration has ``changes`` (a key set to None is removed): the same
    scores recorded as if another judge model had made them."""
    shutil.copytree(run, to)
    store = RunStore(to / "store.sqlite")
    try:
        config = dict(store.get_meta("config"))
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        store.set_meta("config", config)
    finally:
        store.close()
    return to


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open()))


def _pooled(rows: list[dict[str, str]], protocol: str, **where: str) -> dict[str, str]:
    found = [r for r in rows if r["protocol"] == protocol and r["trait"] == "all" and where.items() <= r.items()]
    assert len(found) == 1
    return found[0]


def test_several_runs_are_averaged_and_gridded(asap: Path, tmp_path: Path) -> None:
    run = tmp_path / "fake"
    proc = _cli(
        "ablate-consensus", "--data", str(asap / "training_set_rel3_sets7_8.tsv"),
        "--rubric", str(asap / "rubric_set7.json"), "--run-dir", str(run), "--cache-dir", str(tmp_path / "cache"),
        "--provider", "fake", "--limit", "2",
        *("-p", "SingleJudge", "-p", "StrictJudge", "-p", "LenientJudge", "-p", "ConsensusMAD"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    other = _copy_with(run, tmp_path / "other", provider={"kind": "openai", "model": "m-b"})
    mixed = _copy_with(run, tmp_path / "mixed", role_providers={"lenient": {"kind": "openai", "model": "m-b"}})
    out = tmp_path / "models"
    done = _cli("paper", "eval-consensus", str(run), str(other), str(mixed), "--bootstrap", "0", "--out", str(out))
    assert done.returncode == 0, done.stderr
    for folder in (run, other, mixed):  # each run's own tables, as eval-consensus RUN writes them
        assert (folder / "consensus" / "alignment.csv").is_file()
        assert (folder / "consensus" / "rmse_by_round.png").read_bytes()[:4] == b"\x89PNG"
    own = _pooled(_rows(run / "consensus" / "alignment.csv"), "ConsensusMAD")
    averaged = _pooled(_rows(out / "averaged_alignment.csv"), "ConsensusMAD")
    # the same scores under two model names: their mean is the run's own value; the mixed run is not averaged
    assert averaged["models"] == "fake, m-b" and averaged["n_runs"] == "2"
    assert float(averaged["rmse"]) == float(own["rmse"])
    grid = {(r["strict_model"], r["lenient_model"]): r for r in _rows(out / "cross_model_grid.csv")}
    assert set(grid) == {("fake", "fake"), ("m-b", "m-b"), ("fake", "m-b")}
    assert float(grid[("fake", "m-b")]["value"]) == float(own["rmse"]) and grid[("fake", "m-b")]["runs"] == "mixed"
    assert (out / "rmse_by_round.png").read_bytes()[:4] == b"\x89PNG"
    md = (out / "consensus_models.md").read_text()
    assert "models averaged: fake, m-b" in md and "mixed: its roles used different models" in md
    assert "models averaged: fake, m-b" in done.stdout


def test_runs_of_another_rubric_are_refused(asap: Path, tmp_path: Path) -> None:
    run = tmp_path / "fake"
    proc = _cli(
        "score", "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(asap / "rubric_set7.json"),
        "--run-dir", str(run), "--cache-dir", str(tmp_path / "cache"), "--provider", "fake", "--limit", "2",
        "-p", "SingleJudge",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    store = RunStore(run / "store.sqlite")
    try:
        rubric = dict(store.get_meta("config")["rubric"])
    finally:
        store.close()
    rubric["traits"] = [
        {**t, "max": t["max"] + 1, "levels": {**t["levels"], str(t["max"] + 1): "more"}} for t in rubric["traits"]
    ]
    other = _copy_with(run, tmp_path / "other", rubric=rubric)
    bad = _cli("paper", "eval-consensus", str(run), str(other), "--bootstrap", "0")
    assert bad.returncode == 2 and "different rubrics" in bad.stderr
    assert not (run / "consensus").exists()  # refused before any run's tables are written
    metric = _cli("paper", "eval-consensus", str(run), str(run), "--grid-metric", "qwk")
    assert metric.returncode == 2 and "--grid-metric must be one of rmse" in metric.stderr
