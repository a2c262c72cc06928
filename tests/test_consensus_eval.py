"""Seed 002 evaluation (single judge vs strict / lenient consensus MAD) on hand-built agent-score frames."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.evaluation import consensus as consensus_eval
from madrag.evaluation.consensus import (
    ALL,
    DOMINANCE_COLUMNS,
    alignment_table,
    base_name,
    dominance,
    evaluate_consensus,
    load_consensus_run,
    order_protocols,
    paired_rmse,
    predictions,
    references_frame,
    resolve_protocol,
    round_trajectories,
)
from madrag.evaluation.consensus_tables import render_markdown, save_consensus
from madrag.metrics import paired_bootstrap, rmse
from madrag.records import AgentRecord
from madrag.rubric import Rubric, Trait
from madrag.store import RunStore

TRAITS = ["content", "organization", "expression"]
MAD_AGENTS = ("strict", "lenient")
# protocol -> (agents, last round)
DESIGN: dict[str, tuple[tuple[str, ...], int]] = {
    "SingleJudge": (("single",), 0),
    "StrictJudge": (("strict",), 0),
    "LenientJudge": (("lenient",), 0),
    "ConsensusMAD": (MAD_AGENTS, 4),
    "SymmetricMAD[rounds=2]": (("neutral_a", "neutral_b"), 2),
}


def agent_frame(
    seed: int = 0, n_essays: int = 30, design: Mapping[str, tuple[tuple[str, ...], int]] = DESIGN
) -> pd.DataFrame:
    """A frame shaped like ``agent_scores_frame``: random 1-5 scores, every protocol, essay, trait, round, agent."""
    rng = np.random.default_rng(seed)
    rows = []
    for protocol, (agents, last) in design.items():
        for e in range(n_essays):
            for trait in TRAITS:
                for round_ in range(last + 1):
                    for agent in agents:
                        score = float(rng.integers(1, 6))
                        key = f"{protocol}|e{e}|{trait}|{agent}|{round_}"
                        rows.append((protocol, f"e{e:02d}", trait, round_, agent, score, key))
    columns = ["protocol", "essay_id", "trait", "round", "agent", "score", "record_key"]
    return pd.DataFrame(rows, columns=columns)


def ref_frame(seed: int = 1, n_essays: int = 30) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [(f"e{e:02d}", t, float(rng.integers(1, 6))) for e in range(n_essays) for t in TRAITS]
    return pd.DataFrame(rows, columns=["essay_id", "trait", "reference"])


def set_score(
    frame: pd.DataFrame, protocol: str, essay: str, trait: str, round_: int, agent: str, value: float
) -> None:
    mask = (
        (frame["protocol"] == protocol)
        & (frame["essay_id"] == essay)
        & (frame["trait"] == trait)
        & (frame["round"] == round_)
        & (frame["agent"] == agent)
    )
    assert mask.sum() == 1
    frame.loc[mask, "score"] = value


def direct_final(frame: pd.DataFrame, protocol: str) -> pd.Series:
    """The protocol's final prediction per (essay, trait), computed without the module."""
    rows = frame[frame["protocol"] == protocol]
    last = rows["round"].max()
    rows = rows[rows["round"] == last]
    grouped = rows.groupby(["essay_id", "trait"])["score"]
    means: pd.Series = grouped.mean()
    return means.where(grouped.count() == grouped.size())


def cell(table: pd.DataFrame, **where: Any) -> pd.Series:
    mask = np.ones(len(table), dtype=bool)
    for key, value in where.items():
        mask &= (table[key] == value).to_numpy()
    assert mask.sum() == 1, where
    return table[mask].iloc[0]


# -- references, names ---------------------------------------------------------------------------------


def _rubric() -> Rubric:
    levels = {i: f"level {i}" for i in range(1, 6)}
    return Rubric(traits=[Trait(name=t, min=1, max=5, levels=levels) for t in TRAITS])


def test_references_frame_uses_essay_reference_and_nan_when_unknown() -> None:
    rubric = _rubric()
    essays = [
        Essay(id="a", text="x", rater_scores={"content": [3.0, 4.0], "organization": [2.0, 2.0]}),
        Essay(id="b", text="y", rater_scores={"expression": [5.0]}),
    ]
    refs = references_frame(essays, rubric)
    assert list(refs.columns) == ["essay_id", "trait", "reference"]
    assert len(refs) == 6
    got = refs.set_index(["essay_id", "trait"])["reference"]
    assert got["a", "content"] == 4.0  # 3.5 rounded half up (Essay.reference)
    assert got["a", "organization"] == 2.0
    assert math.isnan(got["a", "expression"]) and math.isnan(got["b", "content"])
    raw = references_frame(essays, rubric, rounded=False).set_index(["essay_id", "trait"])["reference"]
    assert raw["a", "content"] == 3.5


def test_protocol_names_resolve_and_order() -> None:
    assert base_name("ConsensusMAD[rounds=2]") == "ConsensusMAD"
    assert resolve_protocol("ConsensusMAD", ["SingleJudge", "ConsensusMAD[rounds=2]"]) == "ConsensusMAD[rounds=2]"
    assert resolve_protocol("ConsensusMAD", ["ConsensusMAD[rounds=2]", "ConsensusMAD[rounds=4]"]) is None
    assert resolve_protocol("ConsensusMAD", ["ConsensusMAD", "ConsensusMAD[rounds=4]"]) == "ConsensusMAD"
    assert order_protocols(["X", "ScoreMaskedMAD", "ConsensusMAD", "SingleJudge", "StrictJudge"]) == [
        "SingleJudge",
        "StrictJudge",
        "ConsensusMAD",
        "ScoreMaskedMAD",
        "X",
    ]


# -- predictions -----------------------------------------------------------------------------------------


def test_predictions_mean_gap_and_final_round_per_protocol() -> None:
    frame = agent_frame()
    preds = predictions(frame)
    assert len(preds) == frame.groupby(["protocol", "essay_id", "trait", "round"]).ngroups
    mad = frame[frame["protocol"] == "ConsensusMAD"].pivot(
        index=["essay_id", "trait", "round"], columns="agent", values="score"
    )
    got = preds[preds["protocol"] == "ConsensusMAD"].set_index(["essay_id", "trait", "round"]).loc[mad.index]
    np.testing.assert_allclose(got["prediction"], (mad["strict"] + mad["lenient"]) / 2)
    np.testing.assert_allclose(got["gap"], (mad["strict"] - mad["lenient"]).abs())
    assert (got["n_agents"] == 2).all()
    single = preds[preds["protocol"] == "SingleJudge"]
    assert single["gap"].isna().all() and (single["n_agents"] == 1).all() and single["final"].all()
    # different round counts: the final round is each protocol's own last round
    finals = preds[preds["final"]].groupby("protocol")["round"].unique()
    assert finals["ConsensusMAD"].tolist() == [4]
    assert finals["SymmetricMAD[rounds=2]"].tolist() == [2]
    assert finals["StrictJudge"].tolist() == [0]


def test_unusable_agent_score_makes_the_prediction_unusable() -> None:
    frame = agent_frame()
    set_score(frame, "ConsensusMAD", "e03", "content", 4, "lenient", np.nan)
    set_score(frame, "SingleJudge", "e05", "expression", 0, "single", np.nan)
    preds = predictions(frame)
    row = cell(preds, protocol="ConsensusMAD", essay_id="e03", trait="content", round=4)
    assert math.isnan(row["prediction"]) and math.isnan(row["gap"]) and row["n_unusable_agents"] == 1
    assert math.isnan(cell(preds, protocol="SingleJudge", essay_id="e05", trait="expression")["prediction"])
    assert not math.isnan(cell(preds, protocol="ConsensusMAD", essay_id="e03", trait="content", round=3)["prediction"])


def test_final_is_the_last_round_of_each_essay_trait() -> None:
    frame = agent_frame(n_essays=4)
    early = (frame["protocol"] == "ConsensusMAD") & (frame["essay_id"] == "e01") & (frame["round"] > 1)
    frame = frame[~early]  # e01 stopped after round 1 (all its traits)
    preds = predictions(frame)
    final = preds[(preds["protocol"] == "ConsensusMAD") & preds["final"]].set_index("essay_id")["round"]
    assert (final.loc["e01"] == 1).all() and (final.drop(index="e01") == 4).all()
    ev = evaluate_consensus(frame, ref_frame(n_essays=4), bootstrap=0)
    assert any("ConsensusMAD: 3 essay-trait(s) end before round 4" in n for n in ev.notes)


def test_predictions_of_an_empty_frame() -> None:
    empty = agent_frame().iloc[0:0]
    preds = predictions(empty)
    assert preds.empty and "prediction" in preds.columns


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
        render_markdown(ev)
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
    assert names == expected | {"trajectories.png"}
    assert all(p.is_file() and p.stat().st_size > 0 for p in written)
    assert (tmp_path / "out" / "trajectories.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
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
    assert "trajectories.png" not in names and "consensus.md" in names


# -- loading a run ---------------------------------------------------------------------------------------


def _store(tmp_path: Path, protocols: list[str], config: bool = True) -> Path:
    store = RunStore(tmp_path / "store.sqlite")
    rubric = _rubric()
    if config:
        store.set_meta("config", {"rubric": rubric.model_dump(), "protocols": [{"name": p} for p in protocols]})
    store.add_essays([Essay(id="a", text="x", rater_scores={t: [3.0, 4.0] for t in TRAITS})])
    store.put(AgentRecord(run_id="r", key="k1", essay_id="a", trait="content", protocol="SingleJudge", role="judge"))
    store.close()
    return tmp_path


def test_load_consensus_run_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no run"):
        load_consensus_run(tmp_path / "nothing")
    with pytest.raises(InputError, match="no stored configuration"):
        load_consensus_run(_store(tmp_path / "bare", [], config=False))
    with pytest.raises(InputError, match="no consensus protocol"):
        load_consensus_run(_store(tmp_path / "other", ["MAD", "MADRAG"]))


def test_load_consensus_run_passes_records_and_consensus_protocols(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def fake_frame(records: Iterable[AgentRecord], rubric: Rubric, protocols: Sequence[str]) -> pd.DataFrame:
        seen.update(keys=[r.key for r in records], traits=rubric.trait_names, protocols=list(protocols))
        return agent_frame(n_essays=1)

    monkeypatch.setattr(consensus_eval, "agent_scores_frame", fake_frame)
    run = _store(tmp_path, ["MAD", "SingleJudge", "ConsensusMAD[rounds=2]"])
    frame, refs, config = load_consensus_run(run)
    assert seen == {"keys": ["k1"], "traits": TRAITS, "protocols": ["SingleJudge", "ConsensusMAD[rounds=2]"]}
    assert len(frame) > 0 and config["protocols"][0] == {"name": "MAD"}
    assert refs["essay_id"].tolist() == ["a"] * 3 and (refs["reference"] == 4.0).all()


def test_load_consensus_run_with_the_real_protocol_module(tmp_path: Path) -> None:
    frame, refs, _config = load_consensus_run(_store(tmp_path, ["SingleJudge"]))
    assert len(refs) == 3
    columns = {"protocol", "essay_id", "trait", "round", "agent", "score"}
    assert frame.empty or columns <= set(frame.columns)
