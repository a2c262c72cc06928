"""Scoring protocols found by name: each protocol module declares a :class:`ProtocolFamily` (its fixed names and
a parser for its parameterised names, e.g. ``MADRAG[both_r1]`` or ``ConsensusMAD[rounds=2]``), and
:mod:`madrag.protocols` puts the families in one :class:`ProtocolRegistry`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from madrag.errors import ConfigError
from madrag.protocols.base import ScoringProtocol

NameParser = Callable[[str], ScoringProtocol | None]
"""A family's reader of parameterised names: the protocol, None when the name is not the family's, or
ConfigError when it is but its options are wrong."""


@dataclass(frozen=True)
class ProtocolFamily:
    """The names one protocol module answers to.

    ``fixed``: protocols by their exact name. ``parse``: the family's reader of other names (parameterised
    ones), if any. ``listed``: the names ``parse`` accepts that :meth:`ProtocolRegistry.names` shows.
    """

    fixed: Mapping[str, ScoringProtocol] = field(default_factory=dict)
    parse: NameParser | None = None
    listed: tuple[str, ...] = ()


class ProtocolRegistry:
    """Protocol families in a fixed order: exact names first, then each family's parser in that order."""

    def __init__(self, families: Sequence[ProtocolFamily]) -> None:
        self.families = tuple(families)
        self._fixed: dict[str, ScoringProtocol] = {}
        for family in self.families:
            for name, protocol in family.fixed.items():
                if name in self._fixed:
                    raise ValueError(f"protocol name {name!r} registered twice")
                self._fixed[name] = protocol

    def get(self, name: str) -> ScoringProtocol:
        """The protocol called ``name``; ConfigError naming the choices when no family knows it."""
        if name in self._fixed:
            return self._fixed[name]
        for family in self.families:
            if family.parse is not None and (protocol := family.parse(name)) is not None:
                return protocol
        raise ConfigError(f"unknown protocol {name!r}; choose from {', '.join(self.names())}")

    def names(self) -> list[str]:
        """Every fixed name, then every listed parameterised name, family by family."""
        return [*self._fixed, *(name for family in self.families for name in family.listed)]
