"""The long frames every consensus metric works on (the consensus paper, "Beyond consensus: downward bias and role
asymmetry in multi-agent LLM judges"): protocol names in the paper's order, the human references, the agents'
scores and the protocols' per-round predictions.

* :func:`references_frame`: one human reference per essay and trait (NaN when unknown).
* :func:`predictions`: a protocol's prediction at a round is the arithmetic mean of its agents' scores at that
  round (Section 2.1: "the arithmetic mean of the two agents' final-round scores"); the strict-lenient gap is
  ``|a - b|`` (Appendix E.1, Figure 4). A prediction with an unusable agent score is unusable: it is counted,
  never imputed.

* :func:`agent_scores_frame`: one row per protocol, essay, trait, round and agent, from the consensus protocols'
  records (:func:`madrag.protocols.consensus.agent_score_rows`); :func:`load_consensus_run`: a run's agent
  scores and references, read from its store.

The metrics over these frames are in :mod:`madrag.paper.consensus.metrics`. ``madrag eval`` reads a consensus
run's final scores without them, as each consensus protocol reads its own back
(:meth:`~madrag.protocols.base.ScoringProtocol.read_scores`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from madrag.data.essay import Essay
from madrag.errors import InputError
from madrag.evaluation.run import open_store, recorded_ties, stored_config
from madrag.metrics import NAN, PAPER_TIES, TieRule
from madrag.protocols.consensus import CONSENSUS_PROTOCOLS, FRAME_COLUMNS, agent_score_rows
from madrag.records import AgentRecord
from madrag.rubric import Rubric, Trait

PAPER_PROTOCOLS = CONSENSUS_PROTOCOLS
"""The consensus protocols in the paper's order (Single, Strict, Lenient, Consensus, Symmetric, Score-Masked)."""
KEYS = ["protocol", "essay_id", "trait"]
ITEM = ["essay_id", "trait"]
AGENT_COLUMNS = [*KEYS, "round", "agent", "score"]
REFERENCE_COLUMNS = ["essay_id", "trait", "reference"]
PREDICTION_COLUMNS = [*KEYS, "round", "prediction", "n_agents", "n_unusable_agents", "gap", "final"]


def base_name(protocol: str) -> str:
    """``ConsensusMAD[rounds=2]`` -> ``ConsensusMAD``."""
    return protocol.split("[", 1)[0].strip()


def resolve_protocol(name: str, protocols: Sequence[str]) -> str | None:
    """``name`` itself when present, else the one protocol whose base name is ``name`` (e.g. ``ConsensusMAD``
    finds ``ConsensusMAD[rounds=4]``); None when absent or ambiguous."""
    if name in protocols:
        return name
    matches = list(dict.fromkeys(p for p in protocols if base_name(p) == name))
    return matches[0] if len(matches) == 1 else None


def order_protocols(protocols: Sequence[str]) -> list[str]:
    """The paper's order (Single, Strict, Lenient, Consensus, Symmetric, Score-Masked), then the others."""
    unique = list(dict.fromkeys(protocols))

    def key(name: str) -> tuple[int, str]:
        base = base_name(name)
        return (PAPER_PROTOCOLS.index(base) if base in PAPER_PROTOCOLS else len(PAPER_PROTOCOLS), name)

    return sorted(unique, key=key)


def require_columns(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """ValueError naming the ``columns`` that ``frame`` (the ``what`` frame) lacks."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} frame lacks column(s) {missing}")


HumanReference = Literal["mean", "rounded"]
"""The consensus paper's human reference: the raters' plain mean (the paper's "average of two human evaluators") or
madrag's rounded label (:meth:`Essay.reference`)."""


def _reference(essay: Essay, trait: Trait, reference: HumanReference, ties: TieRule) -> float:
    """The essay's reference for ``trait`` (the raters' plain mean or the label rounded by ``ties``); NaN when
    unknown."""
    if reference == "rounded":
        ref = essay.reference(trait, ties)
        return NAN if ref is None else float(ref)
    scores = essay.rater_scores.get(trait.name, [])
    return float(np.mean(scores)) if scores else NAN


def references_frame(
    essays: Sequence[Essay], rubric: Rubric, reference: HumanReference = "mean", ties: TieRule = PAPER_TIES
) -> pd.DataFrame:
    """One row per essay and rubric trait: ``essay_id``, ``trait``, ``reference`` (NaN when unknown).

    By default the reference is the raters' plain mean, as the consensus paper's ("the average of two human evaluators",
    Section 3.1); ``reference="rounded"`` uses madrag's label, :meth:`Essay.reference` (the raters' mean
    rounded to a valid score, a tie by ``ties``: the run's ``reference_ties``).
    """
    rows = [(e.id, t.name, _reference(e, t, reference, ties)) for e in essays for t in rubric.traits]
    return pd.DataFrame(rows, columns=REFERENCE_COLUMNS).astype({"reference": "float64"})


def predictions(agent_scores: pd.DataFrame) -> pd.DataFrame:
    """Per (protocol, essay, trait, round): the agents' mean score (Section 2.1), their gap and the final flag.

    ``prediction`` is NaN when any agent's score at that round is NaN (unusable, never imputed); ``gap`` is
    ``|a - b|`` for two usable agents (Appendix E.1), NaN otherwise; ``final`` marks the last round the protocol
    has for that essay-trait (different protocols may run different numbers of rounds).
    """
    require_columns(agent_scores, AGENT_COLUMNS, "agent scores")
    frame = agent_scores[AGENT_COLUMNS].astype({"score": "float64", "round": "int64"})
    if frame.empty:
        dtypes = {"round": "int64", "n_agents": "int64", "n_unusable_agents": "int64", "final": "bool"}
        dtypes |= {"prediction": "float64", "gap": "float64"}
        return pd.DataFrame(
            {c: pd.Series(dtype=dtypes[c] if c in dtypes else frame[c].dtype) for c in PREDICTION_COLUMNS}
        )
    out = (
        frame.assign(unusable=frame["score"].isna())
        .groupby([*KEYS, "round"], sort=True)
        .agg(
            n_agents=("score", "size"),
            n_unusable_agents=("unusable", "sum"),
            mean=("score", "mean"),
            high=("score", "max"),
            low=("score", "min"),
        )
        .reset_index()
    )
    usable = out["n_unusable_agents"] == 0
    out["prediction"] = out["mean"].where(usable)
    out["gap"] = (out["high"] - out["low"]).where(usable & (out["n_agents"] == 2))
    out["final"] = out["round"] == out.groupby(KEYS)["round"].transform("max")
    return out.astype({"n_agents": "int64", "n_unusable_agents": "int64"})[PREDICTION_COLUMNS]


def agent_scores_frame(records: Iterable[AgentRecord], rubric: Rubric, protocols: Sequence[str]) -> pd.DataFrame:
    """One row per (protocol, essay_id, trait, round, agent) for each named consensus protocol in ``records``
    (:func:`madrag.protocols.consensus.agent_score_rows`; ``score`` NaN when unusable); non-consensus names are
    ignored."""
    frame = pd.DataFrame(agent_score_rows(records, rubric, protocols), columns=FRAME_COLUMNS)
    return frame.astype({"round": "int64", "score": "float64"})


def load_consensus_run(
    run_dir: Path, reference: HumanReference = "mean"
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """(agent scores, references, stored config) of a run's consensus protocols, read from its store; the
    reference is the raters' plain mean (the consensus paper) or, with ``reference="rounded"``, the rounded label.

    InputError when ``run_dir`` holds no run, no stored configuration, or no consensus protocol.
    """
    with closing(open_store(run_dir)) as store:
        config, rubric, names = stored_config(store, run_dir)
        protocols = [n for n in names if base_name(n) in PAPER_PROTOCOLS]
        if not protocols:
            found = ", ".join(names) or "none"
            raise InputError(
                f"run at {run_dir} has no consensus protocol ({', '.join(PAPER_PROTOCOLS)}); it has {found}"
            )
        essays = store.essays()
        frame: pd.DataFrame = agent_scores_frame(store.records(), rubric, protocols)
    references = references_frame(essays, rubric, reference, recorded_ties(config))  # the run's tie rule
    return frame, references, dict(config)
