"""The job a run directory recorded: ``madrag resume RUN`` continues a run with nothing but its folder, from the
configuration its store holds (read as the latest version, :mod:`madrag.store.run_config`), the inputs it keeps
(``inputs/``) and its prompt templates (``prompts/``, kept by runs made since it existed; an older run needs
``--prompts-dir``). The essays are the ones the run selected (its store's), so a resume makes exactly the calls the
run had left.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from madrag.data.essay import Essay
from madrag.errors import ConfigError, InputError
from madrag.pipeline.job import ScoreJob, default_cache_dir, stored_meta
from madrag.pipeline.migrations import identity, open_store, recorded_spec, stored_embedder
from madrag.protocols import available, get_protocol
from madrag.providers.spec import ProviderSpec
from madrag.retrieval.embedder import EMBEDDERS, EmbedderName
from madrag.retrieval.openai_embedder import EmbeddingEndpoint
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings


def recorded_job(run_dir: Path, cache_dir: Path | None = None, prompts_dir: Path | None = None) -> ScoreJob:
    """The ScoreJob that continues the run at ``run_dir`` as it was made; a one-line error when the folder holds
    no run, or one that cannot be continued from its folder alone (a provider object, a data file moved)."""
    meta = stored_meta(run_dir)
    if meta is None:
        raise InputError(f"no run to resume at {run_dir} (no run store with a configuration)")
    stored = meta["config"]
    config = identity(stored, where=f"run at {run_dir}")
    essays, pool, data = _sources(run_dir, stored)
    chosen = _chosen_ids(run_dir)
    return ScoreJob(
        data=data,
        max_rows=None,  # the run's data was held to its limit when the run was made
        essays=essays,
        pool=pool,
        rubric=_rubric(run_dir, config),
        run_dir=run_dir,
        eval_fold=config.get("eval_fold"),
        ids=chosen or None,
        protocols=[_protocol_name(d) for d in config.get("protocols") or []],
        protocol_preset=stored.get("protocol_preset"),
        provider=_provider(config.get("provider"), "provider"),
        role_providers={r: _provider(s, f"role provider {r}") for r, s in (config.get("role_providers") or {}).items()},
        settings=ScoringSettings.model_validate(
            {k: v for k, v in config["settings"].items() if k in ScoringSettings.model_fields}
        ),
        prompts_dir=prompts_dir,
        cache_dir=cache_dir or default_cache_dir(),
        embedder=_embedder(stored_embedder(stored, meta.get("bank"))),
        embedding=EmbeddingEndpoint.model_validate(stored.get("embedding") or {}),
    )


def _embedder(name: str) -> EmbedderName:
    chosen = next((e for e in EMBEDDERS if e == name), None)
    if chosen is None:
        raise ConfigError(f"the run's embedder {name!r} is not one this madrag has ({', '.join(EMBEDDERS)})")
    return chosen


def _sources(run_dir: Path, stored: dict[str, Any]) -> tuple[list[Essay] | None, list[Essay] | None, Path | None]:
    """(in-memory essays, in-memory pool, data file) as the run recorded them."""
    pool = _kept(run_dir, "pool.jsonl") if stored.get("pool") else None
    if stored.get("data_source") == "in-memory":
        return _kept(run_dir, "essays.jsonl"), pool, None
    data = Path(str(stored.get("data")))
    if not data.is_file():
        raise InputError(f"run at {run_dir} read its essays from {data}, which is not there any more")
    return None, pool, data


def _kept(run_dir: Path, name: str) -> list[Essay]:
    path = run_dir / "inputs" / name
    if not path.is_file():
        raise InputError(f"run at {run_dir} keeps no {path.relative_to(run_dir)}: it cannot be resumed from its folder")
    return [Essay.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _chosen_ids(run_dir: Path) -> list[str]:
    store = open_store(run_dir / "store.sqlite", read_only=True)
    try:
        return [e.id for e in store.essays()]
    finally:
        store.close()


def _rubric(run_dir: Path, config: dict[str, Any]) -> Path | Rubric:
    kept = run_dir / "inputs" / "rubric.json"
    return kept if kept.is_file() else Rubric.model_validate(config["rubric"])


def _protocol_name(described: dict[str, Any]) -> str:
    """The protocol name (with its options) whose description is ``described``."""
    name = str(described.get("name"))
    wanted = json.dumps(described, sort_keys=True)
    for candidate in [name, *(n for n in available() if n.startswith(f"{name}["))]:
        if json.dumps(get_protocol(candidate).describe(), sort_keys=True, default=str) == wanted:
            return candidate
    raise ConfigError(
        f"cannot tell which options protocol {name} had ({wanted}); run madrag score with the run's own options"
    )


def _provider(stored: Any, what: str) -> ProviderSpec:
    if not isinstance(stored, dict) or "instance" in stored:
        raise ConfigError(
            f"the run's {what} was a provider object given in Python; resume it with madrag.score and the same object"
        )
    return recorded_spec(stored)
