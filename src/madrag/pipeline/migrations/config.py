"""A run's stored configuration as an earlier madrag wrote it, brought to today's.

One stored before ``config_version`` is version 1; it is brought to :data:`CONFIG_VERSION` by :data:`UPGRADES`
(``UPGRADES[i]`` takes version ``i + 1`` to ``i + 2``; append, never edit one that has shipped), each filling in
what its version added with the value that reproduces what older runs did, before it is compared with a job's
(:func:`identity`); a configuration newer than this code is refused. A recorded backend identity in an older
shape is read as today's (:func:`upgrade_identity`; the backend it describes: :func:`recorded_spec`, an option
added since with the value of the runs before it: :data:`ADDED_LATER`), and the embedder a run recorded, in any
release's words (:func:`stored_embedder`). A backend option madrag no longer has is set aside wherever stored
options are read (:data:`RETIRED_OPTIONS`), and the web app's description of a run (its ``run.json``) and of a
draft (``draft.json``) are read in today's shape (:func:`upgrade_run_description`, :func:`upgrade_draft`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from madrag.data.refusals import Refusals
from madrag.errors import ConfigError
from madrag.metrics import PAPER_TIES
from madrag.providers.backends import Backend, backends, find_backend, traits_of
from madrag.providers.spec import ProviderSpec
from madrag.retrieval.embedder import MiniLMEmbedder
from madrag.settings import ScoringSettings, stored_settings
from madrag.store.run_config import PROVENANCE, VERSION_KEY, Config

__all__ = [
    "ADDED_LATER",
    "CONFIG_VERSION",
    "RETIRED_OPTIONS",
    "UPGRADES",
    "identity",
    "recorded_spec",
    "stored_embedder",
    "upgrade",
    "upgrade_draft",
    "upgrade_identity",
    "upgrade_options",
    "upgrade_run_description",
]

Upgrade = Callable[[Config], Config]

RETIRED_OPTIONS: Mapping[str, frozenset[str]] = {"openai": frozenset({"client"})}
"""Per backend kind, the options it no longer has that runs recorded: set aside when they are read. ``client``
(the openai backend's HTTP client, aiohttp, httpx or the openai package's, until madrag kept one client) changed
only how calls were sent: an operational option, never the run's identity."""


def upgrade_options(kind: object, options: Mapping[str, Any]) -> dict[str, Any]:
    """A backend's stored ``options`` (or flat fields) without those its ``kind`` retired (:data:`RETIRED_OPTIONS`)."""
    retired = RETIRED_OPTIONS.get(kind, frozenset()) if isinstance(kind, str) else frozenset()
    return {k: v for k, v in options.items() if k not in retired}


WEB_TOKEN_LIMIT = 400
"""The web app's token limit (its backend's ``max_tokens``) when a run recorded none, before it took settings."""


def upgrade_run_description(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A web run's ``run.json`` (as JSON) in the shape the server reads today: a run recorded before its backend
    recorded ``logprobs`` ran with them (a kind the web app tests, an OpenAI-compatible server: True); its
    backend's options without the retired ones; a run recorded before the web app took settings ran with its
    backend's ``max_tokens`` (:data:`WEB_TOKEN_LIMIT` when it recorded none) as both token limits and the
    library's defaults for the rest; its refused rows, all listed before they were summarised, summarised."""
    out = _summarised(stored)
    backend = out.get("backend")
    if out.get("settings") is None:
        tokens = backend.get("max_tokens", WEB_TOKEN_LIMIT) if isinstance(backend, dict) else WEB_TOKEN_LIMIT
        limits = {} if tokens is None else {"debater_max_tokens": tokens, "judge_max_tokens": tokens}
        out["settings"] = ScoringSettings.model_validate(limits).model_dump(mode="json")
    if isinstance(backend, dict):
        backend = dict(backend)
        traits = traits_of(backend.get("kind"))
        if "logprobs" not in backend and traits is not None and traits.connection_test:
            backend["logprobs"] = True
        if isinstance(backend.get("options"), dict):
            backend["options"] = upgrade_options(backend.get("kind"), backend["options"])
        out["backend"] = backend
    return out


def upgrade_draft(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A web draft's ``draft.json`` (as JSON) in the shape the server reads today: its refused rows, all listed
    before they were summarised, summarised (:func:`_summarised`)."""
    return _summarised(stored)


def _summarised(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A web draft's or run's description written before the refused rows were summarised (every refused row
    listed, no count) with its count, its reasons and the first rows (:class:`~madrag.data.refusals.Refusals`)."""
    if "n_refused" in stored or not stored.get("refused"):
        return dict(stored)
    summary = Refusals()
    for row in stored["refused"]:
        summary.add(str(row.get("where", "")), str(row.get("reason", "")))
    return {**stored, **summary.fields()}


ADDED_LATER: Mapping[str, Any] = {"token_param": "auto", "sampling_params": "auto", "runtime": "llama-cpp-python"}
"""Backend options added after runs were recorded, with the value every run recorded before them had (the
runtime: llama-cpp-python, the only one then; no longer the default). An identity recorded without one (made
before it existed, or by a release that left it out at that value: configuration version 3) is read with it,
whatever its configuration's version: such a run resumes with that value, and only with it. A backend option
added later goes here."""


def upgrade_identity(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded identity in the shape of this release's: a record made before the options models held every
    kind's fields (``model_path``, ``base_url``, ``api_key_env``, ``logprobs``, ``n_ctx`` for a fake backend too),
    which only the kind's own were ever read from; they are left out, as are the options it retired
    (:data:`RETIRED_OPTIONS`); an option its kind added later that it left out is read with the value of the
    runs before it (:data:`ADDED_LATER`). A record of an unknown kind is kept."""
    return _added_later(_own_fields(stored))


def recorded_spec(stored: Mapping[str, Any]) -> ProviderSpec:
    """The backend a recorded identity (in any release's shape) describes: the one that answered its run."""
    return ProviderSpec.model_validate(upgrade_identity(stored))


def _kind(stored: Mapping[str, Any]) -> Backend[Any] | None:
    kind = stored.get("kind")
    try:
        return find_backend(kind) if isinstance(kind, str) else None
    except ConfigError:
        return None


def _own_fields(stored: Mapping[str, Any]) -> dict[str, Any]:
    """``stored`` without the fields of other kinds and the options its kind retired (configuration version 3)."""
    backend = _kind(stored)
    if backend is None:
        return dict(stored)
    known = {*ProviderSpec.model_fields, *(f for b in backends() for f in b.option_fields())}
    keep = {*ProviderSpec.model_fields, *backend.option_fields()}
    return upgrade_options(stored.get("kind"), {k: v for k, v in stored.items() if k in keep or k not in known})


def _added_later(stored: Mapping[str, Any]) -> dict[str, Any]:
    """``stored`` with each option of its kind in :data:`ADDED_LATER` that it left out."""
    backend = _kind(stored)
    if backend is None:
        return dict(stored)
    own = backend.option_fields()
    return {**{k: v for k, v in ADDED_LATER.items() if k in own}, **stored}


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
    records the kind's own."""
    return {**_backends(config, _own_fields), VERSION_KEY: 3}


def _v3_to_v4(config: Config) -> Config:
    """Version 3 -> 4. Version 3 left a backend option out of its identity at the value of the runs recorded
    before the option existed (:data:`ADDED_LATER`); version 4 records every option."""
    return {**_backends(config, _added_later), VERSION_KEY: 4}


def _backends(config: Config, step: Callable[[Mapping[str, Any]], dict[str, Any]]) -> Config:
    """``config`` with ``step`` applied to its recorded backend and role backends (a ready instance: as recorded)."""
    out = dict(config)
    provider = out.get("provider")
    if isinstance(provider, dict) and "kind" in provider:
        out["provider"] = step(provider)
    roles = out.get("role_providers")
    if isinstance(roles, dict):
        out["role_providers"] = {r: step(s) if isinstance(s, dict) else s for r, s in roles.items()}
    return out


UPGRADES: Sequence[Upgrade] = (_v1_to_v2, _v2_to_v3, _v3_to_v4)
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
    """What two configurations must share for a run to resume: ``config`` upgraded, its settings and backends
    completed (:func:`~madrag.settings.stored_settings`, :data:`ADDED_LATER`), without provenance, as JSON."""
    current = _backends(upgrade(json.loads(json.dumps(config, sort_keys=True, default=str)), where), _added_later)
    current["settings"] = stored_settings(current.get("settings") or {}, settings_model)
    return {k: v for k, v in current.items() if k not in PROVENANCE}


def stored_embedder(config: Mapping[str, Any], bank: Mapping[str, Any] | None = None) -> str:
    """The ``--embedder`` a stored run was made with, from its stored config and bank info (``bank``: what the
    store records about the bank, with the embedder's full ``name``).

    Runs made before the paper's embedder became the default recorded the windows embedder as ``minilm``, or,
    being the default, recorded no embedder at all: both mean ``minilm-windows``. The bank's full embedder name
    decides when it is known (a windows name has ``window=``); otherwise a config without an embedder is such a
    run (runs made since always record theirs).
    """
    kind = config.get("embedder")
    name = str((bank or {}).get("embedder") or "")
    if kind in (None, "minilm") and "window=" in name:
        return "minilm-windows"
    if kind is None:
        return "minilm" if name == MiniLMEmbedder().name else "minilm-windows"
    return str(kind)
