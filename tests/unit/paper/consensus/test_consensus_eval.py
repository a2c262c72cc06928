"""The consensus paper evaluation (single judge vs strict / lenient consensus MAD): the metrics, the whole
evaluation and
its files, on hand-built agent-score frames."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from tests.consensus_helpers import DESIGN, MAD_AGENTS, TRAITS, agent_frame, cell, direct_final, ref_frame, set_score

from madrag.metrics import paired_bootstrap, rmse
from madrag.paper.consensus.frames import predictions
from madrag.paper.consensus.metrics import (
    ALL,
    DOMINANCE_COLUMNS,
    alignment_table,
    dominance,
    evaluate_consensus,
    paired_rmse,
    round_trajectories,
)
from madrag.paper.consensus.tables import render_consensus_markdown, save_consensus

# -- alignment (Tables 1, 2, 8) --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 7])
def test_alignment_metrics_match_numpy_and_scipy(seed: int) -> None:
    frame, refs = agent_frame(seed), ref_frame(seed + 100)
    table = alignment_table(predictions(frame), refs)
    ref = refs.set_index(["essay_id", "trait"])["reference"]
    base = direct_final(frame, "SingleJudge")
    for protocol in DESIGN:
        pred = direct_final(frame, protocol)
        for trait in [*TRAITS, ALL]:
            p = pred if trait == ALL else pred.xs(trait, level="trait", drop_level=False)
            r = ref.loc[p.index]
            row = cell(table, protocol=protocol, trait=trait)
            assert row["n"] == len(p) and row["n_unusable"] == 0
            assert row["rmse"] == pytest.approx(np.sqrt(np.mean((p.to_numpy() - r.to_numpy()) ** 2)))
            assert row["spearman"] == pytest.approx(stats.spearmanr(r.to_numpy(), p.to_numpy()).statistic)
            assert row["mean_pred"] == pytest.approx(p.mean()) and row["mean_ref"] == pytest.approx(r.mean())
            assert row["shift_ref"] == pytest.approx(p.mean() - r.mean())
            assert row["shift"] == pytest.approx(p.mean() - base.loc[p.index].mean())
    assert (cell(table, protocol="SingleJudge", trait=ALL)["shift"]) == 0.0
    assert table["protocol"].drop_duplicates().tolist() == list(DESIGN)
    assert table["trait"].drop_duplicates().tolist() == [*TRAITS, ALL]


def test_unusable_predictions_are_counted_not_imputed_and_shift_uses_shared_items() -> None:
    frame, refs = agent_frame(3), ref_frame(4)
    set_score(frame, "ConsensusMAD", "e02", "content", 4, "strict", np.nan)
    set_score(frame, "SingleJudge", "e07", "content", 0, "single", np.nan)
    table = alignment_table(predictions(frame), refs)
    ref = refs.set_index(["essay_id", "trait"])["reference"].xs("content", level="trait")
    pred = direct_final(frame, "ConsensusMAD").xs("content", level="trait")
    base = direct_final(frame, "SingleJudge").xs("content", level="trait")
    usable = pred.dropna()
    row = cell(table, protocol="ConsensusMAD", trait="content")
    assert (row["n"], row["n_unusable"]) == (29, 1)
    assert row["rmse"] == pytest.approx(rmse(ref.loc[usable.index], usable))
    assert row["mean_pred"] == pytest.approx(usable.mean())
    shared = usable.index.intersection(base.dropna().index)
    assert row["n_shift"] == 28
    assert row["shift"] == pytest.approx(usable.loc[shared].mean() - base.loc[shared].mean())
    pooled = cell(table, protocol="ConsensusMAD", trait=ALL)
    assert (pooled["n"], pooled["n_unusable"]) == (89, 1)
    assert cell(table, protocol="SingleJudge", trait=ALL)["n_unusable"] == 1


def test_items_without_a_reference_are_left_out_and_counted() -> None:
    frame, refs = agent_frame(5), ref_frame(6)
    refs.loc[(refs["essay_id"] == "e00") & (refs["trait"] == "organization"), "reference"] = np.nan
    refs = refs[~((refs["essay_id"] == "e01") & (refs["trait"] == "organization"))]
    table = alignment_table(predictions(frame), refs)
    row = cell(table, protocol="StrictJudge", trait="organization")
    assert (row["n"], row["n_unusable"], row["n_no_reference"]) == (28, 0, 2)


def test_shift_is_nan_without_the_baseline() -> None:
    frame = agent_frame()
    frame = frame[frame["protocol"] != "SingleJudge"]
    table = alignment_table(predictions(frame), ref_frame())
    assert table["shift"].isna().all() and (table["n_shift"] == 0).all()
    assert table["shift_ref"].notna().all()


# -- trajectories (Figures 2-4) -------------------------------------------------------------------------


def test_round_trajectories_match_direct_computation() -> None:
    frame, refs = agent_frame(11), ref_frame(12)
    set_score(frame, "ConsensusMAD", "e04", "expression", 2, "lenient", np.nan)
    traj = round_trajectories(predictions(frame), frame, refs)
    assert set(traj["protocol"]) == {"ConsensusMAD", "SymmetricMAD[rounds=2]"}
    assert sorted(traj.loc[traj["protocol"] == "ConsensusMAD", "round"].unique()) == [0, 1, 2, 3, 4]
    assert sorted(traj.loc[traj["protocol"] == "SymmetricMAD[rounds=2]", "round"].unique()) == [0, 1, 2]
    ref = refs.set_index(["essay_id", "trait"])["reference"]
    wide = frame[frame["protocol"] == "ConsensusMAD"].pivot(
        index=["round", "essay_id", "trait"], columns="agent", values="score"
    )
    for round_ in range(5):
        for trait in ["expression", ALL]:
            w = wide.loc[round_]
            if trait != ALL:
                w = w.xs(trait, level="trait", drop_level=False)
            w = w.dropna()
            pred = (w["strict"] + w["lenient"]) / 2
            r = ref.loc[w.index].to_numpy()
            row = cell(traj, protocol="ConsensusMAD", round=round_, trait=trait)
            assert row["n"] == len(w)
            assert row["n_unusable"] == (1 if round_ == 2 else 0)
            assert row["mean_pred"] == pytest.approx(pred.mean())
            assert row["mean_strict"] == pytest.approx(w["strict"].mean())
            assert row["mean_lenient"] == pytest.approx(w["lenient"].mean())
            assert row["mean_pred"] == pytest.approx((row["mean_strict"] + row["mean_lenient"]) / 2)
            assert row["mean_gap"] == pytest.approx((w["strict"] - w["lenient"]).abs().mean())
            assert row["mean_ref"] == pytest.approx(r.mean())
            assert row["rmse"] == pytest.approx(np.sqrt(np.mean((pred.to_numpy() - r) ** 2)))
            assert row["spearman"] == pytest.approx(stats.spearmanr(r, pred.to_numpy()).statistic)
    sym = cell(traj, protocol="SymmetricMAD[rounds=2]", round=1, trait=ALL)
    assert math.isnan(sym["mean_strict"]) and not math.isnan(sym["mean_neutral_a"])


# -- dominance (Table 9) --------------------------------------------------------------------------------


def _alignment_stub(shifts: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """protocol -> (shift_ref on 'content', on 'all'); the baseline shift is shift_ref + 0.1."""
    rows = [
        {"protocol": p, "trait": t, "shift_ref": v, "shift": v + 0.1}
        for p, (a, b) in shifts.items()
        for t, v in (("content", a), (ALL, b))
    ]
    return pd.DataFrame(rows)


def test_dominance_arithmetic_on_a_hand_made_example() -> None:
    # the paper's Korean Essay pattern: Strict -0.754, Lenient +0.086 -> midpoint -0.334
    align = _alignment_stub(
        {"SingleJudge": (-0.1, -0.14), "StrictJudge": (-0.754, -0.6), "LenientJudge": (0.086, 0.2)}
        | {"ConsensusMAD[rounds=4]": (-0.586, -0.5)}
    )
    dom = dominance(align)
    assert list(dom.columns) == DOMINANCE_COLUMNS
    assert dom["trait"].tolist() == ["content", ALL]
    content = cell(dom, trait="content")
    assert content["consensus"] == "ConsensusMAD[rounds=4]" and content["relative_to"] == "reference"
    assert content["midpoint"] == pytest.approx(-0.334)
    assert content["beyond_midpoint"] == pytest.approx(-0.252)
    assert cell(dom, trait=ALL)["beyond_midpoint"] == pytest.approx(-0.5 - (-0.6 + 0.2) / 2)
    # a common origin cancels: the same beyond-midpoint measured from the baseline
    by_base = dominance(align, relative_to="baseline")
    assert cell(by_base, trait="content")["shift_strict"] == pytest.approx(-0.654)
    np.testing.assert_allclose(by_base["beyond_midpoint"], dom["beyond_midpoint"])


def test_dominance_is_empty_when_a_protocol_is_missing() -> None:
    align = _alignment_stub({"StrictJudge": (-0.7, -0.6), "ConsensusMAD": (-0.5, -0.5)})
    dom = dominance(align)
    assert dom.empty and list(dom.columns) == DOMINANCE_COLUMNS


# -- paired comparisons ---------------------------------------------------------------------------------


def test_paired_rmse_diff_equals_direct_difference_and_is_reproducible() -> None:
    frame, refs = agent_frame(21), ref_frame(22)
    set_score(frame, "ConsensusMAD", "e09", "content", 4, "strict", np.nan)
    preds = predictions(frame)
    first = paired_rmse(preds, refs, n_boot=300, seed=5)
    again = paired_rmse(preds, refs, n_boot=300, seed=5)
    pd.testing.assert_frame_equal(first, again)
    other = paired_rmse(preds, refs, n_boot=300, seed=6)
    assert not np.allclose(first["ci_low"], other["ci_low"])
    assert "SingleJudge" not in set(first["protocol"])
    ref = refs.set_index(["essay_id", "trait"])["reference"]
    base = direct_final(frame, "SingleJudge")
    for protocol in ["StrictJudge", "ConsensusMAD"]:
        pred = direct_final(frame, protocol).dropna()
        for trait in ["content", ALL]:
            p = pred if trait == ALL else pred.xs(trait, level="trait", drop_level=False)
            r, b = ref.loc[p.index], base.loc[p.index]
            row = cell(first, protocol=protocol, trait=trait)
            assert row["n"] == len(p) and row["baseline"] == "SingleJudge"
            assert row["diff"] == pytest.approx(rmse(r, p) - rmse(r, b))
            assert row["rmse"] == pytest.approx(rmse(r, p)) and row["rmse_baseline"] == pytest.approx(rmse(r, b))
            assert row["ci_low"] <= row["diff"] <= row["ci_high"] and 0 < row["p_value"] <= 1


def test_paired_rmse_per_trait_is_the_plain_paired_bootstrap() -> None:
    frame, refs = agent_frame(31), ref_frame(32)
    table = paired_rmse(predictions(frame), refs, n_boot=200, seed=3)
    ref = refs.set_index(["essay_id", "trait"])["reference"].xs("organization", level="trait")
    a = direct_final(frame, "StrictJudge").xs("organization", level="trait").sort_index()
    b = direct_final(frame, "SingleJudge").xs("organization", level="trait").loc[a.index]
    expected = paired_bootstrap(rmse, ref.loc[a.index], a, b, n=200, seed=3)
    row = cell(table, protocol="StrictJudge", trait="organization")
    assert (row["ci_low"], row["ci_high"], row["p_value"]) == pytest.approx(
        (expected.low, expected.high, expected.p_value)
    )


def test_paired_rmse_pooled_resamples_whole_essays() -> None:
    frame, refs = agent_frame(41, n_essays=12), ref_frame(42, n_essays=12)
    table = paired_rmse(predictions(frame), refs, n_boot=150, seed=9)
    ref = refs.set_index(["essay_id", "trait"])["reference"]
    a, b = direct_final(frame, "LenientJudge"), direct_final(frame, "SingleJudge")
    essays = sorted(a.index.get_level_values("essay_id").unique())
    idx = np.random.default_rng(9).integers(0, len(essays), size=(150, len(essays)))
    diffs = []
    for row in idx:
        keys = [(essays[i], t) for i in row for t in TRAITS]
        diffs.append(rmse(ref.loc[keys], a.loc[keys]) - rmse(ref.loc[keys], b.loc[keys]))
    low, high = np.percentile(diffs, [2.5, 97.5])
    got = cell(table, protocol="LenientJudge", trait=ALL)
    assert got["n_essays"] == 12 and got["n"] == 36
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((low, high))


def test_paired_rmse_without_baseline_is_empty() -> None:
    frame = agent_frame()
    frame = frame[frame["protocol"] != "SingleJudge"]
    assert paired_rmse(predictions(frame), ref_frame(), n_boot=10).empty


# -- the whole evaluation, degenerate cases, files -------------------------------------------------------


def test_constant_predictions_give_nan_spearman_without_warnings() -> None:
    frame, refs = agent_frame(51), ref_frame(52)
    frame.loc[frame["protocol"] == "StrictJudge", "score"] = 2.0
    frame.loc[frame["protocol"] == "ConsensusMAD", "score"] = 3.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ev = evaluate_consensus(frame, refs, bootstrap=50, seed=0)
        render_consensus_markdown(ev)
    strict = cell(ev.alignment, protocol="StrictJudge", trait=ALL)
    assert math.isnan(strict["spearman"]) and strict["mean_pred"] == 2.0
    assert strict["rmse"] == pytest.approx(np.sqrt(np.mean((refs["reference"] - 2.0) ** 2)))
    traj = ev.trajectories[ev.trajectories["protocol"] == "ConsensusMAD"]
    assert traj["spearman"].isna().all() and (traj["mean_gap"] == 0).all()


def test_all_unusable_and_empty_inputs_give_nan_without_warnings() -> None:
    frame, refs = agent_frame(61, n_essays=3), ref_frame(62, n_essays=3)
    frame.loc[frame["protocol"] == "LenientJudge", "score"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ev = evaluate_consensus(frame, refs, bootstrap=20)
        empty = evaluate_consensus(frame.iloc[0:0], refs, bootstrap=20)
    lenient = cell(ev.alignment, protocol="LenientJudge", trait=ALL)
    assert (lenient["n"], lenient["n_unusable"]) == (0, 9)
    assert math.isnan(lenient["rmse"]) and math.isnan(lenient["mean_pred"]) and math.isnan(lenient["shift"])
    assert ev.dominance["shift_lenient"].isna().all()
    assert empty.alignment.empty and empty.trajectories.empty and empty.dominance.empty
    assert any("baseline 'SingleJudge' is not among" in n for n in empty.notes)


def test_evaluate_consensus_and_save(tmp_path: Path) -> None:
    frame, refs = agent_frame(71), ref_frame(72)
    design: dict[str, tuple[tuple[str, ...], int]] = {"ScoreMaskedMAD": (MAD_AGENTS, 1)}
    frame = pd.concat([frame, agent_frame(73, design=design)], ignore_index=True)
    set_score(frame, "ConsensusMAD", "e01", "content", 4, "strict", np.nan)
    ev = evaluate_consensus(frame, refs, bootstrap=100, seed=1)
    assert ev.meta["baseline"] == "SingleJudge"
    assert ev.meta["rounds"]["ConsensusMAD"] == 4 and ev.meta["rounds"]["SingleJudge"] == 0
    assert ev.meta["human_mean"] == pytest.approx(refs["reference"].mean())
    assert set(ev.dominance["consensus"]) == {"ConsensusMAD", "ScoreMaskedMAD"}
    assert set(ev.comparisons["protocol"]) == set(DESIGN) - {"SingleJudge"} | {"ScoreMaskedMAD"}
    assert any("ConsensusMAD: 1 of 90 final predictions unusable" in n for n in ev.notes)
    written = save_consensus(ev, tmp_path / "out")
    names = {p.name for p in written}
    expected = {"alignment.csv", "trajectories.csv", "dominance.csv", "comparisons.csv", "consensus.md"}
    assert names == expected | {"trajectories.png", "rmse_by_round.png"}  # Figures 3-4 and Figure 2
    assert all(p.is_file() and p.stat().st_size > 0 for p in written)
    for figure in ("trajectories.png", "rmse_by_round.png"):
        assert (tmp_path / "out" / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    back = pd.read_csv(tmp_path / "out" / "alignment.csv")
    assert len(back) == len(ev.alignment)
    md = (tmp_path / "out" / "consensus.md").read_text(encoding="utf-8")
    for heading in ["RMSE vs human reference", "Dominance analysis", "Round-wise trajectories", "RMSE difference"]:
        assert heading in md
    assert "ConsensusMAD r4" in md and "1 of 90 final predictions unusable" in md


def test_save_without_mad_protocols_writes_no_figure(tmp_path: Path) -> None:
    design = {k: v for k, v in DESIGN.items() if v[1] == 0}
    ev = evaluate_consensus(agent_frame(81, design=design), ref_frame(82), bootstrap=0)
    assert ev.trajectories.empty
    names = {p.name for p in save_consensus(ev, tmp_path)}
    assert "trajectories.png" not in names and "rmse_by_round.png" not in names and "consensus.md" in names
