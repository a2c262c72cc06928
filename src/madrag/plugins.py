"""The one plugin loader: the modules of other packages that register madrag's backends or protocols, imported
before a name is looked up (as pytest and llm load their plugins).

A plugin is a module named by an entry point of a group (``[project.entry-points."madrag.backends"] echo =
"mypackage.echo"``; the groups are the registries': ``madrag.backends``, ``madrag.protocols``), or a module in
``$MADRAG_PLUGINS`` (module names separated by commas or spaces, read as it is at each load). The CLI, the web
app, the Python API and Ray workers load them alike. Nothing else in madrag reads entry points or
``$MADRAG_PLUGINS`` (tests/unit/project/test_architecture.py checks).
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Sequence
from importlib.metadata import entry_points

from madrag.errors import ConfigError

PLUGINS_ENV = "MADRAG_PLUGINS"
"""Environment variable naming plugin modules (comma- or space-separated), for every group."""


@functools.cache
def _entry_point_modules(group: str) -> tuple[tuple[str, str], ...]:
    """(module, where it is named) of each installed entry point of ``group`` (read once per process)."""
    return tuple((p.value.split(":")[0], f"entry point {p.name!r} of {group}") for p in entry_points(group=group))


def plugin_modules(group: str) -> list[tuple[str, str]]:
    """(module, where it is named) of every plugin of ``group``: its entry points', then ``$MADRAG_PLUGINS``'s as
    it is now."""
    named = re.split(r"[,\s]+", os.environ.get(PLUGINS_ENV, ""))
    return [*_entry_point_modules(group), *((m, f"${PLUGINS_ENV}") for m in named if m)]


class PluginLoader:
    """Imports the modules of one registry: ``builtin`` (madrag's own, first; one that cannot be imported is
    always an error), then the plugins of entry point ``group``. ``noun`` names a module in an error
    (``backend plugin``). A module imported once is not imported again."""

    def __init__(self, group: str, noun: str, builtin: Sequence[str] = ()) -> None:
        self.group = group
        self.noun = noun
        self.builtin = tuple(builtin)
        self._loaded: set[str] = set()

    def load(self, strict: bool = True) -> None:
        """Import the modules not imported yet; ``strict``: a plugin that cannot be imported is a ConfigError
        (else it is left out and tried again next time)."""
        for module, where in [*((m, "madrag") for m in self.builtin), *plugin_modules(self.group)]:
            if module in self._loaded:
                continue
            try:
                importlib.import_module(module)
            except Exception as exc:
                if strict or module in self.builtin:
                    raise ConfigError(f"{self.noun} {module!r} ({where}) could not be imported: {exc}") from None
                continue
            self._loaded.add(module)
