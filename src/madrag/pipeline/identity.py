"""A run's identity: the configuration a run records of its job (:func:`job_config`), what a resumed run must
match (:func:`run_identity`), and the stored configuration read back (:func:`stored_meta`, :func:`resumed_job`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from madrag.agents.prompts import (
    CONSENSUS_PROMPT_NAMES,
    PROMPT_NAMES,
    SOURCE_PROMPT_NAMES,
    TRAINING_FREE_PROMPT_NAMES,
    PromptLibrary,
)
from madrag.errors import RESUMABLE_SETTINGS
from madrag.pipeline.inputs import source_config
from madrag.pipeline.migrations import CONFIG_VERSION, identity, open_store, stored_embedder
from madrag.pipeline.run_log import session_note
from madrag.pipeline.score_job import ScoreJob
from madrag.protocols.base import ScoringProtocol
from madrag.providers.base import Provider
from madrag.providers.spec import spec_identity
from madrag.rubric import Rubric
from madrag.settings import stored_settings
from madrag.store import RunStore
from madrag.store.run_config import VERSION_KEY, prompt_identity

PACKAGED_ORDER = (*PROMPT_NAMES, *CONSENSUS_PROMPT_NAMES, *TRAINING_FREE_PROMPT_NAMES)
"""The order a run records packaged templates in (its prompt hash reads them in this order)."""


def prompt_names(protocols: list[ScoringProtocol], with_source: bool = False) -> list[str]:
    """The templates a run's protocols use: the MADRAG paper's always (as runs made before the consensus paper
    recorded them),
    plus each protocol's own (:attr:`~madrag.protocols.base.ProtocolNeeds.templates`: packaged ones in
    :data:`PACKAGED_ORDER`, others in the protocols' order), plus the source block when the essays carry a
    source text (``with_source``)."""
    wanted = dict.fromkeys(name for p in protocols for name in p.needs.templates)
    names = [*PROMPT_NAMES, *(n for n in PACKAGED_ORDER if n in wanted and n not in PROMPT_NAMES)]
    names += [n for n in wanted if n not in names]
    return [*names, *SOURCE_PROMPT_NAMES] if with_source else names


def job_config(
    job: ScoreJob,
    rubric: Rubric,
    protocols: list[ScoringProtocol],
    prompts: PromptLibrary,
    backend: Provider | None = None,
    with_source: bool = False,
) -> dict[str, Any]:
    """What a resumed run must match: everything but the choice of essays. With a ready ``backend`` instance
    the provider is recorded by its own description instead of ``job.provider``; ``with_source``: whether the
    essays carry a source text (whose template is then recorded)."""
    names = prompt_names(protocols, with_source)
    return {
        VERSION_KEY: CONFIG_VERSION,
        **source_config(job),
        "rubric": rubric.model_dump(mode="json"),
        "eval_fold": job.eval_fold,
        "protocols": [p.describe() for p in protocols],
        **({"protocol_preset": job.protocol_preset} if job.protocol_preset is not None else {}),
        "provider": spec_identity(job.provider) if backend is None else {"instance": backend.describe()},
        "role_providers": {r: spec_identity(s) for r, s in job.role_providers.items()},
        "settings": job.settings.model_dump(mode="json"),
        "embedder": job.embedder,
        **({"embedding": endpoint.model_dump(mode="json")} if (endpoint := job.embedding_endpoint()) else {}),
        **prompt_identity(names, [prompts.text(n) for n in names], [prompts.source(n) for n in names]),
    }


def run_identity(job: ScoreJob) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """What of a stored configuration must match the job's for its run to resume (older configurations read as
    the latest version, with the job's settings class: :func:`madrag.pipeline.migrations.identity`), less the settings a
    resumed run may change (:data:`~madrag.errors.RESUMABLE_SETTINGS`, the token limits)."""
    read = functools.partial(identity, settings_model=type(job.settings), where=f"run at {job.run_dir}")
    return lambda config: _without_limits(read(config))


def _without_limits(config: dict[str, Any]) -> dict[str, Any]:
    settings = {k: v for k, v in (config.get("settings") or {}).items() if k not in RESUMABLE_SETTINGS}
    return {**config, "settings": settings}


def resumed_limits(store: RunStore, config: dict[str, Any], resumed: bool = True) -> str | None:
    """On a resumed run, the token limits this session changes (``judge_max_tokens 1024 -> 2048``), now the run's
    configuration's (a later ``madrag resume`` uses them; each record keeps the limit it was made with) and said
    in this session's run.log; None when none changes."""
    stored = store.get_meta("config")
    if not resumed or not isinstance(stored, dict):
        return None
    before, now = stored_settings(stored.get("settings") or {}), config.get("settings") or {}
    changed = {k: (before.get(k), now.get(k)) for k in RESUMABLE_SETTINGS if before.get(k) != now.get(k)}
    if not changed or store.read_only:
        return None
    store.set_meta("config", {**stored, "settings": {**before, **{k: new for k, (_, new) in changed.items()}}})
    said = ", ".join(f"{k} {old} -> {new}" for k, (old, new) in changed.items())
    session_note(f"token limits changed this session: {said} (each record keeps its own)")
    return said


def resumed_job(job: ScoreJob, meta: dict[str, Any] | None) -> ScoreJob:
    """The job with the embedder its stored run was made with (``meta``: the run's stored ``config`` and ``bank``,
    :func:`stored_meta`; None for a new run): a run made before the paper's embedder became the default
    (``minilm`` then meant the windows embedder) resumes with ``minilm-windows``, so with the same exemplars
    (:func:`madrag.pipeline.migrations.stored_embedder`). A new run, or another embedder asked for, is unchanged
    (another one is then refused by the stored config's check)."""
    if meta is None or job.embedder != "minilm":
        return job
    if stored_embedder(meta["config"], meta.get("bank")) != "minilm-windows":
        return job
    return job.model_copy(update={"embedder": "minilm-windows"})


def has_store(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run store that was written (an empty file is a store never written)."""
    path = run_dir / "store.sqlite"
    return path.is_file() and path.stat().st_size > 0


def store_meta(store: RunStore) -> dict[str, Any] | None:
    """An open store's ``config`` and ``bank``, or None when it holds no configured run yet."""
    config = store.get_meta("config")
    return None if config is None else {"config": config, "bank": store.get_meta("bank")}


def stored_meta(run_dir: Path) -> dict[str, Any] | None:
    """A run directory's stored ``config`` and ``bank`` (read-only, nothing written), or None when it holds no
    configured run yet."""
    if not has_store(run_dir):
        return None
    store = open_store(run_dir / "store.sqlite", read_only=True)
    try:
        return store_meta(store)
    finally:
        store.close()


def unstarted(store: RunStore, config: dict[str, Any]) -> RunStore:
    """``store``, its configuration replaced by ``config`` when it holds no record yet (a run refused before its
    first answer, or stopped by its first call: nothing of it has a meaning to keep, so the option a refusal
    suggests works on the same run folder)."""
    if store.get_meta("config") is not None and store.count() == 0:
        store.set_meta("config", config)
    return store
