"""What a server reports of itself, as the response cache's key takes it (see
:meth:`madrag.providers.policy.ManagedProvider.backend_identity`)."""

from __future__ import annotations

from typing import Any

MODEL_FIELDS = ("id", "root", "parent", "owned_by", "max_model_len", "meta")
"""The fields of a ``/models`` entry that say which weights a name stands for (vLLM's ``root``, llama.cpp's
``meta``); ``created`` is left out (vLLM and llama.cpp report the time of the request), and so are ids made per
request (vLLM's ``permission``)."""


def model_entries(answer: Any) -> list[dict[str, Any]]:
    """The model entries (objects with a string ``id``) of a parsed ``/v1/models`` answer; none when it is not one."""
    entries = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]


def models_identity(answer: Any, model: str) -> dict[str, Any] | None:
    """From an OpenAI-style ``GET /models`` answer: the entry of ``model`` (its :data:`MODEL_FIELDS`), else the ids
    of every model listed (a one-model server that answers to any name lists the model it runs); None when the
    answer lists no model."""
    listed = model_entries(answer)
    for entry in listed:
        if entry["id"] == model:
            return {"model": {k: entry[k] for k in MODEL_FIELDS if k in entry}}
    return {"models": sorted(str(e["id"]) for e in listed)} if listed else None
