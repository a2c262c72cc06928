"""Prompt templates: package files in ``madrag/prompts/``, overridable file by file from a user folder.

Templates use ``$NAME`` placeholders (``string.Template``), the notation of the seeds' prompt figures. A
placeholder with no value is an error, never an empty string.
"""

from __future__ import annotations

import string
from importlib import resources
from pathlib import Path

from madrag.errors import ConfigError


class PromptLibrary:
    """Loads and renders templates; a file in ``override_dir`` replaces the packaged one of the same name."""

    def __init__(self, override_dir: str | Path | None = None) -> None:
        self.override_dir = Path(override_dir) if override_dir is not None else None
        if self.override_dir is not None and not self.override_dir.is_dir():
            raise ConfigError(f"prompt folder not found: {self.override_dir}")
        self._cache: dict[str, str] = {}

    def source(self, name: str) -> str:
        """Where template ``name`` comes from (for the run's provenance)."""
        if self.override_dir is not None and (self.override_dir / f"{name}.txt").is_file():
            return str(self.override_dir / f"{name}.txt")
        return f"package:madrag/prompts/{name}.txt"

    def text(self, name: str) -> str:
        if name not in self._cache:
            override = self.override_dir / f"{name}.txt" if self.override_dir is not None else None
            if override is not None and override.is_file():
                raw = override.read_text(encoding="utf-8")
            else:
                res = resources.files("madrag").joinpath("prompts", f"{name}.txt")
                if not res.is_file():
                    raise ConfigError(f"no prompt template named {name!r}")
                raw = res.read_text(encoding="utf-8")
            self._cache[name] = raw[:-1] if raw.endswith("\n") else raw
        return self._cache[name]

    def render(self, name: str, **values: object) -> str:
        template = string.Template(self.text(name))
        try:
            return template.substitute({k: str(v) for k, v in values.items()})
        except KeyError as exc:
            raise ConfigError(f"prompt template {name!r} needs a value for ${exc.args[0]}") from exc
        except ValueError as exc:
            raise ConfigError(f"prompt template {name!r} is malformed: {exc}") from exc

    def names_used(self, names: list[str]) -> dict[str, str]:
        return {n: self.source(n) for n in names}
