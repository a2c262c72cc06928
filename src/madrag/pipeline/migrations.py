"""Runs made by earlier commits, brought to today's format in one place.

A run's stored configuration: one stored before ``config_version`` is version 1; it is brought to
:data:`CONFIG_VERSION` by :data:`UPGRADES` (``UPGRADES[i]`` takes version ``i + 1`` to ``i + 2``; append, never
edit one that has shipped), each filling in what its version added with the value that reproduces what older runs
did, before it is compared with a job's (:func:`identity`); a configuration newer than this code is refused.

A run's final scores:
a run store of schema version 2 keeps its final scores as rows (:meth:`madrag.store.RunStore.scores`), written
as the protocols finish. A run made before then has records and no rows: opened for writing (a run resumed), its
file is first kept beside it (:func:`madrag.store_schema.backup_path`) and its rows are derived here once, by the
derivation the readers used before the rows existed (:func:`derive_scores`: each protocol's scores read back
from its records); opened read-only, the same rows are derived into the in-memory copy the store is read from,
the file left as it is. Every reader then reads rows, whatever commit made the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from madrag.errors import ConfigError
from madrag.metrics import PAPER_TIES
from madrag.pipeline.unusable import missing_cause
from madrag.protocols import find_protocol
from madrag.protocols.base import ScoringProtocol, record_groups
from madrag.protocols.scores import combine_judges, judge_scores
from madrag.providers.backends import backends, find_backend
from madrag.providers.spec import ProviderSpec
from madrag.records import BASELINE_ROLE, AgentRecord, TraitScore
from madrag.rubric import Rubric
from madrag.run_config import PROVENANCE, VERSION_KEY, Config
from madrag.settings import ScoringSettings, stored_settings
from madrag.store import RunStore, score_row

__all__ = ["CONFIG_VERSION", "UPGRADES", "derive_scores", "identity", "upgrade", "upgrade_identity", "upgrade_scores"]

Upgrade = Callable[[Config], Config]


def upgrade_identity(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded identity in the shape of this release's: a record made before the options models held every
    kind's fields (``model_path``, ``base_url``, ``api_key_env``, ``logprobs``, ``n_ctx`` for a fake backend too),
    which only the kind's own were ever read from; they are left out. A record of an unknown kind is kept."""
    kind = stored.get("kind")
    try:
        backend = find_backend(kind) if isinstance(kind, str) else None
    except ConfigError:
        backend = None
    if backend is None:
        return dict(stored)
    known = {*ProviderSpec.model_fields, *(f for b in backends() for f in b.option_fields())}
    keep = {*ProviderSpec.model_fields, *backend.option_fields()}
    return {k: v for k, v in stored.items() if k in keep or k not in known}


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
    records the kind's own (:func:`upgrade_identity`)."""
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


class _StreamedJudges:
    """A run store whose Judge records are read as they are needed, without their prompts and tokens and without
    the failed calls, none kept."""

    def __init__(self, store: RunStore) -> None:
        self._store = store

    def records(self, protocol: str | None = None, role: str | None = None) -> Iterator[AgentRecord]:
        """The records of :meth:`RunStore.records`, Judge records light and without failed calls."""
        if role == "judge":
            found = self._store.records(protocol=protocol, role="judge", answers_only=True)
            return (r for r in found if not r.failed)
        return self._store.records(protocol=protocol, role=role)


def _known_protocols(names: Iterable[str]) -> list[ScoringProtocol]:
    """The registered protocols among ``names``, each once, in order."""
    found = (find_protocol(name) for name in dict.fromkeys(names))
    return [p for p in found if p is not None]


def derive_scores(store: RunStore, rubric: Rubric, protocols: Sequence[str]) -> list[TraitScore]:
    """One TraitScore per (protocol, essay, trait) derived from a run's stored records, as the readers did before
    the scores were rows: each configured protocol's scores as it reads them back
    (:meth:`~madrag.protocols.base.ScoringProtocol.read_scores`), then the Judge records no configured protocol
    claims by the Judge-record rule, then the LLM-free baselines' records (role ``baseline``). Failed calls give
    no score."""
    reader = _StreamedJudges(store)
    known = _known_protocols(protocols)
    out = [score for proto in known for score in proto.read_scores(reader, rubric)]
    claimed = {group for proto in known for group in record_groups(proto)}
    unclaimed = sorted(store.protocols_of("judge") - claimed)
    out += judge_scores((r for group in unclaimed for r in reader.records(protocol=group, role="judge")), rubric)
    for record in store.records(role=BASELINE_ROLE):
        out.append(combine_judges(record.protocol, rubric.trait(record.trait), [record]))
    return out


def _configured(config: Any) -> tuple[Rubric | None, list[str]]:
    """The rubric and protocol names a run's stored configuration holds (None, []: none stored)."""
    if not isinstance(config, dict) or "rubric" not in config:
        return None, []
    names = [str(p["name"]) for p in config.get("protocols", []) if isinstance(p, dict) and "name" in p]
    return Rubric.model_validate(config["rubric"]), names


def upgrade_scores(store: RunStore, *, rederive: bool = False) -> bool:
    """Give a run made before its scores were rows (:meth:`RunStore.scores_pending`) its rows, derived from its
    records (:func:`derive_scores`): on disk for a store opened for writing (migrated, and kept beside it, when it
    was opened), in memory for one opened read-only. Whether there was anything to do. A run without a stored
    rubric has no scores to derive (its records are kept; it gets no rows). ``rederive``: derive them whatever
    the store holds (a store whose records were written one by one, as an older madrag wrote them)."""
    if not rederive and not store.scores_pending():
        return False
    rubric, names = _configured(store.get_meta("config"))
    scores = derive_scores(store, rubric, names) if rubric is not None else []
    store.put_scores([score_row(s, missing_cause(s)) for s in scores])
    return True
