"""The schema of a run's stored configuration (its identity): what is provenance, how two configurations differ.

A run resumes only when the configuration it was made with matches the one a job has now. The configuration
carries ``config_version``; one stored without it is version 1 (every release before versions). Before the
comparison the stored configuration is brought to the current version by the upgrades of
:mod:`madrag.pipeline.migrations` (the one home of every older format), which also says what a run's identity
is (``identity``). A configuration newer than this code is refused.

Two things need no upgrade function:

- a scoring setting added to :class:`~madrag.settings.ScoringSettings` is filled in, in the stored settings of a
  run made before it, with the value that reproduces that run (:func:`madrag.settings.stored_settings`);
- provenance (:data:`PROVENANCE`: where each prompt template came from, each template's hash, the protocol
  preset) is recorded but is not the run's identity.

Prompt templates: a run's identity holds the names of the templates it uses and one hash of their texts
(``prompt_texts_sha256``). A run is one set of prompts, so an older run whose packaged templates changed since
is refused, naming the changed templates (from the per-template hashes in ``prompt_sha256``, recorded since
version 2); it resumes with ``--prompts-dir`` holding the texts of the release that made it (where a text comes
from is provenance, so the override folder is accepted).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

Config = dict[str, Any]
VERSION_KEY = "config_version"
PROVENANCE = ("prompt_sources", "prompt_sha256", "protocol_preset")
"""Keys of a configuration that record where things came from, not what the run is (``protocol_preset``: the
name of the list its protocols were given by, ``madrag score --protocols NAME``)."""


def prompt_identity(names: Sequence[str], texts: Sequence[str], sources: Sequence[str]) -> Config:
    """The templates' part of a configuration: their names and one hash of their texts (identity), where each
    came from and each one's hash (provenance)."""
    return {
        "prompts": sorted(names),
        "prompt_texts_sha256": hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16],
        "prompt_sources": dict(zip(names, sources, strict=True)),
        "prompt_sha256": {n: hashlib.sha256(t.encode()).hexdigest()[:16] for n, t in zip(names, texts, strict=True)},
    }


def differences(stored: Any, current: Any) -> list[str]:
    """What differs between two identities, by key (``settings.<name>`` for a setting, ``provider.<field>`` for
    a field of the backend)."""
    out: list[str] = []
    if not isinstance(stored, dict) or not isinstance(current, dict):
        return ["config"]
    for key in sorted(set(stored) | set(current)):
        if stored.get(key) == current.get(key):
            continue
        mine, theirs = stored.get(key), current.get(key)
        if key in ("settings", "provider") and isinstance(mine, dict) and isinstance(theirs, dict):
            out += [f"{key}.{k}" for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)]
        else:
            out.append(key)
    return out


def runtime_hint(stored: Config, diff: list[str]) -> str:
    """When the embedded model's runtime is what differs: how to resume (``stored``: the run's configuration in
    today's shape); else ""."""
    provider = stored.get("provider")
    runtime = provider.get("runtime") if isinstance(provider, dict) else None
    if "provider.runtime" not in diff or runtime is None:
        return ""
    return f"; it was answered by the {runtime} runtime: resume it with --runtime {runtime}"


def changed_templates(stored: Config, current: Config) -> list[str]:
    """The templates whose text differs between two configurations (both with per-template hashes), else []."""
    mine, theirs = stored.get("prompt_sha256"), current.get("prompt_sha256")
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return []
    return sorted(n for n in set(mine) | set(theirs) if mine.get(n) != theirs.get(n))
