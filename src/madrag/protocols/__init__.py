"""Scoring protocols, found by name: ``get_protocol("MADRAG")``, ``get_protocol("MADRAG[both_r1]")``,
``get_protocol("ConsensusMAD[rounds=2]")``.

Each protocol module declares the names it answers to (its ``FAMILY``); the registry below holds them in the
order :func:`available` lists them.
"""

from __future__ import annotations

from madrag.protocols import cj, consensus, geval, mts, trait_judge, whole_essay
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.protocols.consensus import CONSENSUS_PROTOCOLS, ConsensusProtocol
from madrag.protocols.registry import ProtocolRegistry
from madrag.protocols.trait_judge import TraitJudgeProtocol
from madrag.protocols.whole_essay import WholeEssayProtocol

REGISTRY = ProtocolRegistry(
    [whole_essay.FAMILY, trait_judge.FAMILY, consensus.FAMILY, geval.FAMILY, cj.FAMILY, mts.FAMILY]
)
"""Every protocol name: seed 000's (SA ... MADRAG, transcript variants), seed 002's consensus judges, then the
other training-free scorers (GEval, CJ, MTS; docs/protocols.md)."""

ABLATION = ["SA", "SARAG", "MA", "MAD", "MARAG", "MADRAG"]
"""Seed 000's ablation, in the paper's order."""
CONSENSUS_ABLATION = list(CONSENSUS_PROTOCOLS)
"""Seed 002's protocols, in the paper's order."""
TRAINING_FREE = ["GEval", "CJ", "MTS"]
"""The other training-free scorers beside MADRAG (docs/protocols.md)."""


def get_protocol(name: str) -> ScoringProtocol:
    """A protocol by name: SA, SARAG, MA, MAD, MARAG, MADRAG, MAD/MADRAG[<transcript variant>], or one of seed
    002's consensus protocols (SingleJudge, StrictJudge, LenientJudge, ConsensusMAD, SymmetricMAD, ScoreMaskedMAD;
    the MAD ones with an optional [rounds=N])."""
    return REGISTRY.get(name)


def available() -> list[str]:
    """The protocol names to offer (the parameterised ones in their listed forms)."""
    return REGISTRY.names()


__all__ = [
    "ABLATION",
    "CONSENSUS_ABLATION",
    "CONSENSUS_PROTOCOLS",
    "REGISTRY",
    "TRAINING_FREE",
    "ConsensusProtocol",
    "ScoringProtocol",
    "TraitJudgeProtocol",
    "TraitScore",
    "WholeEssayProtocol",
    "available",
    "get_protocol",
]
