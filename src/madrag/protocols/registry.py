"""Scoring protocols found by name, registered with a decorator (as inspect_ai registers its ``@scorer``s).

A protocol module registers a *factory* under the base names it answers to::

    @register_protocol("MTS")
    def mts(name: str) -> MTSProtocol:
        return MTSProtocol(name)

    @register_protocol("MAD", "MADRAG", options=True, listed=("MADRAG[both_r1]",))
    def trait_judge(name: str) -> TraitJudgeProtocol | None: ...

The factory gets the configured name: a base name, or - with ``options=True`` - a parameterised one
(``MADRAG[both_r1]``, ``ConsensusMAD[rounds=2]``), for which it returns the protocol, None when the options are
not its own (an unknown protocol), or raises ConfigError for bad ones. ``listed``: names :func:`available`
offers after every base name (parameterised ones; a base name in it is offered there instead of among the base
names). Protocols are made once per name.

Plugins. Protocols of other packages are registered by importing their modules before a name is looked up:
every module named by an entry point of the group ``madrag.protocols`` (``[project.entry-points."madrag.protocols"]
toy = "mypackage.toy"``), and every module in ``$MADRAG_PLUGINS`` (module names separated by commas or spaces),
for the CLI, the web app, the Python API and Ray workers alike, by madrag's one plugin loader
(:mod:`madrag.plugins`, as backends: :mod:`madrag.providers.backends`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from madrag.errors import ConfigError
from madrag.plugins import PLUGINS_ENV as PLUGINS_ENV  # the plugins' variable, named here as before
from madrag.plugins import PluginLoader
from madrag.protocols.base import ScoringProtocol

Factory = Callable[[str], ScoringProtocol | None]
"""A registered protocol's maker: the protocol of a configured name, None when the name is not its own."""
F = TypeVar("F", bound=Factory)

ENTRY_POINT_GROUP = "madrag.protocols"
"""Entry point group of modules that register protocols."""


@dataclass(frozen=True)
class Registration:
    """One factory and the names it answers to (see the module docstring)."""

    names: tuple[str, ...]
    factory: Factory
    options: bool = False
    listed: tuple[str, ...] = ()

    def origin(self) -> str:
        """Where the factory is defined (a module re-imported registers the same origin again)."""
        return f"{self.factory.__module__}.{self.factory.__qualname__}"


class ProtocolRegistry:
    """Registered protocols in registration order; plugins imported before the first lookup."""

    def __init__(self, plugins: bool = True) -> None:
        self._by_name: dict[str, Registration] = {}
        self._order: list[Registration] = []
        self._made: dict[str, ScoringProtocol] = {}
        self._plugins = PluginLoader(ENTRY_POINT_GROUP, "protocol plugin") if plugins else None

    def register(self, *names: str, options: bool = False, listed: Sequence[str] = ()) -> Callable[[F], F]:
        """Decorator: register a factory under ``names`` (see the module docstring); ValueError for a name
        another factory holds already."""

        def add(factory: F) -> F:
            self.add(Registration(tuple(names), factory, options, tuple(listed)))
            return factory

        return add

    def add(self, registration: Registration) -> None:
        """Register ``registration``; the same factory registered again (a re-imported module) replaces it."""
        if not registration.names:
            raise ValueError("a protocol needs at least one name")
        for name in registration.names:
            held = self._by_name.get(name)
            if held is not None and held.origin() != registration.origin():
                raise ValueError(f"protocol name {name!r} registered twice ({held.origin()}, {registration.origin()})")
        self._order = [r for r in self._order if r.origin() != registration.origin()] + [registration]
        self._by_name.update(dict.fromkeys(registration.names, registration))
        self._made = {}

    def remove(self, name: str) -> None:
        """Unregister the factory holding ``name`` (with every name it holds); nothing when none does."""
        held = self._by_name.get(name)
        if held is not None:
            self._order = [r for r in self._order if r is not held]
            self._by_name = {n: r for n, r in self._by_name.items() if r is not held}
            self._made = {}

    def get(self, name: str) -> ScoringProtocol:
        """The protocol called ``name``; ConfigError naming the choices when none answers to it (or saying which
        plugin could not be imported)."""
        self.load_plugins()
        protocol = self._make(name)
        if protocol is None:
            raise ConfigError(f"unknown protocol {name!r}; choose from {', '.join(self.names())}")
        return protocol

    def find(self, name: str) -> ScoringProtocol | None:
        """The protocol called ``name``; None when none answers to it (a plugin that cannot be imported is left
        out) or its options are wrong - for readers of runs made elsewhere."""
        self.load_plugins(strict=False)
        try:
            return self._make(name)
        except ConfigError:
            return None

    def _make(self, name: str) -> ScoringProtocol | None:
        """The protocol called ``name``, made once; None when none answers to it."""
        if name in self._made:
            return self._made[name]
        m = re.match(r"^([^\[\]]+)(\[.*\])?$", name)
        registration = None if m is None else self._by_name.get(m.group(1))
        if m is None or registration is None or (m.group(2) is not None and not registration.options):
            return None
        protocol = registration.factory(name)
        if protocol is not None:
            self._made[name] = protocol
        return protocol

    def names(self) -> list[str]:
        """Every base name, then every listed name, in registration order (a plugin that cannot be imported is
        left out here; looking a name up says why)."""
        self.load_plugins(strict=False)
        return [
            *(n for r in self._order for n in r.names if n not in r.listed),
            *(n for r in self._order for n in r.listed),
        ]

    def load_plugins(self, strict: bool = True) -> None:
        """Import the plugin modules not imported yet (the entry points', and ``$MADRAG_PLUGINS``'s as it is now);
        ``strict``: a module that cannot be imported is a ConfigError (else it is tried again next time)."""
        if self._plugins is not None:
            self._plugins.load(strict)


REGISTRY = ProtocolRegistry()
"""Every protocol: madrag's own (registered when :mod:`madrag.protocols` is imported), then the plugins'."""
register_protocol = REGISTRY.register
"""The decorator that registers a protocol factory (see the module docstring)."""
