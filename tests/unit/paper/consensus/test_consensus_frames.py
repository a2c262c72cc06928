"""The consensus paper evaluation inputs: protocol names, human references, per-round predictions, and loading them
from a run store."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from tests.consensus_helpers import TRAITS, agent_frame, cell, ref_frame, set_score

from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.paper.consensus import frames
from madrag.paper.consensus.frames import (
    base_name,
    load_consensus_run,
    order_protocols,
    predictions,
    references_frame,
    resolve_protocol,
)
from madrag.paper.consensus.metrics import evaluate_consensus
from madrag.records import AgentRecord
from madrag.rubric import Rubric, Trait
from madrag.store import RunStore

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
    refs = references_frame(essays, rubric, "rounded")
    assert list(refs.columns) == ["essay_id", "trait", "reference"]
    assert len(refs) == 6
    got = refs.set_index(["essay_id", "trait"])["reference"]
    assert got["a", "content"] == 4.0  # 3.5 rounded half up (Essay.reference)
    assert got["a", "organization"] == 2.0
    assert math.isnan(got["a", "expression"]) and math.isnan(got["b", "content"])
    raw = references_frame(essays, rubric).set_index(["essay_id", "trait"])["reference"]
    assert raw["a", "content"] == 3.5  # the default: the raters' plain mean (the consensus paper)


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

    monkeypatch.setattr(frames, "agent_scores_frame", fake_frame)
    run = _store(tmp_path, ["MAD", "SingleJudge", "ConsensusMAD[rounds=2]"])
    frame, refs, config = load_consensus_run(run)
    assert seen == {"keys": ["k1"], "traits": TRAITS, "protocols": ["SingleJudge", "ConsensusMAD[rounds=2]"]}
    assert len(frame) > 0 and config["protocols"][0] == {"name": "MAD"}
    assert refs["essay_id"].tolist() == ["a"] * 3 and (refs["reference"] == 3.5).all()  # the raters' plain mean
    _frame, rounded, _config = load_consensus_run(run, "rounded")
    assert (rounded["reference"] == 4.0).all()  # 3.5 rounded half up


def test_load_consensus_run_with_the_real_protocol_module(tmp_path: Path) -> None:
    frame, refs, _config = load_consensus_run(_store(tmp_path, ["SingleJudge"]))
    assert len(refs) == 3
    columns = {"protocol", "essay_id", "trait", "round", "agent", "score"}
    assert frame.empty or columns <= set(frame.columns)
