"""Scoring protocols. ``get_protocol("MADRAG")``, ``get_protocol("MADRAG[both_r1]")``."""

from __future__ import annotations

import re

from madrag.errors import ConfigError
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.protocols.debate import VARIANTS
from madrag.protocols.trait_judge import BUILTIN, TraitJudgeProtocol

_VARIANT = re.compile(r"^(MADRAG|MAD)\[(\w+)\]$")


def get_protocol(name: str) -> ScoringProtocol:
    """A protocol by name: MA, MAD, MARAG, MADRAG, or MAD/MADRAG[<transcript variant>]."""
    if name in BUILTIN:
        return BUILTIN[name]
    if m := _VARIANT.match(name):
        base, variant = m.group(1), m.group(2)
        if variant not in VARIANTS:
            raise ConfigError(f"unknown transcript variant {variant!r}; choose from {', '.join(VARIANTS)}")
        return TraitJudgeProtocol(name, debate=variant, exemplars=base == "MADRAG")  # type: ignore[arg-type]
    raise ConfigError(f"unknown protocol {name!r}; choose from {', '.join(available())}")


def available() -> list[str]:
    return [*BUILTIN, *(f"MADRAG[{v}]" for v in VARIANTS)]


__all__ = ["ScoringProtocol", "TraitScore", "available", "get_protocol"]
