"""Which backend scored a run, in words every page and export row carries, and whether its scores can be
used as grades: the fake backend answers with canned text and the embedded model is a small offline model
for trying madrag out, so neither gives valid scores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from madrag.providers.backends import traits_of


def _fields(backend: Mapping[str, Any] | BaseModel | None) -> Mapping[str, Any]:
    """A run's backend as its fields: the server's typed description or the JSON of one."""
    if isinstance(backend, BaseModel):
        return backend.model_dump()
    return backend or {}


def scored_by(backend: Mapping[str, Any] | BaseModel | None) -> str:
    """``fake backend``, ``embedded model (name)`` or ``model at server``: who scored a run."""
    backend = _fields(backend)
    if not backend:
        return "unknown backend"
    kind, model = backend.get("kind"), backend.get("model")
    traits = traits_of(kind)
    if traits is not None and not traits.remote:
        return (traits.named or f"{kind} backend") + (f" ({model})" if model else "")
    where = backend.get("base_url") or "the OpenAI API"
    return f"{model or 'unnamed model'} at {where}"


def warning(backend: Mapping[str, Any] | BaseModel | None) -> str | None:
    """Why a run's scores are not valid grades (what its backend is), or None when a real model scored them."""
    traits = traits_of(_fields(backend).get("kind"))
    return None if traits is None or traits.valid_grades else traits.not_grades or "does not give valid grades"
