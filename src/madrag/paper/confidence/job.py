"""A meta-evaluation job (the confidence paper, 3.4): judge every Advocate / Skeptic response of a finished debate run.

The judgments go to their own run store (default ``<run-dir>/meta/store.sqlite``), bound to the evaluator's
settings: re-running the same job resumes it (finished judgments are never asked again), while a job with another
evaluator, method or prompt refuses to mix its judgments into that store. The debate run itself is only read.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from madrag.agents.calls import CallContext
from madrag.agents.prompts import PromptLibrary
from madrag.errors import ConfigError, InputError
from madrag.evaluation.run import open_store
from madrag.paper.confidence.meta_eval import (
    MetaMethod,
    MetaSummary,
    latest_judgments,
    meta_messages,
    resolve_method,
    run_meta_evaluation,
)
from madrag.pipeline import migrations
from madrag.pipeline.context_fit import needs
from madrag.pipeline.migrations import upgrade_identity
from madrag.pipeline.run_log import job_settings, log_backends, run_log, settings_line
from madrag.pipeline.runner import provider_slots
from madrag.pipeline.worst_case import Limit, WorstPrompt
from madrag.providers.policy import ManagedProvider
from madrag.providers.server_props import CHARS_PER_TOKEN, ServerCheck, fit_to_server
from madrag.providers.spec import ProviderSpec, managed, spec_identity
from madrag.records import AgentRecord
from madrag.settings import ScoringSettings
from madrag.store import RunStore

DEBATER_ROLES = ("advocate", "skeptic")
META_PROMPTS = ["meta_system", "meta_user"]


class MetaJob(BaseModel):
    """What ``madrag paper confidence meta-eval`` runs."""

    model_config = ConfigDict(frozen=True)

    run_dir: Path
    out_dir: Path | None = None  # default: <run_dir>/meta
    roles: list[str] = Field(default_factory=lambda: list(DEBATER_ROLES))
    limit: int | None = Field(default=None, ge=1)
    provider: ProviderSpec = ProviderSpec()
    method: MetaMethod = "auto"
    max_tokens: int = Field(default=400, ge=1)
    seed: int | None = 1234
    concurrency: int | None = Field(default=None, ge=1)
    prompts_dir: Path | None = None
    cache_dir: Path | None = None  # response cache folder; None: no response cache

    @property
    def meta_dir(self) -> Path:
        """Where the judgments' store goes: ``out_dir``, else ``<run_dir>/meta``."""
        return self.out_dir or self.run_dir / "meta"


@dataclass
class MetaJobResult:
    """What a meta-evaluation job did: its run id, whether it resumed, the records selected, the summary of
    judgments made / reused / failed, the time it took and where its store is."""

    run_id: str
    resumed: bool
    selected: int
    summary: MetaSummary
    elapsed_s: float
    meta_dir: Path


def debater_records(run_dir: Path, roles: list[str], limit: int | None = None) -> list[AgentRecord]:
    """The run's debater records of ``roles`` in a stable order (essay, trait, protocol, role, round); with
    ``limit``, those of the first ``limit`` essays."""
    unknown = sorted(set(roles) - set(DEBATER_ROLES))
    if unknown or not roles:
        raise InputError(f"--roles must name advocate and/or skeptic; got {', '.join(roles) or 'nothing'}")
    with closing(open_store(run_dir)) as store:
        found = [r for role in roles for r in store.records(role=role) if r.error is None]
    if not found:
        raise InputError(f"run at {run_dir} has no {' or '.join(roles)} records to evaluate")
    found.sort(key=lambda r: (r.essay_id, r.trait, r.protocol, r.round, DEBATER_ROLES.index(r.role), r.index))
    if limit is not None:
        keep = list(dict.fromkeys(r.essay_id for r in found))[:limit]
        found = [r for r in found if r.essay_id in set(keep)]
    return found


def meta_identity(config: dict[str, Any]) -> dict[str, Any]:
    """What of a meta-evaluation's configuration must match, as JSON: one recorded before the backends' options
    models (its backend flat, with every kind's fields) is read in this release's shape."""
    current = json.loads(json.dumps(config, sort_keys=True, default=str))
    # the token limit may change: a larger one makes the judgments cut off at the smaller one again
    current.pop("max_tokens", None)
    provider = current.get("provider")
    return {**current, "provider": upgrade_identity(provider) if isinstance(provider, dict) else provider}


def meta_config(job: MetaJob, source_run_id: str | None, prompts: PromptLibrary) -> dict[str, Any]:
    """What a resumed meta-evaluation must match."""
    texts = "\x00".join(prompts.text(n) for n in META_PROMPTS)
    return {
        "source_run": str(job.run_dir.resolve()),
        "source_run_id": source_run_id,
        "provider": spec_identity(job.provider),
        "method": job.method,
        "max_tokens": job.max_tokens,
        "seed": job.seed,
        "prompts": prompts.names_used(META_PROMPTS),
        "prompt_texts_sha256": hashlib.sha256(texts.encode()).hexdigest()[:16],
    }


async def execute_meta(
    job: MetaJob,
    on_record: Callable[[AgentRecord], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> MetaJobResult:
    """Judge the selected debater records into the meta store (resuming what is there). The backend is checked
    (reachable, able to do the method) and its server read (its slots and context, as ``madrag score`` reads
    them: :func:`~madrag.providers.server_props.fit_to_server`) before anything is written: a refused check
    leaves no meta folder. Each session is logged in ``run.log`` in the meta folder, as a scoring run's is."""
    started = time.monotonic()
    prompts = PromptLibrary(job.prompts_dir)
    with closing(open_store(job.run_dir)) as source:
        source_run_id = source.get_meta("run_id")
    records = debater_records(job.run_dir, job.roles, job.limit)
    provider = managed(job.provider, job.cache_dir / "responses.sqlite" if job.cache_dir else None)
    try:
        resolve_method(provider, job.method)  # a backend that cannot do the method, before anything is written
        await provider.provider.check_reachable()  # an unreachable server stops the job before any call
        server = await fit_to_server(provider)  # no more judgments in flight than the server has slots
        await _check_context(provider, server, prompts, records, job.max_tokens)
        job.meta_dir.mkdir(parents=True, exist_ok=True)
        with closing(migrations.open_store(job.meta_dir / "store.sqlite")) as store:
            resumed, run_id = _bind(store, meta_config(job, source_run_id, prompts))
            # this session's log, once nothing refuses it (a refused command is no session)
            with run_log(job.meta_dir, _log_line(job, len(records))):
                found = {"backend": f"{provider.provider.name} ({provider.provider.model})"}
                log_backends({"*": found | _server_found(server)}, store)
                summary = await _judge_all(job, records, prompts, provider, store, run_id, on_record, on_start)
    finally:
        await provider.aclose()
    return MetaJobResult(run_id, resumed, len(records), summary, time.monotonic() - started, job.meta_dir)


async def _check_context(
    provider: ManagedProvider, server: ServerCheck, prompts: PromptLibrary, records: list[AgentRecord], tokens: int
) -> None:
    """ConfigError, before anything is written, when the longest judgment's prompt (the evaluator's whole
    request: its templates, the agent's prompt and answer) and ``tokens`` of answer cannot fit one slot of the
    server's context, counted as ``madrag score`` counts its prompts (:func:`madrag.pipeline.context_fit.needs`)."""
    if server.props is None or server.props.n_ctx is None or not records:
        return
    longest = max(records, key=lambda r: len(r.text) + sum(len(m.content) for m in r.messages))
    messages = meta_messages(prompts, longest)
    text = "\n".join(m.content for m in messages)
    prompt = WorstPrompt(
        "the meta-evaluator", "judgment", "*", longest.essay_id, "*", text, len(messages), (), Limit(None, tokens)
    )
    (need,) = await needs(provider.provider, [prompt])
    if need.total <= server.props.n_ctx:
        return
    how = "counted by the server's /tokenize" if need.counted else f"estimated at {CHARS_PER_TOKEN} characters a token"
    raise ConfigError(
        f"{provider.provider.name} ({provider.provider.model}): the meta-evaluator's prompt for {longest.key} needs "
        f"{need.tokens} prompt tokens ({how}, with the chat template) + {tokens} answer tokens = {need.total}, more "
        f"than {server.props.context_words()}, or give a smaller --max-tokens"
    )


def _server_found(server: ServerCheck) -> dict[str, Any]:
    """What the start-up check found of the server, as a scoring run's preflight record keeps it."""
    said = {} if server.props is None else {"server": server.props.as_dict()}
    return {"concurrency": server.fit.as_dict(), **said}


def _log_line(job: MetaJob, n_records: int) -> str:
    """The session's start line: the records judged and the evaluator's settings (:func:`settings_line`)."""
    settings = MetaSettings(method=job.method, max_tokens=job.max_tokens, seed=job.seed, roles=job.roles)
    return settings_line(job.provider, ["meta-evaluation"], settings, n_records, job=job_settings(job), items="records")


class MetaSettings(BaseModel):
    """The meta-evaluator's settings as its run.log names them (those not at their default)."""

    method: MetaMethod = "auto"
    max_tokens: int = 400
    seed: int | None = 1234
    roles: list[str] = Field(default_factory=lambda: list(DEBATER_ROLES))


async def _judge_all(
    job: MetaJob,
    records: list[AgentRecord],
    prompts: PromptLibrary,
    provider: ManagedProvider,
    store: RunStore,
    run_id: str,
    on_record: Callable[[AgentRecord], None] | None,
    on_start: Callable[[int], None] | None,
) -> MetaSummary:
    """Judge ``records`` into ``store``, as many in flight as the backend serves at once (its slots, or the
    concurrency given)."""
    store.set_meta("provider", provider.provider.describe())
    ctx = CallContext(
        run_id=run_id,
        provider=provider,
        store=store,
        prompts=prompts,
        settings=ScoringSettings(seed=job.seed),
        on_record=on_record,
    )
    if on_start is not None:
        on_start(len(records))
    in_flight = job.concurrency or provider_slots(ctx)
    return await run_meta_evaluation(ctx, records, method=job.method, max_tokens=job.max_tokens, concurrency=in_flight)


def _bind(store: RunStore, config: dict[str, Any]) -> tuple[bool, str]:
    """(whether the meta store resumes, its run id): its configuration bound or checked; a store made with other
    settings is refused naming ``--out``, the option that picks another folder."""
    resumed = store.bind_config(config, meta_identity, new_run="give another --out to start a new meta-evaluation")
    run_id = store.get_meta("run_id") or uuid.uuid4().hex[:12]
    store.set_meta("run_id", run_id)
    return resumed, run_id


def meta_records(meta_dir: Path) -> list[AgentRecord]:
    """The judgment records in force in a meta store (a judgment made again at a larger token limit replaces the
    one cut off: :func:`~madrag.paper.confidence.meta_eval.latest_judgments`)."""
    with closing(open_store(meta_dir)) as store:
        return latest_judgments(store.records())
