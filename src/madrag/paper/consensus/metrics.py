"""Single judge vs strict / lenient consensus multi-agent judging (the consensus paper, "Beyond Consensus"): the
metrics.

Each works on the frames of :mod:`madrag.paper.consensus.frames` (the protocols' per-round
predictions and the human references) and is computed on essay-traits with a known reference:

* :func:`alignment_table`: final-round RMSE and Spearman vs the human reference (Section 3.2, Table 1), the
  mean predicted score (Section 4.2, Table 2) and its shift vs the Single Judge and vs the human reference
  (Appendix G.1, Table 8).
* :func:`round_trajectories`: round-wise mean score, per-agent means, gap, RMSE and Spearman of the MAD
  protocols (Section 4.1 Figure 2, Appendix E.1 Figures 3-4).
* :func:`dominance`: how far the Consensus MAD shift falls below the midpoint of the Strict-only and
  Lenient-only shifts (Appendix G.2, Table 9).
* :func:`paired_rmse`: RMSE(protocol) - RMSE(Single Judge) on the same essay-traits, essay-level paired
  bootstrap (the significance tests of Section 4.1 / Appendix F).
* :func:`evaluate_consensus`: all of them at once, with notes (a run's frames:
  :func:`madrag.paper.consensus.frames.load_consensus_run`; tables and files: :mod:`madrag.paper.consensus.tables`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from madrag.metrics import NAN, paired_bootstrap, rmse, small_n_warning, spearman
from madrag.paper.consensus.frames import (
    AGENT_COLUMNS,
    ITEM,
    KEYS,
    REFERENCE_COLUMNS,
    base_name,
    order_protocols,
    predictions,
    require_columns,
    resolve_protocol,
)

ALL = "all"
"""The trait label of rows pooled over every trait."""
ROLE_ASYMMETRIC_MAD = ("ConsensusMAD", "ScoreMaskedMAD")
"""The MAD protocols with a strict and a lenient agent (whose dominance Table 9 measures)."""
AGENT_ORDER = ("single", "strict", "lenient", "neutral_a", "neutral_b")
ALIGNMENT_COLUMNS = [
    *["protocol", "trait", "n", "n_unusable", "n_no_reference", "rmse", "spearman"],
    *["mean_pred", "mean_ref", "shift", "n_shift", "shift_ref"],
]
DOMINANCE_COLUMNS = [
    *["trait", "consensus", "strict", "lenient", "relative_to"],
    *["shift_consensus", "shift_strict", "shift_lenient", "midpoint", "beyond_midpoint"],
]
COMPARISON_COLUMNS = [
    *["protocol", "baseline", "trait", "n_essays", "n", "rmse", "rmse_baseline"],
    *["diff", "ci_low", "ci_high", "p_value"],
]
FloatArray = NDArray[np.float64]


# -- row order and pooling ------------------------------------------------------------------------------


def _trait_order(refs: pd.DataFrame, *frames: pd.DataFrame) -> list[str]:
    """Traits in the references' (rubric) order, then any others as they appear; never ``all``."""
    names = [*refs["trait"].tolist(), *(t for f in frames for t in f["trait"].tolist())]
    return [t for t in dict.fromkeys(names) if t != ALL]


def _sorted(frame: pd.DataFrame, by: list[str], traits: list[str]) -> pd.DataFrame:
    """Rows by protocol (paper order), then ``by``, traits in rubric order with ``all`` last."""
    if frame.empty:
        return frame.reset_index(drop=True)
    protocols = order_protocols(frame["protocol"].tolist())
    rank = {
        "protocol": lambda s: s.map({p: i for i, p in enumerate(protocols)}),
        "trait": lambda s: s.map({t: i for i, t in enumerate([*traits, ALL])}).fillna(len(traits) + 1),
    }
    return frame.sort_values(by, key=lambda s: rank[str(s.name)](s) if s.name in rank else s).reset_index(drop=True)


def _pooled(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows once per trait and once more under trait ``all``."""
    return pd.concat([frame, frame.assign(trait=ALL)], ignore_index=True)


# -- alignment (Tables 1, 2 and 8) ----------------------------------------------------------------------


def _final_pairs(preds: pd.DataFrame, refs: pd.DataFrame) -> pd.DataFrame:
    """Final-round predictions with their reference (NaN when the essay-trait has none)."""
    require_columns(refs, REFERENCE_COLUMNS, "references")
    final = preds.loc[preds["final"].astype(bool), [*KEYS, "prediction"]]
    return final.merge(refs[REFERENCE_COLUMNS], on=ITEM, how="left", validate="many_to_one")


def _with_baseline(pairs: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    """``pairs`` plus ``base_pred``: the baseline's final prediction of the same essay-trait (NaN if none)."""
    if baseline is None:
        return pairs.assign(base_pred=NAN)
    base = pairs.loc[pairs["protocol"] == baseline, [*ITEM, "prediction"]].rename(columns={"prediction": "base_pred"})
    return pairs.merge(base, on=ITEM, how="left", validate="many_to_one")


def _mean(values: FloatArray) -> float:
    """The mean; NaN for no values (numpy would warn)."""
    return float(values.mean()) if values.size else NAN


def _fit(group: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The group's rows with a usable prediction, and their ``n``, ``n_unusable`` (the others), ``mean_pred``,
    ``mean_ref``, ``rmse`` and ``spearman`` vs the reference."""
    usable = group[group["prediction"].notna()]
    ref, pred = usable["reference"].to_numpy(np.float64), usable["prediction"].to_numpy(np.float64)
    fit = {"n": len(usable), "n_unusable": len(group) - len(usable), "mean_pred": _mean(pred), "mean_ref": _mean(ref)}
    return usable, fit | {"rmse": rmse(ref, pred), "spearman": spearman(ref, pred)}


def alignment_table(preds: pd.DataFrame, refs: pd.DataFrame, baseline: str = "SingleJudge") -> pd.DataFrame:
    """Final-round predictions vs the human reference, per protocol and trait plus ``all`` (pooled).

    Columns: ``n`` usable predictions with a reference, ``n_unusable`` (unusable, counted not imputed),
    ``n_no_reference`` (left out: no human reference), ``rmse`` and ``spearman`` (Table 1), ``mean_pred`` and
    ``mean_ref`` (Table 2), ``shift`` = mean(prediction - baseline's prediction) over the ``n_shift`` essay-traits
    both scored usably (= mean_pred - baseline's mean_pred on the same items; NaN without the baseline), and
    ``shift_ref`` = mean_pred - mean_ref (the paper's Strict-only / Lenient-only shifts of Appendix G.1 are
    measured from the human reference: Strict mean 2.733 vs reference 3.486 is its -0.754 shift).
    """
    pairs = _final_pairs(preds, refs)
    traits = _trait_order(refs, pairs)
    no_ref = pairs["reference"].isna()
    missing = _pooled(pairs.loc[no_ref, KEYS]).groupby(["protocol", "trait"]).size()
    scored = _pooled(
        _with_baseline(pairs.loc[~no_ref], resolve_protocol(baseline, pairs["protocol"].unique().tolist()))
    )
    rows = []
    for (protocol, trait), group in scored.groupby(["protocol", "trait"], sort=False):
        usable, fit = _fit(group)
        paired = usable[usable["base_pred"].notna()]
        shift = _mean((paired["prediction"] - paired["base_pred"]).to_numpy(np.float64))
        row = {"protocol": protocol, "trait": trait, "n_no_reference": int(missing.get((protocol, trait), 0)), **fit}
        rows.append(row | {"shift": shift, "n_shift": len(paired), "shift_ref": fit["mean_pred"] - fit["mean_ref"]})
    return _sorted(pd.DataFrame(rows, columns=ALIGNMENT_COLUMNS), ["protocol", "trait"], traits)


# -- round-wise trajectories (Figures 2-4) ---------------------------------------------------------------


def _agent_names(names: Sequence[str]) -> list[str]:
    found = list(dict.fromkeys(names))
    return [a for a in AGENT_ORDER if a in found] + sorted(set(found) - set(AGENT_ORDER))


def round_trajectories(preds: pd.DataFrame, agent_scores: pd.DataFrame, refs: pd.DataFrame) -> pd.DataFrame:
    """Per MAD protocol (more than one agent), round and trait (``all`` pooled): the round's metrics.

    Columns: ``n`` usable predictions with a reference, ``n_unusable``, ``mean_pred`` (Figure 3), ``mean_ref``
    (the human mean on the same essay-traits: the dashed gold line), ``mean_<agent>`` per agent (so
    ``mean_pred`` is the mean of the agents' means), ``mean_gap`` (Figure 4), ``rmse`` and ``spearman``
    (Figure 2). Every column of a round uses the same essay-traits: those with a usable prediction at that round.
    """
    require_columns(agent_scores, AGENT_COLUMNS, "agent scores")
    multi = preds.groupby("protocol")["n_agents"].transform("max") > 1
    rounds = preds.loc[multi, [*KEYS, "round", "prediction", "gap"]]
    rows = rounds.merge(refs[REFERENCE_COLUMNS], on=ITEM, how="inner", validate="many_to_one")
    rows = rows[rows["reference"].notna()]
    mad = agent_scores[agent_scores["protocol"].isin(rows["protocol"].unique())]
    agents = _agent_names(mad["agent"].tolist())
    per_agent = mad.astype({"score": "float64", "round": "int64"}).groupby([*KEYS, "round", "agent"])["score"].mean()
    wide = per_agent.unstack("agent").reindex(columns=agents).add_prefix("mean_").reset_index()
    rows = _pooled(rows.merge(wide, on=[*KEYS, "round"], how="left"))
    columns = ["protocol", "round", "trait", "n", "n_unusable", "mean_pred", "mean_ref"]
    columns += [f"mean_{a}" for a in agents] + ["mean_gap", "rmse", "spearman"]
    out = []
    for (protocol, round_, trait), group in rows.groupby(["protocol", "round", "trait"], sort=False):
        usable, fit = _fit(group)
        means = usable[[f"mean_{a}" for a in agents]].mean() if len(usable) else pd.Series(dtype="float64")
        row: dict[str, Any] = {"protocol": protocol, "round": round_, "trait": trait, **fit}
        row.update({f"mean_{a}": float(means.get(f"mean_{a}", NAN)) for a in agents})
        out.append(row | {"mean_gap": _mean(usable["gap"].dropna().to_numpy(np.float64))})
    traits = _trait_order(refs, rows)
    return _sorted(pd.DataFrame(out, columns=columns), ["protocol", "round", "trait"], traits)


# -- dominance (Table 9) --------------------------------------------------------------------------------


def dominance(
    alignment: pd.DataFrame,
    consensus: str = "ConsensusMAD",
    strict: str = "StrictJudge",
    lenient: str = "LenientJudge",
    relative_to: Literal["reference", "baseline"] = "reference",
) -> pd.DataFrame:
    """Appendix G.2, Table 9: per trait (and ``all``), the consensus shift against the midpoint of the
    Strict-only and Lenient-only shifts, the value simple averaging of the two stances would give.

    ``beyond_midpoint`` = shift_consensus - (shift_strict + shift_lenient) / 2; negative means the consensus
    lands below the midpoint (strict dominance). Shifts are from the human reference (``shift_ref``, as the
    paper's G.1 numbers) or, with ``relative_to="baseline"``, from the Single Judge (``shift``); the common
    origin cancels in ``beyond_midpoint`` up to the protocols' usable items differing. Empty when a protocol is
    missing (names resolve as in :func:`resolve_protocol`).
    """
    column = "shift_ref" if relative_to == "reference" else "shift"
    present = alignment["protocol"].unique().tolist() if "protocol" in alignment else []
    names = [resolve_protocol(n, present) for n in (consensus, strict, lenient)]
    if any(n is None for n in names):
        return pd.DataFrame(columns=DOMINANCE_COLUMNS)
    c, s, le = (str(n) for n in names)
    table = alignment.pivot(index="trait", columns="protocol", values=column)
    traits = [t for t in dict.fromkeys(alignment["trait"]) if t != ALL] + [ALL]
    table = table.reindex(index=[t for t in traits if t in table.index])
    out = pd.DataFrame({"trait": table.index, "consensus": c, "strict": s, "lenient": le, "relative_to": relative_to})
    out["shift_consensus"] = table[c].to_numpy(np.float64)
    out["shift_strict"] = table[s].to_numpy(np.float64)
    out["shift_lenient"] = table[le].to_numpy(np.float64)
    out["midpoint"] = (out["shift_strict"] + out["shift_lenient"]) / 2
    out["beyond_midpoint"] = out["shift_consensus"] - out["midpoint"]
    return out[DOMINANCE_COLUMNS]


# -- paired comparisons (Section 4.1, Appendix F) --------------------------------------------------------


def _pooled_rmse(counts: FloatArray, sse: FloatArray) -> float:
    """RMSE from per-essay item counts and sums of squared errors (so resampling essays keeps traits together)."""
    total = float(counts.sum())
    return math.sqrt(float(sse.sum()) / total) if total else NAN


def paired_rmse(
    preds: pd.DataFrame, refs: pd.DataFrame, baseline: str = "SingleJudge", n_boot: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """RMSE(protocol) - RMSE(baseline) per protocol and trait (``all`` pooled) on the essay-traits both scored
    usably, with a paired bootstrap over essays (an essay's traits are resampled together).

    Uses :func:`madrag.metrics.paired_bootstrap` on per-essay aggregates (item count, sums of squared errors),
    so the CI and two-sided p-value are the same machinery as the QWK comparisons; per trait this is the plain
    paired bootstrap of RMSE. ``diff`` equals the RMSE difference computed directly. Empty without the baseline.
    """
    pairs = _final_pairs(preds, refs)
    base = resolve_protocol(baseline, pairs["protocol"].unique().tolist())
    if base is None:
        return pd.DataFrame(columns=COMPARISON_COLUMNS)
    both = _with_baseline(pairs, base)
    both = both[(both["protocol"] != base) & both[["prediction", "base_pred", "reference"]].notna().all(axis=1)]
    both = both.assign(
        count=1.0,
        sse=(both["prediction"] - both["reference"]) ** 2,
        sse_base=(both["base_pred"] - both["reference"]) ** 2,
    )
    essays = _pooled(both).groupby(["protocol", "trait", "essay_id"], sort=True)[["count", "sse", "sse_base"]].sum()
    rows = []
    for (protocol, trait), group in essays.groupby(level=["protocol", "trait"], sort=False):
        counts, sse, sse_base = (group[c].to_numpy(np.float64) for c in ("count", "sse", "sse_base"))
        test = paired_bootstrap(_pooled_rmse, counts, sse, sse_base, n=n_boot, seed=seed)
        rows.append(
            {
                **{"protocol": protocol, "baseline": base, "trait": trait, "n_essays": len(group)},
                **{"n": int(counts.sum()), "rmse": test.metric_a, "rmse_baseline": test.metric_b},
                **{"diff": test.diff, "ci_low": test.low, "ci_high": test.high, "p_value": test.p_value},
            }
        )
    return _sorted(pd.DataFrame(rows, columns=COMPARISON_COLUMNS), ["protocol", "trait"], _trait_order(refs, pairs))


# -- the whole evaluation -------------------------------------------------------------------------------


@dataclass
class ConsensusEvaluation:
    """Every table of the consensus study, in long form (display: :mod:`madrag.evaluation.tables`)."""

    alignment: pd.DataFrame
    trajectories: pd.DataFrame
    dominance: pd.DataFrame
    comparisons: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def _notes(preds: pd.DataFrame, alignment: pd.DataFrame, baseline: str, resolved: str | None) -> list[str]:
    notes = []
    if resolved is None:
        notes.append(f"baseline {baseline!r} is not among the protocols: shifts vs baseline and comparisons left out")
    last = {str(k): int(v) for k, v in preds.groupby("protocol")["round"].max().items()}
    final = preds[preds["final"].astype(bool)]
    short = final[final["round"] < final["protocol"].map(last)].groupby("protocol").size()
    for protocol, count in short.to_dict().items():
        notes.append(
            f"{protocol}: {count} essay-trait(s) end before round {last[str(protocol)]} "
            "(debate stopped early or the run is incomplete); their last round is their final prediction"
        )
    pooled = alignment[alignment["trait"] == ALL].to_dict(orient="records")
    for row in pooled:
        if row["n_unusable"] > 0:
            notes.append(
                f"{row['protocol']}: {row['n_unusable']} of {row['n'] + row['n_unusable']} final predictions "
                "unusable (an agent gave no usable score); excluded from every metric, not imputed"
            )
        if row["n_no_reference"] > 0:
            notes.append(
                f"{row['protocol']}: {row['n_no_reference']} essay-trait(s) without a human reference left out"
            )
    return notes


def evaluate_consensus(
    agent_scores: pd.DataFrame,
    refs: pd.DataFrame,
    bootstrap: int = 2000,
    seed: int = 0,
    baseline: str = "SingleJudge",
    reference: str = "mean",
) -> ConsensusEvaluation:
    """All tables: alignment (Tables 1, 2, 8), trajectories (Figures 2-4), dominance of every strict-lenient
    MAD protocol present (Table 9) and paired RMSE comparisons vs the baseline (Appendix F). ``reference``
    names what ``refs`` holds (the raters' plain ``mean`` or the ``rounded`` label), recorded in the meta."""
    preds = predictions(agent_scores)
    protocols = order_protocols(preds["protocol"].tolist())
    resolved = resolve_protocol(baseline, protocols)
    alignment = alignment_table(preds, refs, baseline)
    consensus = [p for p in protocols if base_name(p) in ROLE_ASYMMETRIC_MAD]
    tables = [dominance(alignment, consensus=p) for p in consensus]
    dom = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=DOMINANCE_COLUMNS)
    notes = _notes(preds, alignment, baseline, resolved)
    if dom.empty:
        notes.append("dominance (Table 9) needs StrictJudge, LenientJudge and ConsensusMAD / ScoreMaskedMAD")
    items = preds.loc[preds["final"].astype(bool), ITEM].drop_duplicates().merge(refs, on=ITEM, how="inner")
    meta: dict[str, Any] = {
        "protocols": protocols,
        "baseline": resolved,
        "rounds": {str(k): int(v) for k, v in preds.groupby("protocol")["round"].max().items()},
        "n_essays": int(items["essay_id"].nunique()),
        "n_essay_traits": int(items["reference"].notna().sum()),
        "human_mean": _mean(items["reference"].dropna().to_numpy(np.float64)),
        "reference": reference,
        "bootstrap": bootstrap,
        "seed": seed,
        "prediction": "arithmetic mean of the agents' scores at the protocol's final round (Section 2.1)",
        "shift": f"mean(prediction - {resolved or baseline} prediction) on the essay-traits both scored",
        "shift_ref": "mean prediction - mean human reference on the same essay-traits (Appendix G.1)",
    }
    compared = paired_rmse(preds, refs, baseline, n_boot=bootstrap, seed=seed)
    with_ci = compared[compared["ci_low"].notna()]
    if bootstrap > 0 and (w := small_n_warning(with_ci["n"].astype(float), "the paired RMSE comparisons' intervals")):
        notes.append(w)
    return ConsensusEvaluation(
        alignment=alignment,
        trajectories=round_trajectories(preds, agent_scores, refs),
        dominance=dom,
        comparisons=compared,
        notes=notes,
        meta=meta,
    )
