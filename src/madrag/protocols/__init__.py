"""Scoring protocols. ``get_protocol("MADRAG")``, ``get_protocol("MADRAG[both_r1]")``,
``get_protocol("ConsensusMAD[rounds=2]")``."""

from __future__ import annotations

import re
from typing import cast

from madrag.errors import ConfigError
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.protocols.consensus import CONSENSUS_PROTOCOLS, ConsensusProtocol, consensus_protocol
from madrag.protocols.debate import VARIANTS, Variant
from madrag.protocols.trait_judge import BUILTIN, TraitJudgeProtocol
from madrag.protocols.whole_essay import BUILTIN_SINGLE, SingleJudgeProtocol

_VARIANT = re.compile(r"^(MADRAG|MAD)\[(\w+)\]$")


def get_protocol(name: str) -> ScoringProtocol:
    """A protocol by name: SA, SARAG, MA, MAD, MARAG, MADRAG, MAD/MADRAG[<transcript variant>], or one of seed
    002's consensus protocols (SingleJudge, StrictJudge, LenientJudge, ConsensusMAD, SymmetricMAD, ScoreMaskedMAD;
    the MAD ones with an optional [rounds=N])."""
    if name in BUILTIN:
        return BUILTIN[name]
    if name in BUILTIN_SINGLE:
        return BUILTIN_SINGLE[name]
    if (consensus := consensus_protocol(name)) is not None:
        return consensus
    if m := _VARIANT.match(name):
        base, variant = m.group(1), m.group(2)
        if variant not in VARIANTS:
            raise ConfigError(f"unknown transcript variant {variant!r}; choose from {', '.join(VARIANTS)}")
        return TraitJudgeProtocol(name, debate=cast(Variant, variant), exemplars=base == "MADRAG")
    raise ConfigError(f"unknown protocol {name!r}; choose from {', '.join(available())}")


def available() -> list[str]:
    return ["SA", "SARAG", *BUILTIN, *(f"MADRAG[{v}]" for v in VARIANTS), *CONSENSUS_PROTOCOLS]


ABLATION = ["SA", "SARAG", "MA", "MAD", "MARAG", "MADRAG"]
CONSENSUS_ABLATION = ["SingleJudge", "StrictJudge", "LenientJudge", "ConsensusMAD", "SymmetricMAD", "ScoreMaskedMAD"]

__all__ = [
    "ABLATION",
    "CONSENSUS_ABLATION",
    "CONSENSUS_PROTOCOLS",
    "ConsensusProtocol",
    "ScoringProtocol",
    "SingleJudgeProtocol",
    "TraitJudgeProtocol",
    "TraitScore",
    "available",
    "get_protocol",
]
