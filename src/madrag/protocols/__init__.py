"""Scoring protocols, found by name: ``get_protocol("MADRAG")``, ``get_protocol("MADRAG[both_r1]")``,
``get_protocol("ConsensusMAD[rounds=2]")``.

Each protocol module registers its factory with :func:`register_protocol` when it is imported; the modules are
imported below in the order :func:`available` lists their names. Other packages' protocols are registered the
same way, by the plugin modules :mod:`madrag.protocols.registry` imports (entry points ``madrag.protocols``,
``$MADRAG_PLUGINS``).
"""

from __future__ import annotations

import importlib

BUILTIN_MODULES = ("whole_essay", "trait_judge", "consensus", "geval", "cj", "mts")
"""madrag's protocol modules, imported (so registered) in the order their names are offered."""
for _module in BUILTIN_MODULES:
    importlib.import_module(f"{__name__}.{_module}")

from madrag.agents.calls import CallContext  # noqa: E402  (what a protocol scores with, for plugins)
from madrag.protocols.base import ProtocolNeeds, RecordReader, ScoringProtocol, TraitScore, essay_width  # noqa: E402
from madrag.protocols.consensus import CONSENSUS_PROTOCOLS, ConsensusProtocol  # noqa: E402
from madrag.protocols.per_trait import TraitProtocol, ask_for_score  # noqa: E402
from madrag.protocols.registry import REGISTRY, register_protocol  # noqa: E402
from madrag.protocols.trait_judge import TraitJudgeProtocol  # noqa: E402
from madrag.protocols.whole_essay import WholeEssayProtocol  # noqa: E402

ABLATION = ["SA", "SARAG", "MA", "MAD", "MARAG", "MADRAG"]
"""The MADRAG paper's ablation, in the paper's order."""
CONSENSUS_ABLATION = list(CONSENSUS_PROTOCOLS)
"""The consensus paper's protocols, in the paper's order."""
TRAINING_FREE = ["GEval", "CJ", "MTS"]
"""The other training-free scorers beside MADRAG (docs/protocols.md)."""


def get_protocol(name: str) -> ScoringProtocol:
    """A protocol by name: SA, SARAG, MA, MAD, MARAG, MADRAG, MAD/MADRAG[<transcript variant>], one of seed
    002's consensus protocols (SingleJudge, StrictJudge, LenientJudge, ConsensusMAD, SymmetricMAD,
    ScoreMaskedMAD; the MAD ones with an optional [rounds=N]), GEval, CJ, MTS, or a plugin's protocol."""
    return REGISTRY.get(name)


def find_protocol(name: str) -> ScoringProtocol | None:
    """The protocol called ``name``; None when no registered protocol answers to it (e.g. a run made with a
    plugin that is not loaded now)."""
    return REGISTRY.find(name)


def available() -> list[str]:
    """The protocol names to offer (the parameterised ones in their listed forms)."""
    return REGISTRY.names()


__all__ = [
    "ABLATION",
    "CONSENSUS_ABLATION",
    "CONSENSUS_PROTOCOLS",
    "REGISTRY",
    "TRAINING_FREE",
    "CallContext",
    "ConsensusProtocol",
    "ProtocolNeeds",
    "RecordReader",
    "ScoringProtocol",
    "TraitJudgeProtocol",
    "TraitProtocol",
    "TraitScore",
    "WholeEssayProtocol",
    "ask_for_score",
    "available",
    "essay_width",
    "find_protocol",
    "get_protocol",
    "register_protocol",
]
