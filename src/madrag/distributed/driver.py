"""Scoring a job on Ray: the driver plans the run, starts the workers, dispatches shards and writes the store.

The driver is the process that runs ``madrag score --ray``: the job's executor is a :class:`RayExecutor`. It has
already loaded the data, bound the run's configuration, built the exemplar bank and opened the run store
(:func:`madrag.pipeline.job.execute`); here it

1. reads the store once and keeps only the essay-traits not finished (:func:`~madrag.distributed.shard.plan_run`)
   - scores already stored are reported at once, as a local resume reports its reused calls;
2. joins the cluster (or starts a local instance), puts the bank into the object store once and starts one
   :class:`~madrag.distributed.worker.ShardWorker` actor per worker, spread over the nodes, each with its
   share of the backend's concurrency;
3. cuts the remaining essays into shards and lets the :class:`~madrag.distributed.dispatch.Dispatcher` hand
   them out, writing every streamed record to the store as it arrives;
4. records in the store (meta ``ray``) that the run used Ray, on which cluster and with how many workers.

Calls that fail after their retries are failed records, as in a local run, counted into the run's statistics
(``failed_calls``: ``madrag score`` warns and exits 3); with ``--max-failures`` the driver keeps the budget for
the whole cluster and, once it is spent, hands out nothing more, lets the calls in flight finish and raises
:class:`~madrag.errors.TooManyFailures` (exit 2), as a local run does.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from madrag.agents.calls import CallContext
from madrag.data.essay import Essay
from madrag.distributed.bank import ShippedBanks, SourceBank, query_vectors
from madrag.distributed.cluster import Cluster, connect, disconnect, import_ray, quiet_ray_env
from madrag.distributed.dispatch import Dispatcher, EssayDone, Progress
from madrag.distributed.options import RayOptions
from madrag.distributed.shard import Plan, Shard, known_records, make_shards, plan_run, shard_size
from madrag.distributed.worker import ShardWorker, WorkerSetup
from madrag.errors import ConfigError
from madrag.pipeline.final_scores import keeper
from madrag.pipeline.job import ScoringRun, prompt_names
from madrag.pipeline.runner import auto_essay_concurrency, stopped_error
from madrag.protocols.base import ScoringProtocol, TraitScore, essay_width
from madrag.providers import ManagedProvider, ProviderSpec
from madrag.retrieval.bank import ExemplarBank
from madrag.retrieval.choice import make_embedder
from madrag.retrieval.folds import FoldBanks
from madrag.rubric import Rubric
from madrag.store import RunStore

LOCAL_WORKERS = 2
"""Workers of a local instance when ``--ray-workers`` is not given."""


def worker_spec(spec: ProviderSpec, backend: ManagedProvider, workers: int) -> ProviderSpec:
    """A worker's backend: an HTTP backend's concurrency (per endpoint, for several ``--base-url``) is shared
    by the workers, each getting its part, so the cluster as a whole keeps the limit; an embedded model is each
    worker's own."""
    if not spec.traits.remote:
        return spec
    endpoints = spec.options.endpoints()
    per_endpoint = spec.concurrency or max(1, backend.max_concurrency // endpoints)
    return spec.model_copy(update={"concurrency": max(1, math.ceil(per_endpoint / workers))})


def worker_slots(spec: ProviderSpec, backend: ManagedProvider) -> int:
    """Requests one worker keeps in flight with ``spec`` (a worker's spec, see :func:`worker_spec`)."""
    if not spec.traits.remote or spec.concurrency is None:
        return backend.max_concurrency
    return spec.concurrency * spec.options.endpoints()


def driver_bank(ctx: CallContext) -> SourceBank | None:
    """The run's exemplars, which workers get snapshots of: an :class:`ExemplarBank`, or one per fold."""
    bank = ctx.bank
    if bank is None or isinstance(bank, ExemplarBank | FoldBanks):
        return bank
    raise ConfigError(f"a Ray run ships its exemplar banks to the workers; this run's bank is a {type(bank).__name__}")


def announce_finished(
    ctx: CallContext, store: RunStore, essays: Sequence[Essay], plan: Plan, on_essay_done: EssayDone | None
) -> None:
    """Report what the store already holds, as a local resume does: each finished score's record (progress),
    and each essay with nothing left (its scores)."""
    seen: set[str] = set()
    for essay in essays:
        for score in plan.finished.get(essay.id, []):
            key = score.record_key
            if key and key not in seen:
                seen.add(key)
                if ctx.on_record is not None and (record := store.get(key)) is not None:
                    ctx.on_record(record)
        if essay.id not in plan.todo and on_essay_done is not None:
            on_essay_done(essay, plan.finished.get(essay.id, []))
    ctx.stats.reused += len(seen)


def ordered(
    essays: Sequence[Essay], plan: Plan, progress: Progress, rubric: Rubric, protocols: Sequence[ScoringProtocol]
) -> list[TraitScore]:
    """Every essay's scores, in the essays' order, then the protocols', then the traits' (as a local run)."""
    p_rank = {p.name: i for i, p in enumerate(protocols)}
    t_rank = {t: i for i, t in enumerate(rubric.trait_names)}
    out: list[TraitScore] = []
    for essay in essays:
        scores = progress.scores.get(essay.id, plan.finished.get(essay.id, []))
        out.extend(sorted(scores, key=lambda s: (p_rank.get(s.protocol, len(p_rank)), t_rank.get(s.trait, 0))))
    return out


class RayRun:
    """One session of a job on Ray (see the module docstring)."""

    def __init__(self, options: RayOptions, run: ScoringRun) -> None:
        self.options, self.run = options, run
        self.job, self.ctx, self.store, self.stage = run.job, run.ctx, run.store, run.hooks.on_stage
        self.actors: list[Any] = []
        bank = driver_bank(run.ctx)
        # workers embed their essays with the embedder the job names; a bank built with another one (an
        # embedder object handed to execute) has its query vectors made here and shipped
        self.embed_on_driver = options.query_embeddings == "driver" or (
            bank is not None
            and bank.embedder.name != make_embedder(run.job.embedder, run.job.embedding_endpoint()).name
        )

    def setup(self, workers: int) -> WorkerSetup:
        """What every worker is started with."""
        ctx, job = self.ctx, self.job
        roles = {
            role: worker_spec(spec, ctx.role_providers[role], workers) for role, spec in job.role_providers.items()
        }
        return WorkerSetup(
            run_id=ctx.run_id,
            rubric=self.run.rubric,
            protocols=[p.name for p in self.run.protocols],
            settings=ctx.settings,
            provider=worker_spec(job.provider, ctx.provider, workers),
            role_providers=roles,
            prompts={name: ctx.prompts.text(name) for name in prompt_names(self.run.protocols)},
            essay_concurrency=job.essay_concurrency,
            embedder=job.embedder,
            embedding=job.embedding_endpoint(),
            max_failures=job.max_failures,
        )

    async def start_workers(self, setup: WorkerSetup, workers: int, cluster: Cluster) -> None:
        """Put the bank into the object store once and start the workers (spread over the nodes)."""
        ray = import_ray()
        if workers * self.options.cpus_per_worker > cluster.cpus:
            raise ConfigError(
                f"--ray-workers {workers} needs {workers * self.options.cpus_per_worker:g} CPUs; "
                f"the cluster has {cluster.cpus:g}"
            )
        driver = driver_bank(self.ctx)
        bank = [ray.put(ShippedBanks.of(driver))] if driver is not None else []
        actor = ray.remote(ShardWorker).options(
            num_cpus=self.options.cpus_per_worker,
            max_restarts=self.options.max_attempts,
            max_task_retries=0,
            scheduling_strategy="SPREAD",
        )
        self.actors = [actor.remote(setup, bank) for _ in range(workers)]
        hellos = await asyncio.gather(*(a.hello.remote() for a in self.actors))
        for i, hello in enumerate(hellos):
            self.stage(f"ray: worker {i} on node {hello['ip']} ({hello['node'][:8]}), pid {hello['pid']}")

    async def worker_cpu_s(self) -> float | None:
        """CPU seconds the workers have spent since they started (None if one does not answer)."""
        try:
            usage = await asyncio.wait_for(asyncio.gather(*(a.usage.remote() for a in self.actors)), 10)
        except Exception:  # a lost worker: no total
            return None
        return round(sum(float(u["cpu_s"]) for u in usage), 3)

    async def stop_workers(self) -> None:
        """Close the workers' connections and end them."""
        ray = import_ray()
        if self.actors:
            closing = asyncio.gather(*(a.close.remote() for a in self.actors), return_exceptions=True)
            try:
                await asyncio.wait_for(closing, 10)
            except TimeoutError:
                pass
            for actor in self.actors:
                ray.kill(actor)
        self.actors = []

    def prepare(self, plan: Plan) -> Callable[[Shard], Any]:
        """What is done to a shard just before it is handed out: the records its essays already have, and
        (embedding on the driver) its essays' query vectors."""
        bank = driver_bank(self.ctx)

        async def fill(shard: Shard) -> None:
            """Attach the shard's known records (and query vectors) just before it goes out."""
            started = plan.partial if shard.attempt == 1 else {e.id for e in shard.essays}
            shard.known = known_records(self.store, shard, started)
            if bank is not None and self.embed_on_driver:
                shard.vectors = await asyncio.to_thread(query_vectors, bank, shard.essays)

        return fill

    async def score(self) -> list[TraitScore]:
        """Score what is left of the run's essays on the cluster (the store's score rows say what is finished);
        every essay's scores in order."""
        ctx, run = self.ctx, self.run
        plan = plan_run(self.store, run.essays, run.rubric, run.protocols, ctx.settings)
        announce_finished(ctx, self.store, run.essays, plan, run.hooks.on_essay_done)
        if not plan.todo:
            return ordered(run.essays, plan, Progress(), run.rubric, run.protocols)
        quiet_ray_env()
        cluster = connect(self.options, self.options.workers or LOCAL_WORKERS)
        try:
            progress = await self.run_on(cluster, plan)
        finally:
            try:
                await self.stop_workers()
            finally:
                disconnect(cluster)
        ctx.stats.reused += progress.reused
        ctx.stats.cached += progress.cached
        ctx.stats.failed_scores += progress.failed_scores
        if ctx.failures is not None and ctx.failures.spent:
            raise stopped_error(ctx.failures)
        return ordered(run.essays, plan, progress, run.rubric, run.protocols)

    async def run_on(self, cluster: Cluster, plan: Plan) -> Progress:
        """Start the workers, cut the shards, score them; record the session in the store (meta ``ray``)."""
        run, workers = self.run, cluster.workers(self.options)
        setup = self.setup(workers)
        await self.start_workers(setup, workers, cluster)
        in_flight = self.job.essay_concurrency or auto_essay_concurrency(
            worker_slots(setup.provider, self.ctx.provider), essay_width(run.protocols, len(run.rubric.traits))
        )
        size = self.options.shard_essays or shard_size(
            in_flight, len(plan.todo), workers, self.options.shards_per_worker
        )
        shards = make_shards(run.essays, plan, size)
        info = {**cluster.describe(self.options, workers), "shards": len(shards), "shard_essays": size}
        info["query_embeddings"] = "driver" if self.embed_on_driver else "workers"
        self.store.set_meta("ray", info)
        self.stage(
            f"ray: {workers} workers on {cluster.nodes} node(s) ({info['address']}), "
            f"{len(shards)} shards of up to {size} essays"
        )
        wall0, cpu0 = time.perf_counter(), time.process_time()
        dispatcher = Dispatcher(
            ctx=self.ctx,
            store=self.store,
            plan=plan,
            essays={e.id: e for e in run.essays},
            actors=self.actors,
            prepare=self.prepare(plan),
            max_attempts=self.options.max_attempts,
            shards_per_worker=self.options.shards_per_worker,
            restart_wait_s=self.options.restart_wait_s,
            on_essay_done=run.hooks.on_essay_done,
            keep_scores=keeper(self.store, run.protocols),
            stage=self.stage,
        )
        progress = await dispatcher.run(shards)
        cost = {
            "scoring_s": round(time.perf_counter() - wall0, 3),
            "driver_cpu_s": round(time.process_time() - cpu0, 3),
            "worker_cpu_s": await self.worker_cpu_s(),
        }
        self.store.set_meta("ray", {**info, "redone": progress.redone, **cost})
        return progress


@dataclass(frozen=True)
class RayExecutor:
    """Scores a job on Ray (``ScoreJob.executor``, what ``madrag score --ray`` and ``madrag.score(ray=...)``
    choose); a resumed run hands out only what its store's score rows do not hold."""

    options: RayOptions

    async def __call__(self, run: ScoringRun) -> list[TraitScore]:
        return await score_on_ray(self.options, run)


async def score_on_ray(options: RayOptions, run: ScoringRun) -> list[TraitScore]:
    """Score ``run.essays`` of ``run.job`` on Ray (what :func:`madrag.pipeline.job.execute` runs instead of the
    local runner when the job's executor is a :class:`RayExecutor`); the scores of every essay, in order, as the
    local runner returns. A run whose caller gave a provider object (``run.ready_backend``), which lives in this
    process (workers build their backends from the job's provider spec), is refused."""
    if run.ready_backend:
        raise ConfigError("a Ray run builds its backends on the workers from a provider spec, not a provider object")
    return await RayRun(options, run).score()
