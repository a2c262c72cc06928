"""A scoring job from settings to stored records: data, split, bank, provider, store, protocols.

``ScoreJob`` is what ``madrag score`` builds from its options and what :func:`madrag.score` builds from its
arguments; :func:`execute` runs it. Re-running the same job on the same run directory resumes it.

A call that gets no answer after its retries is recorded as failed and the run goes on without its essay-trait
(``JobResult.stats.failed_calls`` counts them; a resume retries them); ``max_failures`` stops the run, with
:class:`~madrag.errors.TooManyFailures`, once that many calls have failed (the calls in flight finish first).

Essays come from a data file (``data``, the CLI) or from memory (``essays``, the Python API). In-memory essays
are held by the job itself (no lossy round trip through a file format); the run's stored configuration
records ``"data_source": "in-memory"`` and a SHA-256 fingerprint of the essays (``data_sha256``, as for a
file), and the run directory keeps a copy of them in ``inputs/essays.jsonl`` (one :class:`Essay` JSON per
line; ``inputs/pool.jsonl`` for an explicit exemplar pool), so the run can be reproduced exactly and
resumed by passing the same essays again. The exemplar pool is the other folds of the data (the fold split),
or an explicit in-memory ``pool``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from madrag.agents.calls import CallContext, CallStats, FailureBudget
from madrag.agents.prompts import (
    CONSENSUS_PROMPT_NAMES,
    PROMPT_NAMES,
    SOURCE_PROMPT_NAMES,
    TRAINING_FREE_PROMPT_NAMES,
    PromptLibrary,
)
from madrag.data.essay import Essay, no_scores_line, reference_ties, traits_without_scores
from madrag.data.loaders import load_essays
from madrag.data.splits import EACH, EvalFold, fold_pools, split_essays
from madrag.errors import ConfigError, InputError
from madrag.pipeline.hooks import NO_HOOKS, RunHooks
from madrag.pipeline.preflight import check_backends, preflight, prompt_floor
from madrag.pipeline.resume import stored_scores
from madrag.pipeline.run_dir import (
    check_folders,
    keep_prompts,
    on_disk_errors,
    prompt_names_of,
    recorded_prompts,
    write_whole,
)
from madrag.pipeline.run_log import run_log, settings_line
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.providers.base import Provider
from madrag.providers.cache import ResponseCache
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.providers.spec import ProviderSpec, managed, spec_identity
from madrag.retrieval.embedder import EmbedderName, stored_embedder
from madrag.rubric import Rubric, load_rubric
from madrag.run_config import CONFIG_VERSION, VERSION_KEY, identity, prompt_identity
from madrag.settings import ScoringSettings
from madrag.store import RunStore
from madrag.writer_lock import WriterLock

if TYPE_CHECKING:
    from madrag.retrieval.bank import ExemplarBank
    from madrag.retrieval.embedder import Embedder
    from madrag.retrieval.folds import FoldBanks

    Bank = ExemplarBank | FoldBanks
    """A job's exemplar bank: one bank, or one per fold (``--fold each``)."""


def default_cache_dir() -> Path:
    """Exemplar indexes and the response cache: ``$MADRAG_CACHE``, else ``~/.cache/madrag``."""
    return Path(os.environ.get("MADRAG_CACHE", Path.home() / ".cache" / "madrag"))


@runtime_checkable
class Executor(Protocol):
    """How a job's essays are scored once the run is open (``ScoreJob.executor``; None: here, by
    :func:`madrag.pipeline.runner.run_scoring`). Ray's is :class:`madrag.distributed.driver.RayExecutor`."""

    async def __call__(self, run: ScoringRun) -> list[TraitScore]: ...


class ScoreJob(BaseModel):
    """Everything that defines one scoring run (recorded in its store, checked when it is resumed).

    Exactly one of ``data`` (a data file) and ``essays`` (in-memory essays) is given; the ``rubric`` is a file or
    a :class:`Rubric` (in memory: the run directory keeps it in ``inputs/rubric.json``). With ``pool`` the
    retrieval pool is those essays and every selected essay is scored (no fold split); without it,
    ``eval_fold`` is scored and the other folds are the pool (``None``: every essay is scored, every essay is
    in the pool, the essay being scored never retrieved; ``"each"``: every essay is scored, each fold with the
    other folds as its pool).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    data: Path | None = None
    essays: list[Essay] | None = Field(default=None, repr=False)
    pool: list[Essay] | None = Field(default=None, repr=False)
    rubric: Path | Rubric
    run_dir: Path
    data_format: str = "auto"
    eval_fold: EvalFold = 0  # a fold, "each" (cross-fold: every fold, the others as its pool) or None (all)
    limit: int | None = Field(default=None, ge=1)
    ids: list[str] | None = None
    protocols: list[str] = Field(default_factory=lambda: ["MADRAG"])
    # the named list the protocols came from (``madrag score --protocols paper-ablation``); recorded in the run's
    # configuration, not part of its identity (the protocols are)
    protocol_preset: str | None = None
    provider: ProviderSpec = Field(default_factory=ProviderSpec)
    # backends for particular roles (the consensus paper cross-model pairs); other roles use ``provider``
    role_providers: dict[str, ProviderSpec] = Field(default_factory=dict)
    settings: ScoringSettings = Field(default_factory=ScoringSettings)
    essay_concurrency: int | None = Field(default=None, ge=1)  # None: derived from the backend's slots
    prompts_dir: Path | None = None
    cache_dir: Path = Field(default_factory=default_cache_dir)
    response_cache: bool = True
    # the pool's embedder: the MADRAG paper's MiniLM (truncated at 256 word pieces), MiniLM over windows (the
    # option, the
    # default of runs made before: a resumed one keeps it, see resumed_job) or the hashing embedder for quick checks
    embedder: EmbedderName = "minilm"
    # where the essays are scored (None: in this process; e.g. a Ray cluster, madrag.distributed); how a run
    # executes is not part of its identity, so a run started here can be resumed on Ray and the other way round
    executor: Executor | None = Field(default=None, exclude=True, repr=False)
    # calls that may fail after their retries before the run stops (None: no limit; each failed call is recorded
    # as failed, its essay-trait left unscored, and retried on resume). Not part of the run's identity
    max_failures: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_source(self) -> ScoreJob:
        if (self.data is None) == (self.essays is None):
            raise ValueError("give exactly one of data (a data file) and essays (in-memory essays)")
        return self


@dataclass
class JobResult:
    """What :func:`execute` returns: the scores of the selected essays and how the run went."""

    run_id: str
    resumed: bool
    essays: list[Essay]
    scores: list[TraitScore]
    stats: CallStats
    elapsed_s: float
    bank_info: dict[str, Any]


@dataclass(frozen=True)
class ScoringRun:
    """What an :class:`Executor` scores: the job, its open run's store and call context (backends, bank), the
    selected essays, rubric and protocols, the caller's hooks;
    ``ready_backend``: the caller handed a provider object."""

    job: ScoreJob
    store: RunStore
    ctx: CallContext
    essays: list[Essay]
    rubric: Rubric
    protocols: list[ScoringProtocol]
    hooks: RunHooks
    ready_backend: bool = False


def job_rubric(job: ScoreJob) -> Rubric:
    """The job's rubric: the one it holds, or its file loaded."""
    return job.rubric if isinstance(job.rubric, Rubric) else load_rubric(job.rubric)


def job_essays(job: ScoreJob, rubric: Rubric) -> list[Essay]:
    """Every essay of the job's source: its in-memory essays, or its data file loaded with ``rubric``."""
    if job.essays is not None:
        return list(job.essays)
    assert job.data is not None  # guaranteed by ScoreJob's validator
    return load_essays(job.data, rubric, job.data_format)


def select_essays(job: ScoreJob, rubric: Rubric) -> tuple[list[Essay], list[Essay]]:
    """(essays to score, retrieval pool) after the split (or the explicit pool), ``ids`` and ``limit``."""
    essays = job_essays(job, rubric)
    if job.pool is not None:
        chosen, pool = essays, list(job.pool)
    else:
        chosen, pool = split_essays(essays, job.eval_fold)
    if job.ids:
        by_id = {e.id: e for e in essays}
        unknown = [i for i in job.ids if i not in by_id]
        if unknown:
            raise InputError(f"unknown essay id(s): {', '.join(unknown[:5])}")
        chosen = [by_id[i] for i in job.ids]
    if job.limit is not None:
        chosen = chosen[: job.limit]
    if not chosen:
        raise InputError("no essays selected to score")
    return chosen, pool


def fingerprint_file(path: Path) -> str:
    """A short SHA-256 of a file's bytes (how a run recognises its data file); of a folder of submissions, of
    each file's name and bytes, in name order."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        with file.open("rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()[:16]


def essays_jsonl(essays: list[Essay]) -> str:
    """In-memory essays as the run directory keeps them: one :class:`Essay` JSON object per line."""
    return "".join(essay.model_dump_json() + "\n" for essay in essays)


def essays_fingerprint(essays: list[Essay]) -> str:
    """SHA-256 (first 16 hex digits) of :func:`essays_jsonl`: the fingerprint of in-memory essays, as a data
    file's is of its bytes."""
    return hashlib.sha256(essays_jsonl(essays).encode("utf-8")).hexdigest()[:16]


def source_config(job: ScoreJob) -> dict[str, Any]:
    """Where the essays (and an explicit pool) came from, with fingerprints. A file job keeps the keys runs
    have always stored (so they still resume); in-memory essays and pools add theirs."""
    if job.data is not None:
        source: dict[str, Any] = {"data": str(job.data.resolve()), "data_sha256": fingerprint_file(job.data)}
    else:
        essays = job.essays or []
        source = {
            "data": None,
            "data_sha256": essays_fingerprint(essays),
            "data_source": "in-memory",
            "data_essays": len(essays),
        }
    if job.pool is not None:
        source["pool"] = {"source": "in-memory", "essays": len(job.pool), "sha256": essays_fingerprint(job.pool)}
    return source


PACKAGED_ORDER = (*PROMPT_NAMES, *CONSENSUS_PROMPT_NAMES, *TRAINING_FREE_PROMPT_NAMES)
"""The order a run records packaged templates in (its prompt hash reads them in this order)."""


def prompt_names(protocols: list[ScoringProtocol], with_source: bool = False) -> list[str]:
    """The templates a run's protocols use: the MADRAG paper's always (as runs made before the consensus paper
    recorded them),
    plus each protocol's own (:attr:`~madrag.protocols.base.ScoringProtocol.templates`: packaged ones in
    :data:`PACKAGED_ORDER`, others in the protocols' order), plus the source block when the essays carry a
    source text (``with_source``)."""
    wanted = dict.fromkeys(name for p in protocols for name in p.templates)
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
        **prompt_identity(names, [prompts.text(n) for n in names], [prompts.source(n) for n in names]),
    }


def run_identity(job: ScoreJob) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """What of a stored configuration must match the job's for its run to resume (older configurations read as
    the latest version, with the job's settings class: :func:`madrag.run_config.identity`)."""
    return functools.partial(identity, settings_model=type(job.settings), where=f"run at {job.run_dir}")


def resumed_job(job: ScoreJob, meta: dict[str, Any] | None) -> ScoreJob:
    """The job with the embedder its stored run was made with (``meta``: the run's stored ``config`` and ``bank``,
    :func:`stored_meta`; None for a new run): a run made before the paper's embedder became the default
    (``minilm`` then meant the windows embedder) resumes with ``minilm-windows``, so with the same exemplars
    (:func:`madrag.retrieval.stored_embedder`). A new run, or another embedder asked for, is unchanged (another
    one is then refused by the stored config's check)."""
    if meta is None or job.embedder != "minilm":
        return job
    if stored_embedder(meta["config"], meta.get("bank")) != "minilm-windows":
        return job
    return job.model_copy(update={"embedder": "minilm-windows"})


def stored_meta(run_dir: Path) -> dict[str, Any] | None:
    """A run directory's stored ``config`` and ``bank`` (read-only, nothing written), or None when it holds no
    configured run yet."""
    path = run_dir / "store.sqlite"
    if not path.is_file() or path.stat().st_size == 0:  # an empty file: a store never written
        return None
    store = RunStore(path, read_only=True)
    try:
        config = store.get_meta("config")
        return None if config is None else {"config": config, "bank": store.get_meta("bank")}
    finally:
        store.close()


def record_inputs(job: ScoreJob) -> None:
    """Keep in-memory essays (and an explicit pool) in ``<run_dir>/inputs/`` (see the module docstring), and an
    in-memory rubric as ``inputs/rubric.json``."""
    folder = job.run_dir / "inputs"
    if isinstance(job.rubric, Rubric) and not (folder / "rubric.json").is_file():
        write_whole(folder / "rubric.json", job.rubric.model_dump_json(indent=2) + "\n")
    for name, essays in (("essays.jsonl", job.essays), ("pool.jsonl", job.pool)):
        target = folder / name
        if essays is not None and not target.is_file():
            write_whole(target, essays_jsonl(essays))


def check_pool(protocols: list[ScoringProtocol], pool: list[Essay]) -> None:
    """A protocol that retrieves exemplars needs scored essays in the pool (checked before a run starts)."""
    if any(p.uses_bank for p in protocols) and not any(e.rater_scores for e in pool):
        raise InputError(
            "the exemplar pool has no scored essays: give a pool of essays with scores, essays with scores and "
            "folds, or a protocol without retrieval (e.g. MAD)"
        )


def build_bank(
    job: ScoreJob,
    pool: list[Essay],
    rubric: Rubric,
    embedder: Embedder | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> Bank:
    """The exemplar bank of ``pool`` with ``embedder`` (default: the job's, MiniLM unless ``job.embedder`` says
    otherwise, through the cache folder's vector store, so each text is embedded once, ever), built
    (``on_progress(done, total)``) or reused from the job's cache directory. Under
    ``--fold each``: one bank per fold, each built from the other folds (:class:`madrag.retrieval.folds.FoldBanks`),
    all in the persistent cache."""
    from madrag.retrieval import ExemplarBank, make_embedder
    from madrag.retrieval.folds import FoldBanks
    from madrag.retrieval.vectors import VECTORS_FILE, CachingEmbedder

    chosen = embedder or CachingEmbedder(make_embedder(job.embedder), job.cache_dir / VECTORS_FILE)
    if job.eval_fold == EACH:
        return FoldBanks.build_or_load(fold_pools(pool), rubric, chosen, job.cache_dir / "banks", on_progress)
    return ExemplarBank.build_or_load(pool, rubric, chosen, job.cache_dir / "banks", on_progress=on_progress)


def check_references(
    rubric: Rubric,
    essays: list[Essay],
    pool: list[Essay],
    protocols: list[ScoringProtocol],
    stage: Callable[[str], None],
) -> None:
    """A line to ``stage`` for each trait without any human score; an InputError when a protocol needs exemplars
    of such a trait (the pool has no scored essay for it)."""
    banked = [p.name for p in protocols if p.uses_bank]
    unscored = traits_without_scores(pool, rubric) if banked else []
    if unscored:
        first = unscored[0].column or unscored[0].name
        raise InputError(
            f"{', '.join(banked)} {'needs' if len(banked) == 1 else 'need'} scored exemplars, but no essay of the "
            f"exemplar pool has a human score for {', '.join(repr(t.name) for t in unscored)} (looked for a column "
            f"{first!r} or 'rater<i>_{first}'; see the rubric's 'column' field)"
        )
    for trait in traits_without_scores([*essays, *pool], rubric):
        stage(f"note: {no_scores_line(trait)}")


def _backend(spec: ProviderSpec, cache: Path | None, instance: Provider | None) -> ManagedProvider:
    """The managed backend: ``instance`` (a ready provider) under the spec's retry policy, or one built from
    ``spec``."""
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
    with_source = any(e.source for e in essays)
    config = job_config(job, rubric, protocols, prompts, backend, with_source)
    return _Prepared(rubric, protocols, prompts, essays, pool, config)


def _open_run(job: ScoreJob, store: RunStore, run: _Prepared) -> _Prepared:
    """Bind (or check) the run's configuration in its store, record the inputs and the prompt templates."""
    run.store = store
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

    if not any(p.uses_bank for p in run.protocols):
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


def _backends(job: ScoreJob, backend: Provider | None) -> tuple[ManagedProvider, dict[str, ManagedProvider]]:
    """The main backend and the per-role ones (built, nothing called yet), with the response cache of the cache
    directory."""
    cache = job.cache_dir / "responses.sqlite" if job.response_cache else None
    with on_disk_errors(f"cache directory {job.cache_dir}"):
        provider = _backend(job.provider, cache, backend)
        role_providers = {role: managed(spec, cache) for role, spec in job.role_providers.items()}
    return provider, role_providers


def _record_backends(store: RunStore, provider: ManagedProvider, roles: dict[str, ManagedProvider]) -> None:
    store.set_meta("provider", provider.provider.describe())
    if roles:
        store.set_meta("role_providers", {r: p.provider.describe() for r, p in roles.items()})


async def _finished(job: ScoreJob, run: _Prepared, hooks: RunHooks) -> tuple[list[TraitScore], CallStats] | None:
    """The scores of a resumed job that has nothing left to do (``hooks.on_essay_done`` called per essay), read
    without building its bank or backend; None when it has work left (:mod:`madrag.pipeline.resume`)."""
    done = await stored_scores(
        run_id=run.run_id,
        store=run.store,
        prompts=run.prompts,
        settings=job.settings,
        essays=run.essays,
        rubric=run.rubric,
        protocols=run.protocols,
        roles=list(job.role_providers),
    )
    if done is not None:
        for essay in run.essays:
            hooks.on_essay_done(essay, [s for s in done[0] if s.essay_id == essay.id])
    return done


def scores_over_run(scores: list[TraitScore], store: RunStore, run: _Prepared) -> list[TraitScore]:
    """``scores`` with those of the protocols scored over the run (MTS, CJ: a score depends on the run's other
    essays) replaced by the protocol's scores read from the store, for the job's essays."""
    later = [p for p in run.protocols if p.scored_over_run]
    if not later:
        return scores
    names = {p.name for p in later}
    wanted = {e.id for e in run.essays}
    read = [s for p in later for s in p.read_scores(store, run.rubric) if s.essay_id in wanted]
    return [s for s in scores if s.protocol not in names] + read


def job_line(job: ScoreJob, n_essays: int, backend: Provider | None) -> str:
    """The job's settings in one line of its run.log (:func:`~madrag.pipeline.run_log.settings_line`)."""
    return settings_line(job.provider, job.protocols, job.settings, n_essays, job.max_failures, backend)


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
    with reference_ties(job.settings.reference_ties):
        return await _execute(job, hooks or NO_HOOKS, backend=backend, embedder=embedder)


async def _execute(job: ScoreJob, hooks: RunHooks, *, backend: Provider | None, embedder: Embedder | None) -> JobResult:
    started = time.monotonic()
    check_folders(job.run_dir, job.cache_dir)
    job = resumed_job(job, stored_meta(job.run_dir))
    if job.prompts_dir is None and (kept := recorded_prompts(job.run_dir)) is not None:
        job = job.model_copy(update={"prompts_dir": kept})  # the run's own templates, for workers too
    run = _plan(job, backend, hooks.on_stage)
    # a new run's backend is built (and its settings checked) before anything is written; a resumed one's only
    # when calls are left to make
    backends = _backends(job, backend) if stored_meta(job.run_dir) is None else None
    try:
        # a new run's backends are checked before anything is written: a refused check leaves no run folder, so
        # the command its message suggests works on the same --run-dir
        floor = prompt_floor(run.essays, run.pool, run.rubric, job.settings, any(p.uses_bank for p in run.protocols))
        checked = await check_backends(*backends, job.settings, floor) if backends is not None else None
        with (
            WriterLock(job.run_dir),
            on_disk_errors(f"run directory {job.run_dir} (or cache directory {job.cache_dir})"),
            run_log(job.run_dir, job_line(job, len(run.essays), backend)),  # run.log: this session, how it ended
        ):
            store = RunStore(job.run_dir / "store.sqlite")
            try:
                _open_run(job, store, run)
                if run.resumed and (done := await _finished(job, run, hooks)) is not None:
                    if store.prompt_drift is not None:  # no call is made: the prompts are not used
                        hooks.on_stage(f"note: {store.prompt_drift}; nothing was left to do, so none was used")
                    hooks.on_stage("nothing left to do: every score of this job is in the run store")
                    elapsed = time.monotonic() - started
                    final = scores_over_run(done[0], store, run)
                    return JobResult(
                        run.run_id, True, run.essays, final, done[1], elapsed, store.get_meta("bank") or {}
                    )
                if store.prompt_drift is not None:
                    raise ConfigError(f"{store.prompt_drift}; use another --run-dir to start a new run")
                backends = backends or _backends(job, backend)
                return await _score(job, run, hooks, (backend, embedder, backends), started, checked)
            finally:
                store.close()
    finally:
        if backends is not None:
            owned = backends[1].values() if backend is not None else (backends[0], *backends[1].values())
            for managed_backend in owned:
                await managed_backend.aclose()


async def _score(
    job: ScoreJob,
    run: _Prepared,
    hooks: RunHooks,
    given: tuple[Provider | None, Embedder | None, tuple[ManagedProvider, dict[str, ManagedProvider]]],
    started: float,
    checked: dict[str, Any] | None = None,
) -> JobResult:
    """Check the backends (:func:`preflight`, unless ``checked`` holds what a new run's check found), build the
    bank, then score the run's essays (here or on the job's
    executor)."""
    backend, embedder, (provider, role_providers) = given
    stage = hooks.on_stage
    _record_backends(run.store, provider, role_providers)
    ctx = CallContext(
        run_id=run.run_id,
        provider=provider,
        store=run.store,
        prompts=run.prompts,
        settings=job.settings,
        on_record=hooks.on_record,
        on_failed=hooks.on_failed,
        role_providers=role_providers,
        failures=FailureBudget(job.max_failures),
    )
    # a backend that cannot serve the run stops it before the bank is built or a call is made
    run.store.set_meta("preflight", checked if checked is not None else await preflight(ctx))
    with on_disk_errors(f"cache directory {job.cache_dir}"):
        ctx.bank, bank_info = _prepare_bank(job, run, stage, embedder, hooks.on_bank_progress)
    hooks.on_start(len(run.essays) * len(run.rubric.traits) * len(run.protocols))
    stage(f"scoring {len(run.essays)} essays x {len(run.rubric.traits)} traits with {', '.join(job.protocols)}")
    if job.executor is None:
        scores = await run_scoring(
            ctx, run.essays, run.rubric, run.protocols, job.essay_concurrency, hooks.on_essay_done
        )
    else:
        parts = (job, run.store, ctx, run.essays, run.rubric, run.protocols, hooks)
        scores = await job.executor(ScoringRun(*parts, ready_backend=backend is not None))
    elapsed = time.monotonic() - started
    final = scores_over_run(scores, run.store, run)
    return JobResult(run.run_id, run.resumed, run.essays, final, ctx.stats, elapsed, bank_info)
