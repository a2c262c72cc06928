"""A consensus run's figures beside the consensus paper's reported ones: ``madrag paper eval-consensus --paper``.

The paper's task is read from the run's traits (content, organization, expression: "Korean Essay"; coherence,
consistency, fluency, relevance: "SummEval"); a run of other traits is compared with neither, and the paper's
figures are listed as reported only. The pooled (``all``) alignment row of each protocol is matched with the
figures the paper's text states (:mod:`madrag.paper.reported`):

* Table 1 (4.1, 4.2, G.1): RMSE and Spearman of Single Judge, Strict Role Judge, Consensus-based and Symmetric MAD;
* Table 2 (4.2): the mean predicted score of each, and the human reference's mean;
* Table 8 (G.1): the Lenient Role Judge's RMSE and Spearman and the Strict / Lenient shifts from the reference;
* Figures 3-4 (E.1): one judge model's round-wise Consensus MAD mean and strict-lenient gap, matched only when the
  run's model is that model.

Those tables average six judge models; one run is one model (said in a note), several runs given together are
averaged first (:mod:`madrag.paper.consensus.multi`). A protocol the paper reports that the run did not score
stands with its measured figure missing. Score-Masked MAD has no figure in the paper's text (its tables are images).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import pandas as pd

from madrag.paper.beside_paper import BESIDE_COLUMNS, BesidePaper, beside_row, reported_only_frame
from madrag.paper.consensus.frames import base_name
from madrag.paper.consensus.metrics import ALL
from madrag.paper.reported import Reported, reported

TASKS: dict[str, frozenset[str]] = {
    "Korean Essay": frozenset({"content", "organization", "expression"}),
    "SummEval": frozenset({"coherence", "consistency", "fluency", "relevance"}),
}
"""The paper's two tasks by their criteria."""
HUMAN = "Human"
"""The protocol name of the paper's human-reference row (Table 2)."""


def consensus_task(traits: Iterable[str]) -> str | None:
    """The paper's task whose criteria are exactly ``traits`` (case-insensitive), else None."""
    names = frozenset(str(t).strip().lower() for t in traits if str(t) != ALL)
    return next((task for task, criteria in TASKS.items() if criteria == names), None)


def model_key(name: str | None) -> str:
    """A model name compared loosely: ``google/gemma-3-12b-it`` and the paper's "Gemma3-12B" are one model."""
    text = re.sub(r"[^a-z0-9.]", "", (name or "").strip().lower().rsplit("/", 1)[-1])
    return text.removesuffix("it") if text.startswith("gemma") else text


def _pooled_rows(alignment: pd.DataFrame) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(paper protocol -> the run's pooled alignment row, paper protocol -> the run's protocol name); a protocol
    run under its plain name is preferred to a variant of it."""
    rows: dict[str, dict[str, Any]] = {}
    names: dict[str, str] = {}
    for record in alignment[alignment["trait"] == ALL].to_dict(orient="records"):
        row = {str(k): v for k, v in record.items()}
        name = str(row["protocol"])
        base = base_name(name)
        if base not in rows or name == base:
            rows[base], names[base] = row, name
    return rows, names


def _human_mean(pooled: dict[str, dict[str, Any]]) -> tuple[Any, Any]:
    """(the human reference's mean, its n) over the essay-traits of the protocol with the most usable ones."""
    if not pooled:
        return None, None
    row = max(pooled.values(), key=lambda r: int(r.get("n", 0)))  # an average over runs has no n
    return row["mean_ref"], row.get("n")


def _round_figure(fig: Reported, trajectories: pd.DataFrame) -> tuple[object, object]:
    """(the run's value of a round-wise figure (E.1), its n): the protocol's pooled row at that round."""
    round_ = int(fig.trait.split()[-1])
    match = trajectories[
        (trajectories["protocol"].map(base_name) == fig.protocol)
        & (trajectories["round"] == round_)
        & (trajectories["trait"] == ALL)
    ]
    if match.empty or fig.metric not in match.columns:
        return None, None
    return match.iloc[0][fig.metric], match.iloc[0]["n"]


def _notes(task: str, model: str | None, names: dict[str, str], n_models: int) -> list[str]:
    one = f"one judge model ({model})" if n_models == 1 else f"the mean over {n_models} judge models"
    notes = [
        f"the paper's Tables 1, 2 and 8 are means over six judge models (GPT-4o-mini, Gemma-3-4B/12B/27B-IT, "
        f"Qwen3.5-9B/27B) on its {task} sample; this run's figures are {one}",
        "the paper prints its tables as images: only the figures its text states are compared (4.1, 4.2, E.1, G.1); "
        "none for Score-Masked MAD, the dominance of Table 9 or the cross-model grid of Table 3",
    ]
    notes += [f"{run} is compared with the paper's {paper}" for paper, run in names.items() if run != paper]
    return notes


def beside_consensus(
    alignment: pd.DataFrame,
    trajectories: pd.DataFrame,
    model: str | None = None,
    n_models: int = 1,
) -> BesidePaper:
    """The run's pooled figures beside the consensus paper's (see the module docstring). ``model``: the one judge
    model of a single run (None for an average over ``n_models`` runs: the per-model figures are then listed as
    reported only)."""
    traits = [t for t in dict.fromkeys(alignment["trait"].astype(str)) if t != ALL]
    task = consensus_task(traits)
    if task is None:
        line = (
            f"the consensus paper reports its Korean essay and SummEval tasks only; this run's traits "
            f"({', '.join(traits) or 'none'}) are neither's, so its figures are listed as reported only"
        )
        empty = pd.DataFrame(columns=BESIDE_COLUMNS)
        return BesidePaper(None, model or "", empty, reported_only_frame(list(reported("consensus"))), [line],
                           paper="consensus", layout="table")  # fmt: skip
    pooled, names = _pooled_rows(alignment)
    rows, only = [], []
    for fig in (f for f in reported("consensus") if f.set == task):
        if fig.trait.startswith("round"):
            if model is None or model_key(model) != model_key(fig.model):
                only.append(fig)
                continue
            value, n = _round_figure(fig, trajectories)
            rows.append(beside_row(f"{fig.protocol} ({fig.model})", fig.trait, fig.metric, value, fig, n))
            continue
        if fig.protocol == HUMAN:
            value, n = _human_mean(pooled)
        else:
            row = pooled.get(fig.protocol, {})
            value, n = row.get(fig.metric), row.get("n")
        rows.append(beside_row(names.get(fig.protocol, fig.protocol), ALL, fig.metric, value, fig, n))
    beside = pd.DataFrame(rows, columns=BESIDE_COLUMNS)
    notes = _notes(task, model, names, n_models)
    return BesidePaper(task, model or "", beside, reported_only_frame(only), notes, paper="consensus", layout="table")
