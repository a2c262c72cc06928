"""Scoring protocols. ``get_protocol("MADRAG")``, ``get_protocol("MADRAG[both_r1]")``."""

from __future__ import annotations

import re
from typing import cast

from madrag.errors import ConfigError
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.protocols.debate import VARIANTS, Variant
from madrag.protocols.single_judge import BUILTIN_SINGLE, SingleJudgeProtocol
from madrag.protocols.trait_judge import BUILTIN, TraitJudgeProtocol

_VARIANT = re.compile(r"^(MADRAG|MAD)\[(\w+)\]$")


def get_protocol(name: str) -> ScoringProtocol:
    """A protocol by name: MA, MAD, MARAG, MADRAG, or MAD/MADRAG[<transcript variant>]."""
    if name in BUILTIN:
        return BUILTIN[name]
    if name in BUILTIN_SINGLE:
        return BUILTIN_SINGLE[name]
    if m := _VARIANT.match(name):
        base, variant = m.group(1), m.group(2)
        if variant not in VARIANTS:
            raise ConfigError(f"unknown transcript variant {variant!r}; choose from {', '.join(VARIANTS)}")
        return TraitJudgeProtocol(name, debate=cast(Variant, variant), exemplars=base == "MADRAG")
    raise ConfigError(f"unknown protocol {name!r}; choose from {', '.join(available())}")


def available() -> list[str]:
    return ["SA", "SARAG", *BUILTIN, *(f"MADRAG[{v}]" for v in VARIANTS)]


ABLATION = ["SA", "SARAG", "MA", "MAD", "MARAG", "MADRAG"]

__all__ = [
    "ABLATION",
    "ScoringProtocol",
    "SingleJudgeProtocol",
    "TraitJudgeProtocol",
    "TraitScore",
    "available",
    "get_protocol",
]
