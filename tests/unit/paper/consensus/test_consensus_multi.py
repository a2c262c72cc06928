"""The consensus paper over several judge models: averages of Tables 1, 2, 8, 9 over runs, the essays they share, the
cross-model grid of Table 3 and Figure 2, on hand-built agent-score frames checked against hand computations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from tests.consensus_helpers import TRAITS, agent_frame, cell, direct_final, ref_frame

from madrag.errors import InputError
from madrag.paper.consensus.metrics import ALL
from madrag.paper.consensus.multi import LoadedRun, evaluate_runs, model_label, role_models
from madrag.paper.consensus.multi_tables import grid_wide, render_multi_markdown, save_multi

RUBRIC = {"traits": [{"name": t, "min": 1, "max": 5} for t in TRAITS]}
ROLES = ["single", "strict", "lenient", "neutral_a", "neutral_b"]
REF_SEED = 100  # never an agent frame's seed (the same draws would make a perfect judge)


def _run(name: str, seed: int, models: dict[str, str] | str, refs: pd.DataFrame | None = None) -> LoadedRun:
    roles = dict.fromkeys(ROLES, models) if isinstance(models, str) else {**dict.fromkeys(ROLES, "x"), **models}
    return LoadedRun(
        name, Path(name), agent_frame(seed), ref_frame(REF_SEED) if refs is None else refs, {"rubric": RUBRIC}, roles
    )


def _hand(frame: pd.DataFrame, refs: pd.DataFrame, protocol: str, essays: list[str] | None = None) -> dict[str, Any]:
    """RMSE, Spearman, mean prediction and shift vs human of a protocol's final predictions, all traits."""
    pred = direct_final(frame, protocol)
    if essays is not None:
        pred = pred[pred.index.get_level_values("essay_id").isin(essays)]
    ref = refs.set_index(["essay_id", "trait"])["reference"].loc[pred.index]
    p, r = pred.to_numpy(), ref.to_numpy()
    return {
        "rmse": float(np.sqrt(np.mean((p - r) ** 2))),
        "spearman": float(stats.spearmanr(r, p).statistic),
        "mean_pred": float(p.mean()),
        "shift_ref": float(p.mean() - r.mean()),
    }


def test_averages_are_the_mean_over_models_of_each_runs_metric() -> None:
    runs = [_run("a", 1, "m-a"), _run("b", 2, "m-b"), _run("c", 3, "m-c")]
    multi = evaluate_runs(runs)
    refs = ref_frame(REF_SEED)
    for protocol in ["SingleJudge", "StrictJudge", "ConsensusMAD"]:
        hand = [_hand(agent_frame(s), refs, protocol) for s in (1, 2, 3)]
        row = cell(multi.alignment, protocol=protocol, trait=ALL)
        assert row["n_runs"] == 3 and row["models"] == "m-a, m-b, m-c"
        for metric in ("rmse", "spearman", "mean_pred", "shift_ref"):
            assert row[metric] == pytest.approx(np.mean([h[metric] for h in hand]))
    # Table 9: the mean over the runs of consensus shift - (strict shift + lenient shift) / 2 (shifts vs human)
    beyond = []
    for s in (1, 2, 3):
        shifts = {
            p: _hand(agent_frame(s), refs, p)["shift_ref"] for p in ("ConsensusMAD", "StrictJudge", "LenientJudge")
        }
        beyond.append(shifts["ConsensusMAD"] - (shifts["StrictJudge"] + shifts["LenientJudge"]) / 2)
    dom = cell(multi.dominance, consensus="ConsensusMAD", trait=ALL)
    assert dom["beyond_midpoint"] == pytest.approx(np.mean(beyond)) and dom["n_runs"] == 3
    assert multi.meta["averaged_runs"] == ["a", "b", "c"] and multi.meta["n_essays"] == 30


def test_round_rmse_is_averaged_over_runs_per_round() -> None:
    runs = [_run("a", 4, "m-a"), _run("b", 5, "m-b")]
    multi = evaluate_runs(runs)
    ref = ref_frame(REF_SEED).set_index(["essay_id", "trait"])["reference"]
    for round_ in range(5):
        per_run = []
        for s in (4, 5):
            rows = agent_frame(s)
            rows = rows[(rows["protocol"] == "ConsensusMAD") & (rows["round"] == round_)]
            pred = rows.groupby(["essay_id", "trait"])["score"].mean()
            per_run.append(np.sqrt(np.mean((pred.to_numpy() - ref.loc[pred.index].to_numpy()) ** 2)))
        row = cell(multi.trajectories, protocol="ConsensusMAD", round=round_, trait=ALL)
        assert row["rmse"] == pytest.approx(np.mean(per_run))


def test_metrics_use_only_the_essays_every_run_scored() -> None:
    short = _run("b", 2, "m-b")
    short.agent_scores = short.agent_scores[~short.agent_scores["essay_id"].isin(["e25", "e26", "e27", "e28", "e29"])]
    multi = evaluate_runs([_run("a", 1, "m-a"), short])
    assert multi.meta["n_essays"] == 25
    assert any("a: 5 essay(s) not scored by every run left out" in n for n in multi.notes)
    kept = [f"e{i:02d}" for i in range(25)]
    hand = [_hand(agent_frame(s), ref_frame(REF_SEED), "SingleJudge", kept)["rmse"] for s in (1, 2)]
    assert cell(multi.alignment, protocol="SingleJudge", trait=ALL)["rmse"] == pytest.approx(np.mean(hand))
    per_run = cell(multi.per_run_alignment, run="a", protocol="SingleJudge", trait=ALL)
    assert per_run["n"] == 75 and per_run["rmse"] == pytest.approx(hand[0])


def test_a_metric_undefined_in_one_run_stays_undefined() -> None:
    flat = _run("b", 2, "m-b")
    single = flat.agent_scores["protocol"] == "SingleJudge"
    flat.agent_scores.loc[single, "score"] = 3.0  # constant predictions: no Spearman
    multi = evaluate_runs([_run("a", 1, "m-a"), flat])
    row = cell(multi.alignment, protocol="SingleJudge", trait=ALL)
    assert np.isnan(row["spearman"]) and not np.isnan(row["rmse"])


def test_runs_of_other_rubrics_references_or_essays_are_refused() -> None:
    other = _run("b", 2, "m-b")
    other.config = {"rubric": {"traits": [{"name": "content", "min": 0, "max": 3}]}}
    with pytest.raises(InputError, match="different rubrics"):
        evaluate_runs([_run("a", 1, "m-a"), other])
    with pytest.raises(InputError, match=r"essay e\d\d \(\w+\) different human references"):
        evaluate_runs([_run("a", 1, "m-a"), _run("b", 2, "m-b", refs=ref_frame(9))])
    apart = _run("b", 2, "m-b")
    apart.agent_scores = apart.agent_scores.assign(essay_id="x" + apart.agent_scores["essay_id"])
    with pytest.raises(InputError, match="no scored essay in common"):
        evaluate_runs([_run("a", 1, "m-a"), apart])


def test_cross_model_grid_puts_each_pair_in_its_cell_and_mixed_runs_only_there() -> None:
    runs = [
        _run("aa", 1, "A"),
        _run("bb", 2, "B"),
        _run("ab", 3, {"single": "A", "strict": "A", "lenient": "B"}),
        _run("ba", 4, {"single": "B", "strict": "B", "lenient": "A"}),
    ]
    multi = evaluate_runs(runs)
    refs = ref_frame(REF_SEED)
    expected = {("A", "A"): 1, ("B", "B"): 2, ("A", "B"): 3, ("B", "A"): 4}
    for (strict, lenient), seed in expected.items():
        row = cell(multi.grid, strict_model=strict, lenient_model=lenient)
        assert row["value"] == pytest.approx(_hand(agent_frame(seed), refs, "ConsensusMAD")["rmse"])
    wide = grid_wide(multi.grid)
    assert wide.loc["B", "A"] == f"{_hand(agent_frame(4), refs, 'ConsensusMAD')['rmse']:.3f}"
    single_a = np.mean([_hand(agent_frame(s), refs, "SingleJudge")["rmse"] for s in (1, 3)])
    assert cell(multi.single_baselines, model="A")["value"] == pytest.approx(single_a)
    # the averages take the single-model runs only
    assert multi.meta["averaged_runs"] == ["aa", "bb"]
    assert cell(multi.alignment, protocol="ConsensusMAD", trait=ALL)["models"] == "A, B"
    assert any("ab: its roles used different models" in n for n in multi.notes)
    spearman = evaluate_runs(runs, grid_metric="spearman").grid
    assert cell(spearman, strict_model="A", lenient_model="B")["value"] == pytest.approx(
        _hand(agent_frame(3), refs, "ConsensusMAD")["spearman"]
    )


def test_model_labels_come_from_the_stored_provider_identities() -> None:
    assert model_label({"kind": "openai", "model": "gpt-4o-mini", "base_url": "http://h/v1"}) == "gpt-4o-mini"
    assert model_label({"kind": "llamacpp", "model": None, "model_path": "/m/gemma-3-4b.gguf"}) == "gemma-3-4b.gguf"
    assert model_label({"kind": "fake", "model": None, "model_path": None}) == "fake"
    assert model_label({"instance": {"provider": "fake", "model": "fake-model"}}) == "fake-model"
    assert model_label(None) == "?"
    config = {
        "provider": {"kind": "openai", "model": "qwen"},
        "role_providers": {"lenient": {"kind": "openai", "model": "gemma"}},
    }
    assert role_models(config, ["strict", "lenient"]) == {"strict": "qwen", "lenient": "gemma"}


def test_files_and_figure_two(tmp_path: Path) -> None:
    multi = evaluate_runs(
        [_run("a", 1, "m-a"), _run("b", 2, "m-b"), _run("ab", 3, {"strict": "m-a", "lenient": "m-b"})]
    )
    written = save_multi(multi, tmp_path)
    names = {p.name for p in written}
    assert {"averaged_alignment.csv", "cross_model_grid.csv", "consensus_models.md", "rmse_by_round.png"} <= names
    assert (tmp_path / "rmse_by_round.png").read_bytes()[:4] == b"\x89PNG"
    saved = pd.read_csv(tmp_path / "averaged_alignment.csv")
    row = saved[(saved["protocol"] == "ConsensusMAD") & (saved["trait"] == ALL)].iloc[0]
    assert row["rmse"] == pytest.approx(cell(multi.alignment, protocol="ConsensusMAD", trait=ALL)["rmse"])
    md = render_multi_markdown(multi)
    assert "models averaged: m-a, m-b" in md and "Cross-model grid (Table 3)" in md
