"""The schema of a run's stored configuration (its identity), its version and plain upgrade functions.

A run resumes only when the configuration it was made with matches the one a job has now. The configuration
carries ``config_version``; one stored without it is version 1 (every release before versions). Before the
comparison the stored configuration is brought to :data:`CONFIG_VERSION` by :data:`UPGRADES` (``UPGRADES[i]``
takes version ``i + 1`` to ``i + 2``; append, never edit one that has shipped), each filling in what its version
added with the value that reproduces what older runs did. A configuration newer than this code is refused.

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
import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from madrag.errors import ConfigError
from madrag.metrics import PAPER_TIES
from madrag.settings import ScoringSettings, stored_settings

Config = dict[str, Any]
Upgrade = Callable[[Config], Config]
VERSION_KEY = "config_version"
PROVENANCE = ("prompt_sources", "prompt_sha256", "protocol_preset")
"""Keys of a configuration that record where things came from, not what the run is (``protocol_preset``: the
name of the list its protocols were given by, ``madrag score --protocols NAME``)."""


def _v1_to_v2(config: Config) -> Config:
    """Version 1 -> 2. Version 1 left out what was the default when it was left out: the ``half_up`` tie rule,
    the windows embedder (the default before the paper's), no role backends; and it recorded each template by
    where it came from (version 2: the names are identity, the sources provenance)."""
    out = dict(config)
    out["settings"] = {"reference_ties": PAPER_TIES, **(out.get("settings") or {})}
    out.setdefault("embedder", "minilm-windows")
    out.setdefault("role_providers", {})
    prompts = out.get("prompts") or {}
    out["prompts"] = sorted(prompts)
    out["prompt_sources"] = dict(prompts) if isinstance(prompts, dict) else {}
    out[VERSION_KEY] = 2
    return out


def _v2_to_v3(config: Config) -> Config:
    """Version 2 -> 3. Version 2 recorded a backend flat with every kind's fields (a fake backend's
    ``base_url``, ``api_key_env``, ``n_ctx``...), which only the kind's own were ever read from; version 3
    records the kind's own (:func:`madrag.providers.spec.upgrade_identity`)."""
    from madrag.providers.spec import upgrade_identity

    out = dict(config)
    provider = out.get("provider")
    if isinstance(provider, dict) and "kind" in provider:
        out["provider"] = upgrade_identity(provider)
    roles = out.get("role_providers")
    if isinstance(roles, dict):
        out["role_providers"] = {r: upgrade_identity(s) if isinstance(s, dict) else s for r, s in roles.items()}
    out[VERSION_KEY] = 3
    return out


UPGRADES: Sequence[Upgrade] = (_v1_to_v2, _v2_to_v3)
"""``UPGRADES[i]`` takes a configuration from version ``i + 1`` to ``i + 2``, in order; append, never edit."""
CONFIG_VERSION = len(UPGRADES) + 1
"""The version of the configurations this code writes."""


def prompt_identity(names: Sequence[str], texts: Sequence[str], sources: Sequence[str]) -> Config:
    """The templates' part of a configuration: their names and one hash of their texts (identity), where each
    came from and each one's hash (provenance)."""
    return {
        "prompts": sorted(names),
        "prompt_texts_sha256": hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16],
        "prompt_sources": dict(zip(names, sources, strict=True)),
        "prompt_sha256": {n: hashlib.sha256(t.encode()).hexdigest()[:16] for n, t in zip(names, texts, strict=True)},
    }


def upgrade(config: Config, where: str = "run") -> Config:
    """``config`` at :data:`CONFIG_VERSION`, by the upgrades it still needs; a ConfigError when it is newer."""
    version = int(config.get(VERSION_KEY, 1))
    if version > CONFIG_VERSION:
        raise ConfigError(
            f"{where} was made by a newer madrag (run configuration version {version}; this one reads up to "
            f"{CONFIG_VERSION}); resume it with that madrag"
        )
    for step in UPGRADES[version - 1 :]:
        config = step(config)
    return config


def identity(config: Config, settings_model: type[BaseModel] = ScoringSettings, where: str = "run") -> Config:
    """What two configurations must share for a run to resume: ``config`` upgraded, its settings completed
    (:func:`~madrag.settings.stored_settings`), without provenance, as JSON."""
    current = upgrade(json.loads(json.dumps(config, sort_keys=True, default=str)), where)
    current["settings"] = stored_settings(current.get("settings") or {}, settings_model)
    return {k: v for k, v in current.items() if k not in PROVENANCE}


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
    """When the embedded model's runtime is what differs: how to resume (a run recorded without a runtime was
    answered by llama-cpp-python, the only runtime then); else ""."""
    provider = stored.get("provider")
    if "provider.runtime" not in diff or not isinstance(provider, dict):
        return ""
    from madrag.providers.spec import ADDED_LATER

    runtime = provider.get("runtime", ADDED_LATER["runtime"])
    return f"; it was answered by the {runtime} runtime: resume it with --runtime {runtime}"


def changed_templates(stored: Config, current: Config) -> list[str]:
    """The templates whose text differs between two configurations (both with per-template hashes), else []."""
    mine, theirs = stored.get("prompt_sha256"), current.get("prompt_sha256")
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return []
    return sorted(n for n in set(mine) | set(theirs) if mine.get(n) != theirs.get(n))
