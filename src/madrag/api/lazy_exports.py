"""A package's public names imported on first use (PEP 562), so that importing the package costs nothing.

``import madrag`` runs before every ``madrag`` command and every ``madrag.x.y`` import; importing the scoring
stack there (pandas, scipy, the pydantic models) would cost each of them seconds. A package instead lists
where each public name lives and binds ``__getattr__ = lazy_exports(globals(), homes)`` outside
``TYPE_CHECKING`` (mypy reads the names from the package's ``if TYPE_CHECKING:`` imports, and so still rejects
a name the package does not have).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(namespace: dict[str, Any], homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of the package whose globals are ``namespace``: a name of ``homes`` (name ->
    the module that defines it) is imported from its module the first time it is read, then kept in
    ``namespace``; any other name is an AttributeError as usual."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
