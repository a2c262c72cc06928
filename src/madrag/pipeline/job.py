"""A scoring job from settings to stored records: data, split, bank, provider, store, protocols.

``ScoreJob`` is what ``madrag score`` builds from its options and what :func:`madrag.score` builds from its
arguments; :func:`execute` runs it. Re-running the same job on the same run directory resumes it.

A call that gets no answer after its retries is recorded as failed and the run goes on without its essay-trait
(``JobResult.stats.failed_calls`` counts them; a resume retries them); ``max_failures`` stops the run, with
:class:`~madrag.errors.TooManyFailures`, once that many calls have failed (the calls in flight finish first).

Essays come from a data file (``data``, the CLI) or from memory (``essays``, the Python API), held by the job
itself; how a run records and keeps each (a fingerprint, ``inputs/essays.jsonl``) is :mod:`madrag.pipeline.inputs`'s.
The exemplar pool is the other folds of the data (the fold split), or an explicit in-memory ``pool``.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from madrag.agents.calls import CallContext, CallStats, FailureBudget
from madrag.agents.prompts import PromptLibrary
from madrag.data.essay import Essay
from madrag.data.splits import EACH, fold_pools
from madrag.errors import ConfigError, InputError
from madrag.pipeline.final_scores import keep_over_run
from madrag.pipeline.hooks import NO_HOOKS, RunHooks
from madrag.pipeline.identity import (
    has_store,
    job_config,
    prompt_names,
    resumed_job,
    resumed_limits,
    run_identity,
    store_meta,
    stored_meta,
    unstarted,
)
from madrag.pipeline.inputs import (
    check_pool,
    check_references,
    essays_fingerprint,
    essays_jsonl,
    fingerprint_file,
    job_rubric,
    record_inputs,
    select_essays,
)
from madrag.pipeline.migrations import open_store
from madrag.pipeline.preflight import Rehearsal, check_backends, preflight, record_checks
from madrag.pipeline.resume import stored_scores
from madrag.pipeline.run_dir import (
    check_folders,
    keep_prompts,
    on_disk_errors,
    prompt_names_of,
    recorded_prompts,
)
from madrag.pipeline.run_log import job_settings, log_backends, run_log, settings_line
from madrag.pipeline.runner import run_scoring
from madrag.pipeline.score_job import JobResult, ScoreJob, ScoringRun
from madrag.pipeline.unusable import ModelsNamed, Unusable, store_accounts, unusable_by_protocol
from madrag.pipeline.worst_case import rehearsal
from madrag.protocols import get_protocol
from madrag.protocols.base import ScoringProtocol, TraitScore, record_groups
from madrag.providers.base import Provider
from madrag.providers.cache import ResponseCache, default_cache_dir
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.providers.spec import ProviderSpec, managed
from madrag.retrieval.choice import check_embedder
from madrag.rubric import Rubric
from madrag.store import RunStore
from madrag.store.writer_lock import WriterLock

if TYPE_CHECKING:
    from madrag.retrieval.bank import ExemplarBank
    from madrag.retrieval.embedder import Embedder
    from madrag.retrieval.folds import FoldBanks

    Bank = ExemplarBank | FoldBanks
    """A job's exemplar bank: one bank, or one per fold (``--fold each``)."""

__all__ = [  # the job's names, wherever they live (imported from here by the CLI, the API, the server)
    "JobResult",
    "ScoreJob",
    "ScoringRun",
    "build_bank",
    "check_pool",
    "check_references",
    "default_cache_dir",
    "essays_fingerprint",
    "essays_jsonl",
    "execute",
    "fingerprint_file",
    "job_config",
    "job_rubric",
    "prompt_names",
    "record_inputs",
    "resumed_job",
    "run_identity",
    "select_essays",
    "stored_meta",
]


def build_bank(
    job: ScoreJob,
    pool: list[Essay],
    rubric: Rubric,
    embedder: Embedder | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> Bank:
    """The exemplar bank of ``pool`` with ``embedder`` (default: the job's, through the cache folder's vector store,
    so each text is embedded once, ever), built (``on_progress(done, total)``) or reused from the job's cache
    directory; under ``--fold each`` one bank per fold from the other folds (``FoldBanks``)."""
    from madrag.retrieval import ExemplarBank, make_embedder
    from madrag.retrieval.folds import FoldBanks
    from madrag.retrieval.vectors import VECTORS_FILE, CachingEmbedder

    made = make_embedder(job.embedder, job.embedding_endpoint())
    chosen = embedder or CachingEmbedder(made, job.cache_dir / VECTORS_FILE)
    ties = job.settings.reference_ties  # the exemplars' labels round a tie by the run's rule
    if job.eval_fold == EACH:
        return FoldBanks.build_or_load(fold_pools(pool), rubric, chosen, job.cache_dir / "banks", on_progress, ties)
    return ExemplarBank.build_or_load(pool, rubric, chosen, job.cache_dir / "banks", on_progress=on_progress, ties=ties)


def _backend(spec: ProviderSpec, cache: Path | None, instance: Provider | None) -> ManagedProvider:
    """The managed backend: ``instance`` (a ready provider) under the spec's retry policy, or built from ``spec``."""
    if instance is None:
        return managed(spec, cache)
    return ManagedProvider(
        provider=instance,
        policy=RetryPolicy(retries=spec.retries, timeout_s=spec.timeout_s),
        cache=ResponseCache(cache) if cache is not None else None,
        concurrency=spec.concurrency,
    )


@dataclass
class _Prepared:
    """A run checked before anything is written (rubric, protocols, prompts, essays, pool and the configuration
    to bind), then opened for scoring: its store and identity."""

    rubric: Rubric
    protocols: list[ScoringProtocol]
    prompts: PromptLibrary
    essays: list[Essay]
    pool: list[Essay]
    config: dict[str, Any]
    store: RunStore = field(init=False)
    run_id: str = ""
    resumed: bool = False


def _plan(job: ScoreJob, backend: Provider | None, stage: Callable[[str], None]) -> _Prepared:
    """Load rubric, protocols, prompts and essays and check them, writing nothing (a refused command leaves no
    half-made run behind)."""
    rubric = job_rubric(job)
    if not job.protocols:
        raise InputError("no protocol given: name at least one (e.g. MADRAG)")
    protocols = [get_protocol(name) for name in job.protocols]
    prompts = PromptLibrary(job.prompts_dir)
    essays, pool = select_essays(job, rubric)
    check_pool(protocols, pool)
    check_references(rubric, essays, pool, protocols, stage)
    for protocol in protocols:  # what a protocol cannot score (MTS[template=FILE]: its file, rows, prompts)
        if protocol.needs.check is not None:
            protocol.needs.check(rubric, essays)
    with_source = any(e.source for e in essays)
    config = job_config(job, rubric, protocols, prompts, backend, with_source)
    return _Prepared(rubric, protocols, prompts, essays, pool, config)


def _open_run(job: ScoreJob, store: RunStore, run: _Prepared) -> _Prepared:
    """Bind (or check) the run's configuration in its store, record the inputs and the prompt templates."""
    run.store = unstarted(store, run.config)  # a run with no record yet takes the settings it is given now
    run.resumed = store.bind_config(run.config, run_identity(job), prompts_may_differ=True)
    run.run_id = store.get_meta("run_id") or uuid.uuid4().hex[:12]
    if store.prompt_drift is not None:  # nothing written: its finished scores are read, or the job is refused
        return run
    record_inputs(job)
    keep_prompts(job.run_dir, run.prompts, prompt_names_of(run.config))
    store.set_meta("run_id", run.run_id)
    store.add_essays(run.essays)
    return run


def _prepare_bank(
    job: ScoreJob,
    run: _Prepared,
    stage: Callable[[str], None],
    embedder: Embedder | None,
    on_progress: Callable[[int, int], None] | None,
) -> tuple[Bank | None, dict[str, Any]]:
    """The exemplar bank when a protocol retrieves (else None), and what the store records about it (fingerprint,
    size, embedder)."""
    from madrag.retrieval.bank import ExemplarBank

    if not any(p.needs.bank for p in run.protocols):
        return None, {}
    stage(f"exemplar bank: {len(run.pool)} pool essays ({embedder.name if embedder else job.embedder} embedder)")
    bank = build_bank(job, run.pool, run.rubric, embedder, on_progress)
    if isinstance(bank, ExemplarBank):
        info = {"fingerprint": bank.fingerprint, "size": bank.size, "built_now": bank.built_now}
    else:
        info = bank.info()  # per fold: fingerprint, size, built now
    info["embedder"] = bank.embedder.name
    if job.settings.judge_exemplars == "anchors":  # chosen once from the pool: which essays every Judge is shown
        info["anchors"] = bank.anchor_ids()
    run.store.set_meta("bank", info)
    return bank, info


@dataclass(frozen=True)
class _Backends:
    """A run's backends, built (nothing called yet): the main one and the per-role ones; ``given``: the main one
    wraps the caller's ready provider, which the caller closes."""

    main: ManagedProvider
    roles: dict[str, ManagedProvider]
    given: bool = False

    def owned(self) -> list[ManagedProvider]:
        """The backends the run closes: every one but the caller's."""
        return [*(() if self.given else (self.main,)), *self.roles.values()]


def _backends(job: ScoreJob, backend: Provider | None) -> _Backends:
    """The main backend and the per-role ones (built, nothing called yet), with the response cache of the cache
    directory."""
    cache = job.cache_dir / "responses.sqlite" if job.response_cache else None
    with on_disk_errors(f"cache directory {job.cache_dir}"):
        provider = _backend(job.provider, cache, backend)
        role_providers = {role: managed(spec, cache) for role, spec in job.role_providers.items()}
    return _Backends(provider, role_providers, given=backend is not None)


def _open_store(job: ScoreJob, held: contextlib.ExitStack) -> RunStore:
    """The run's store, open for writing under the run directory's writer lock, a disk's refusal one line; the
    store, the error mapping and the lock are held until ``held`` closes."""
    held.enter_context(WriterLock(job.run_dir))
    held.enter_context(on_disk_errors(f"run directory {job.run_dir} (or cache directory {job.cache_dir})"))
    store = open_store(job.run_dir / "store.sqlite")
    held.callback(store.close)
    return store


def _as_recorded(job: ScoreJob, meta: dict[str, Any] | None) -> ScoreJob:
    """The job as its stored run was made (``meta``: :func:`store_meta`, None for a new run): its embedder
    (:func:`resumed_job`) and the run's own prompt templates when it keeps them (for workers too)."""
    job = resumed_job(job, meta)
    if job.prompts_dir is None and (kept := recorded_prompts(job.run_dir)) is not None:
        job = job.model_copy(update={"prompts_dir": kept})
    return job


async def _finished(job: ScoreJob, run: _Prepared, hooks: RunHooks) -> tuple[list[TraitScore], CallStats] | None:
    """The scores of a resumed job that has nothing left to do (``hooks.on_essay_done`` called per essay), read
    without building its bank or backend; None when it has work left (:mod:`madrag.pipeline.resume`)."""
    done = stored_scores(run.store, run.essays, run.rubric, run.protocols, job.settings)
    if done is not None:
        for essay in run.essays:
            hooks.on_essay_done(essay, [s for s in done[0] if s.essay_id == essay.id])
    return done


def job_line(job: ScoreJob, n_essays: int, backend: Provider | None) -> str:
    """The job's settings in one line of its run.log (:func:`~madrag.pipeline.run_log.settings_line`)."""
    extra = job_settings(job)
    return settings_line(job.provider, job.protocols, job.settings, n_essays, job.max_failures, backend, extra)


async def execute(
    job: ScoreJob,
    hooks: RunHooks | None = None,
    *,
    backend: Provider | None = None,
    embedder: Embedder | None = None,
) -> JobResult:
    """Run the job, telling ``hooks`` (:class:`~madrag.pipeline.hooks.RunHooks`) of its stages, the exemplar
    bank's progress, the number of scores to produce, each record and failed record, and each finished essay.

    ``backend`` is a ready provider used instead of building one from ``job.provider`` (whose retry and
    concurrency settings still apply); the caller owns it, so it is not closed. ``embedder`` replaces the
    exemplar bank's MiniLM embedder. Reference labels (the exemplars' scores) round ties by the job's
    ``settings.reference_ties``.
    """
    return await _execute(job, hooks or NO_HOOKS, backend=backend, embedder=embedder)


async def _execute(job: ScoreJob, hooks: RunHooks, *, backend: Provider | None, embedder: Embedder | None) -> JobResult:
    started = time.monotonic()
    check_folders(job.run_dir, job.cache_dir)
    backends: _Backends | None = None
    try:
        with contextlib.ExitStack() as held:
            # the run store is opened once: a resumed run's at once (its configuration is read from it), a new
            # run's once its checks pass, so a refused one leaves no run folder (and the command its message
            # suggests works on the same --run-dir)
            store = _open_store(job, held) if has_store(job.run_dir) else None
            meta = None if store is None else store_meta(store)
            job = _as_recorded(job, meta)
            run = _plan(job, backend, hooks.on_stage)
            checked = None
            if meta is None:  # a new run's backends are built and checked before anything is written
                backends = _backends(job, backend)
                if embedder is None and any(p.needs.bank for p in run.protocols):
                    check_embedder(job.embedder)  # an extra's embedder not installed: said before any folder
                rehearsed = _rehearsal(job, run, backends)
                checked = await check_backends(backends.main, backends.roles, job.settings, rehearsed)
            store = store or _open_store(job, held)
            _open_run(job, store, run)  # refuses a resume with other settings
            done = await _finished(job, run, hooks) if run.resumed else None
            if done is None and run.store.prompt_drift is not None:
                raise ConfigError(f"{run.store.prompt_drift}; use another --run-dir to start a new run")
            # this session's log, once nothing refuses it (a refused command is no session of the run)
            held.enter_context(run_log(job.run_dir, job_line(job, len(run.essays), backend)))
            if done is not None:
                return _nothing_left(run, done, hooks, started)
            # a resumed run's backends are built only now, when calls are left to make
            backends = backends or _backends(job, backend)
            return await _score(job, run, hooks, backends, embedder, started, checked)
    finally:
        for managed_backend in backends.owned() if backends is not None else ():
            await managed_backend.aclose()


def _nothing_left(
    run: _Prepared, done: tuple[list[TraitScore], CallStats], hooks: RunHooks, started: float
) -> JobResult:
    """The result of a resumed run that had nothing left to do (its scores read from its store)."""
    store = run.store
    if store.prompt_drift is not None:  # no call is made: the prompts are not used
        hooks.on_stage(f"note: {store.prompt_drift}; nothing was left to do, so none was used")
    hooks.on_stage("nothing left to do: every score of this job is in the run store")
    elapsed = time.monotonic() - started
    final = keep_over_run(done[0], store, run.protocols, run.rubric, {e.id for e in run.essays})
    bank = store.get_meta("bank") or {}
    return JobResult(run.run_id, True, run.essays, final, done[1], elapsed, bank, _accounts(run, final))


async def _score(
    job: ScoreJob,
    run: _Prepared,
    hooks: RunHooks,
    backends: _Backends,
    embedder: Embedder | None,
    started: float,
    checked: dict[str, Any] | None = None,
) -> JobResult:
    """Check the backends (:func:`preflight`, unless ``checked`` holds what a new run's check found), build the
    bank (with ``embedder``, if given), then score the run's essays (here or on the job's executor)."""
    stage = hooks.on_stage
    run.store.set_meta("provider", backends.main.provider.describe())
    if backends.roles:
        run.store.set_meta("role_providers", {r: p.provider.describe() for r, p in backends.roles.items()})
    ctx = CallContext(
        run_id=run.run_id,
        provider=backends.main,
        store=run.store,
        prompts=run.prompts,
        settings=job.settings,
        on_record=hooks.on_record,
        on_failed=hooks.on_failed,
        role_providers=backends.roles,
        failures=FailureBudget(job.max_failures),
    )
    # a backend that cannot serve the run stops it before the bank is built or a call is made
    found = (
        checked if checked is not None else await preflight(ctx, _rehearsal(job, run, backends), run.store.count() > 0)
    )
    record_checks(run.store, found)
    log_backends(found, run.store)  # the concurrency resolved, the server's model and build, in run.log
    resumed_limits(run.store, run.config, run.resumed)  # kept (and said in run.log) once the check passed
    with on_disk_errors(f"cache directory {job.cache_dir}"):
        ctx.bank, bank_info = _prepare_bank(job, run, stage, embedder, hooks.on_bank_progress)
    hooks.on_start(len(run.essays) * len(run.rubric.traits) * len(run.protocols))
    stage(f"scoring {len(run.essays)} essays x {len(run.rubric.traits)} traits with {', '.join(job.protocols)}")
    if job.executor is None:
        scores = await run_scoring(
            ctx, run.essays, run.rubric, run.protocols, job.essay_concurrency, hooks.on_essay_done
        )
    else:
        scoring = ScoringRun(
            job=job,
            store=run.store,
            ctx=ctx,
            essays=run.essays,
            rubric=run.rubric,
            protocols=run.protocols,
            hooks=hooks,
            ready_backend=backends.given,
        )
        scores = await job.executor(scoring)
    elapsed = time.monotonic() - started
    final = keep_over_run(scores, run.store, run.protocols, run.rubric, {e.id for e in run.essays})
    return JobResult(run.run_id, run.resumed, run.essays, final, ctx.stats, elapsed, bank_info, _accounts(run, final))


def _rehearsal(job: ScoreJob, run: _Prepared, backends: _Backends) -> Rehearsal | None:
    caps = {"*": backends.main.capabilities} | {r: b.capabilities for r, b in backends.roles.items()}
    return rehearsal(run.protocols, run.essays, run.pool, run.rubric, run.prompts, job.settings, caps)


def _accounts(run: _Prepared, final: list[TraitScore]) -> dict[str, Unusable]:
    """Per protocol, the unusable and missing scores of the job's essays, counted once from their stored records
    and kept in the store for every later reader."""
    ids = [essay.id for essay in run.essays]
    models = ModelsNamed()  # the models the records asked for and their answers named, as they are read
    records = models.counting(run.store.records_of(ids))
    protocols = {protocol.name: record_groups(protocol) for protocol in run.protocols}
    accounts = unusable_by_protocol(records, final, ids, run.rubric.trait_names, protocols)
    store_accounts(run.store, accounts)
    models.store(run.store)
    return accounts
