"""Which backend scored a run, in words every page and export row carries, and whether its scores can be
used as grades: the fake backend answers with canned text and the embedded model is a small offline model
for trying madrag out, so neither gives valid scores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

NOT_VALID = {
    "fake": "is for trying the app out",
    "llamacpp": "is a small offline model for trying madrag out",
}


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
    if kind == "fake":
        return "fake backend (canned answers)"
    if kind == "llamacpp":
        return "embedded model" + (f" ({model})" if model else "")
    where = backend.get("base_url") or "the OpenAI API"
    return f"{model or 'unnamed model'} at {where}"


def warning(backend: Mapping[str, Any] | BaseModel | None) -> str | None:
    """Why a run's scores are not valid grades (what its backend is), or None when a real model scored them."""
    backend = _fields(backend)
    return None if not backend else NOT_VALID.get(str(backend.get("kind")))
