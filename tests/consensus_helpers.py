"""Hand-built frames for the consensus paper evaluation tests: agent scores shaped like ``agent_scores_frame`` and
human references, plus small helpers to edit and read them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

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
