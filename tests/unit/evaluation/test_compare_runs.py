"""``madrag compare RUN RUN...``: each run's QWK per trait and the paired bootstrap difference on shared essays,
checked against a bootstrap computed here by hand with numpy on the same seed."""

from __future__ import annotations

import asyncio
import csv
from pathlib import Path

import numpy as np
import pytest

from madrag.cli.compare import compare_command
from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.evaluation.compare_runs import compare_runs
from madrag.evaluation.run import RunData
from madrag.pipeline.job import ScoreJob, execute
from madrag.protocols.scores import TraitScore
from madrag.providers import ProviderSpec
from madrag.rubric import Rubric, Trait

IDEAS = Trait(name="Ideas", min=0, max=3, levels={0: "none", 1: "some", 2: "good", 3: "great"})
RUBRIC = Rubric(traits=[IDEAS])
REFS = [0, 1, 2, 3, 1, 2, 2, 0, 3, 1, 2, 3]
SCORES_A = [0, 1, 1, 3, 2, 2, 2, 1, 3, 0, 2, 2]
SCORES_B = [1, 1, 2, 2, 1, 3, None, 0, 3, 1, 1, None]


def _run(folder: Path, scores: list[int | None], refs: list[int]) -> RunData:
    essays = [Essay(id=f"e{i}", text="An essay.", rater_scores={"Ideas": [r, r]}) for i, r in enumerate(refs)]
    found = [TraitScore(essay_id=f"e{i}", trait="Ideas", protocol="MADRAG", score=s) for i, s in enumerate(scores)]
    return RunData(folder, RUBRIC, essays, found, ["MADRAG"], None)


def _qwk(a: np.ndarray, b: np.ndarray, k: int = 4) -> float:
    """Quadratic weighted kappa written out: 1 - sum(W * O) / sum(W * E)."""
    observed = np.zeros((k, k))
    for x, y in zip(a, b, strict=True):
        observed[int(x), int(y)] += 1
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / len(a)
    weights = np.array([[(i - j) ** 2 for j in range(k)] for i in range(k)]) / (k - 1) ** 2
    denominator = float((weights * expected).sum())
    return float("nan") if denominator == 0 else 1 - float((weights * observed).sum()) / denominator


def test_paired_difference_is_the_hand_computed_bootstrap(tmp_path: Path) -> None:
    refs_b = list(REFS)
    refs_b[4] = 3  # essay e4 has another reference in run B: left out of the pair, counted
    run_a, run_b = _run(tmp_path / "a", SCORES_A, REFS), _run(tmp_path / "b", SCORES_B, refs_b)
    result = compare_runs([run_a, run_b], bootstrap=500, seed=7)
    [row] = result.differences.to_dict(orient="records")
    shared = [i for i in range(12) if SCORES_B[i] is not None and i != 4]  # in run A's essay order
    ref = np.array([REFS[i] for i in shared])
    a = np.array([SCORES_A[i] for i in shared])
    b = np.array([SCORES_B[i] for i in shared])
    rows = np.random.default_rng(7).integers(0, len(shared), size=(500, len(shared)))
    diffs = np.array([_qwk(ref[r], b[r]) - _qwk(ref[r], a[r]) for r in rows])
    diffs = diffs[np.isfinite(diffs)]
    low, high = np.percentile(diffs, [2.5, 97.5])
    p = min(1.0, 2 * (1 + min(int((diffs <= 0).sum()), int((diffs >= 0).sum()))) / (1 + diffs.size))
    assert (row["run"], row["baseline_run"], row["n"], row["n_reference_differs"]) == ("b", "a", len(shared), 1)
    assert row["diff"] == pytest.approx(_qwk(ref, b) - _qwk(ref, a))
    assert (row["ci_low"], row["ci_high"], row["p_value"]) == pytest.approx((low, high, p))
    agreement = {r["run"]: r for r in result.agreement.to_dict(orient="records")}
    assert agreement["a"]["n"] == 12 and agreement["a"]["qwk"] == pytest.approx(
        _qwk(np.array(REFS), np.array(SCORES_A))
    )
    assert agreement["b"]["n"] == 10  # its own essays with a usable score, e4 with its own reference
    assert any("different human reference" in note for note in result.notes)
    again = compare_runs([run_a, run_b], bootstrap=500, seed=7).differences
    assert again.equals(result.differences)  # seeded: the same CI and p-value


def test_one_essay_is_undefined_not_zero(tmp_path: Path) -> None:
    one = _run(tmp_path / "one", [2], [2])
    other = _run(tmp_path / "other", [1], [2])
    result = compare_runs([one, other], bootstrap=50, seed=0)
    assert result.agreement["qwk"].isna().all() and list(result.agreement["n"]) == [1, 1]
    assert result.differences["diff"].isna().all()


def test_a_protocol_a_run_lacks_is_refused(tmp_path: Path) -> None:
    run_a, run_b = _run(tmp_path / "a", SCORES_A, REFS), _run(tmp_path / "b", SCORES_B, REFS)
    with pytest.raises(InputError, match="no protocol 'MA'"):
        compare_runs([run_a, run_b], protocol="MA")
    with pytest.raises(InputError, match="at least two"):
        compare_runs([run_a])


def _fake_run(asap: Path, folder: Path) -> Path:
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=asap / "rubric_set7.json",
        run_dir=folder,
        limit=4,
        protocols=["MA"],
        provider=ProviderSpec(kind="fake"),
        cache_dir=folder.parent / "cache",
        response_cache=False,
    )
    asyncio.run(execute(job))
    return job.run_dir


def test_compare_command_prints_and_saves(asap: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = _fake_run(asap, tmp_path / "r1"), _fake_run(asap, tmp_path / "r2")
    compare_command([first, second], bootstrap=20, seed=1)
    out = capsys.readouterr().out
    assert "QWK difference vs r1" in out
    rows = list(csv.DictReader((first / "compare" / "differences.csv").open()))
    assert {r["run"] for r in rows} == {"r2"} and all(r["n"] == "4" for r in rows)
    # the fake backend gives every essay one score: QWK is undefined, said as such, never 0
    assert "undefined (4)" in (first / "compare" / "compare.md").read_text()
    with pytest.raises(InputError, match="same run"):
        compare_command([first, first])
