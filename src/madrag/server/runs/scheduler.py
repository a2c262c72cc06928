"""The server's runs scheduled: created, started on the scoring thread, cancelled and resumed here.

:class:`RunManager` ties the parts together: the record of each run (``run.json``,
:class:`~madrag.server.runs.repo.RunRepository`), its live progress (:class:`~madrag.server.runs.events.RunEvents`),
its scores as read back (:class:`~madrag.server.runs.views.RunViews`) and the keys typed in
(:class:`~madrag.server.runs.keys.KeyStore`). A run is the library's scoring job, run on the scoring thread's loop
on the server's shared backend. A new run is accepted by its request and started by a worker in the order runs came
(:mod:`~madrag.server.runs.starter`). A run that was queued or running when the server stopped is listed as
``interrupted`` at the next start and can be resumed: the run store gives back every finished call.

An API key typed into a page or an API call is held in the key store under a name of the run's own
(``MADRAG_SERVE_KEY_<ID>``) and given to the backend's client; the run records that name, never the key.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from pydantic import SecretStr

from madrag.data.essay import Essay
from madrag.errors import MadragError
from madrag.files.disk_errors import storage_error
from madrag.pipeline.job import ScoreJob
from madrag.providers import ProviderSpec
from madrag.providers.address_guard import guarding
from madrag.providers.backends import find_backend, own_options
from madrag.server import access, library
from madrag.server.config import ServerConfig
from madrag.server.http.faults import BadInput, NotFound, WrongState
from madrag.server.http.schemas import BackendSettings, RunStatus
from madrag.server.runs import library_runs, probe, scoring, starter
from madrag.server.runs.backends import BackendPool, SharedBackend
from madrag.server.runs.events import RunEvents
from madrag.server.runs.keys import KeyStore, key_name
from madrag.server.runs.progress import ScheduledTask, ScoringThread
from madrag.server.runs.repo import ACTIVE, KeySource, RunBackend, RunMeta, RunRepository
from madrag.server.runs.responses import ProgressOut, RunOut
from madrag.server.runs.starter import NewRun
from madrag.server.runs.views import RunViews
from madrag.store.writer_lock import held_by

log = logging.getLogger("madrag.server")
CANCEL_WAIT_S = 5.0
"""How long a cancel waits (without blocking the web loop) for the run to record that it stopped."""

__all__ = ["ACTIVE", "NewRun", "RunManager", "RunMeta"]
T = TypeVar("T")


def run_key_env(config: ServerConfig, meta: RunMeta) -> str | None:
    """The name a run's key is read under: its typed key's (held in the key store), else the server's variable
    where that key goes to the run's URL, ``""`` where it does not (:func:`access.env_key`, read anew: a run
    recorded before the rule, or a server restarted with other options, sends no key elsewhere)."""
    if meta.backend.key_source == "memory" and meta.key_env:
        return meta.key_env
    return access.env_key(config, meta.backend.kind, meta.backend.base_url)


class RunManager:
    """Every run of this server: create, start, cancel, resume, progress, and a cache of each run's scores."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.root = config.runs_dir
        self.repo = RunRepository(self.root)
        self.events = RunEvents(
            lambda run_id: self.repo.get(run_id).status, lambda run_id: self.repo.get(run_id).n_essays
        )
        self.views = RunViews(self.repo, self.events)
        self.keys = KeyStore()
        self.worker = ScoringThread()
        self.starter = starter.RunStarter()
        self.backends = BackendPool(config.backend_concurrency)
        self._tasks: dict[str, ScheduledTask] = {}
        self._closing = False

    # -- reading (the repository, progress and views) -------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        """The run's directory; :class:`~madrag.server.http.faults.NotFound` for an unknown or malformed id."""
        return self.repo.run_dir(run_id)

    def meta(self, run_id: str) -> RunMeta:
        return self.repo.get(run_id)

    def rename(self, run_id: str, name: str) -> RunMeta:
        """Give a run a new name (only its description changes)."""
        return self._set(run_id, name=name.strip()[:200] or self.meta(run_id).name)

    def all(self) -> list[RunMeta]:
        """Every run, newest first."""
        return self.repo.all()

    def view(self, run_id: str) -> library_runs.RunView:
        """The run's scores (:class:`~madrag.server.runs.views.RunViews`)."""
        return self.views.view(run_id)

    def describe_run(self, run_id: str) -> RunOut:
        """The run as the API returns it: its description and live progress."""
        snap = self.events.snapshot(run_id)
        progress = None if snap is None else ProgressOut.model_validate(snap)
        return RunOut(**dict(self.repo.get(run_id)), progress=progress)

    def describe(self, run_id: str) -> dict[str, Any]:
        """:meth:`describe_run` as JSON data (the pages' templates)."""
        return self.describe_run(run_id).model_dump(mode="json")

    def _set(self, run_id: str, **fields: object) -> RunMeta:
        """Change the run's description; a new status is told to its subscribers."""
        meta = self.repo.update(run_id, **fields)
        if "status" in fields:
            self.events.status(run_id, meta.status, meta.error)
        return meta

    # -- start-up and shutdown ---------------------------------------------------------------------------
    def recover(self) -> list[str]:
        """Mark runs left queued or running by a stopped server as interrupted (the inputs of one accepted but not
        yet started written out first); resume them with ``auto_resume``. Returns their ids."""
        for folder in starter.pending_in(self.root):
            try:
                starter.expand(folder, self.config.asap_dir)
            except (OSError, ValueError, MadragError) as exc:
                log.warning("the inputs of run %s could not be written: %s", folder.name, exc)
        found = [m.id for m in self.repo.all() if m.status in ACTIVE and not self._written_elsewhere(m.id)]
        for run_id in found:
            self._set(run_id, status="interrupted", error="the server stopped while this run was active")
        if self.config.auto_resume:
            for run_id in found:
                try:
                    self.resume(run_id, None)
                except MadragError as exc:
                    log.warning("run %s not resumed: %s", run_id, exc)
        return found

    def _written_elsewhere(self, run_id: str) -> bool:
        """Another process holds the run directory's writer lock (it is scoring the run): never taken for an
        interrupted run of this server's."""
        holder = held_by(self.repo.folder(run_id))
        if holder is not None and holder != "this process":
            log.warning("run %s is being written by %s; left as it is", run_id, holder)
            return True
        return False

    def close(self) -> None:
        """Stop every run (they become interrupted: resumable at the next start) and the scoring thread."""
        self._closing = True
        for run_id in self.starter.close():
            with contextlib.suppress(NotFound):  # a folder removed meanwhile
                self._set(run_id, status="interrupted", error="the server stopped before this run started")
        self.worker.stop(self.backends.aclose)

    # -- creating and running ------------------------------------------------------------------------------
    def create(self, new: NewRun) -> RunMeta:
        """Accept a new run: keep its inputs as they came and its description (``queued``), and hand its start to
        the worker (:mod:`~madrag.server.runs.starter`); :class:`NotAllowed` first, before anything is written,
        for a model server the operator did not allow (:func:`access.check_address`)."""
        access.check_address(self.config, new.backend.base_url)
        run_id = self.repo.new_id()
        accepted = starter.QueuedInputs(rubric=new.rubric, essays=new.essays, pool=new.pool, eval_fold=new.eval_fold)
        starter.accept(self.repo.folder(run_id), accepted)  # before run.json: a listed run has its inputs
        key_env, source = self._hold_key(run_id, new.backend)
        eval_fold = new.eval_fold if new.pool == "folds" else None
        scored = sum(eval_fold is None or e.fold == eval_fold for e in new.essays)
        meta = RunMeta(
            id=run_id,
            kind=new.kind,
            name=new.name or f"{new.rubric.name or 'rubric'}: {len(new.essays)} essays",
            rubric_name=new.rubric.name,
            protocols=new.protocols,
            grading_protocol=new.grading_protocol or (new.protocols[0] if len(new.protocols) == 1 else None),
            pool=new.pool,
            eval_fold=eval_fold,
            backend=RunBackend.of(new.backend, source),
            key_env=key_env,
            n_essays=min(scored, new.limit) if new.limit else scored,
            n_traits=len(new.rubric.traits),
            **new.refused.fields(),
            limit=new.limit,
            planned_essays=new.planned,
            price=new.price,
            settings=scoring.recorded(new.settings),
        )
        self.repo.save(meta)
        self.events.begin(run_id)
        self.starter.submit(
            run_id, lambda: self._begin(run_id, accepted, new.pool_essays), lambda exc: self._not_started(run_id, exc)
        )
        return meta

    def _begin(self, run_id: str, accepted: starter.QueuedInputs, pool: list[Essay] | None) -> None:
        """On the starter's worker: the run's inputs written out, then its job scheduled unless it was stopped
        meanwhile."""
        starter.expand(self.repo.folder(run_id), self.config.asap_dir, accepted, pool)
        meta = self.repo.get(run_id)
        if meta.status == "queued":
            self.starter.claim(run_id, lambda: self._schedule(meta))

    def _not_started(self, run_id: str, exc: Exception) -> None:
        """A run whose start failed (its inputs could not be written, its job not built) is recorded as failed."""
        if isinstance(exc, OSError):
            exc = storage_error(exc, "the run's inputs")
        error = str(exc) if isinstance(exc, MadragError) else f"internal error ({type(exc).__name__})"
        self._set(run_id, status="failed", error=error, finished_at=time.time())

    def _hold_key(self, run_id: str, backend: BackendSettings) -> tuple[str | None, KeySource]:
        """(the name the run's key is under, where it comes from): a typed key goes into the key store (it goes
        to the run's URL only: a run's URL never changes); without one, the server environment's variable for the
        run's kind where that key goes to the run's URL (:func:`access.env_key`), else none."""
        if not find_backend(backend.kind).traits.needs_key:
            return None, "none"
        if backend.api_key is not None and backend.api_key.get_secret_value():
            name = key_name(run_id)
            self.keys.put(name, backend.api_key)
            return name, "memory"
        key_env = access.env_key(self.config, backend.kind, backend.base_url)
        return (key_env, "server-env") if key_env else (None, "none")

    def _spec(self, meta: RunMeta) -> ProviderSpec:
        """The library's description of the run's backend (the name of its key, never the key)."""
        b, c = meta.backend, self.config
        # the server's settings, then the run's; of them, those its kind reads
        offered: dict[str, object] = {"slots": c.slots, "runtime": c.runtime, "model_path": c.model_path or None}
        offered |= {"fake_latency_s": b.fake_latency_s, "logprobs": b.logprobs is not False, **b.options}
        extra = own_options(b.kind, offered)
        key_env = run_key_env(c, meta)
        return library.provider_spec(b.kind, b.model, b.base_url, key_env, b.concurrency, **extra)

    def job(self, meta: RunMeta) -> ScoreJob:
        """The library's scoring job of a run (from its inputs and description)."""
        run_dir = self.repo.folder(meta.id)
        inputs = library.JobInputs(
            run_dir / "inputs" / "essays.jsonl", run_dir / "inputs" / "rubric.json", meta.eval_fold
        )
        settings = scoring.of_run(meta)
        cache, embedder = self.config.cache_dir, self.config.embedder
        return library.make_job(
            run_dir, inputs, meta.protocols, self._spec(meta), settings, cache, meta.limit, embedder
        )

    def _backend(self, meta: RunMeta, job: ScoreJob) -> SharedBackend:
        """The server's shared backend for the run, with the run's typed key when it has one."""
        key = self._typed_key(meta)
        return self.backends.get(job.provider, key, self.keys.version(meta.key_env) if key else 0)

    def _typed_key(self, meta: RunMeta) -> SecretStr | None:
        """The key typed with the run (held in memory), if it has one."""
        return self.keys.get(meta.key_env) if meta.backend.key_source == "memory" else None

    def _schedule(self, meta: RunMeta) -> None:
        job = self.job(meta)
        task = self.worker.schedule(
            self._guarded(lambda: self._execute(meta.id, job)), on_end=lambda: self._settle(meta.id)
        )
        self._tasks[meta.id] = task

    async def _guarded(self, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``work()``, each connection it makes put to the server's address rules when the HTTP client connects
        (:func:`access.connect_problem`; checked before, too: :func:`access.check_address`); made only here, so a
        task cancelled before it starts leaves no coroutine behind."""
        with guarding(functools.partial(access.connect_problem, self.config)):
            return await work()

    def _settle(self, run_id: str) -> None:
        """After the run's task ended: a run cancelled before it started is recorded as stopped too."""
        if self.repo.get(run_id).status in ACTIVE:
            self._set(run_id, status=self._stopped(), finished_at=time.time())

    def _stopped(self) -> RunStatus:
        return "interrupted" if self._closing else "cancelled"

    async def _execute(self, run_id: str, job: ScoreJob) -> None:
        started = time.monotonic()
        self._set(run_id, status="running", error=None, finished_at=None)
        self.events.start_live(run_id)
        try:
            # again just before the first request: the server's options, or a name's address, may have changed
            await asyncio.to_thread(access.check_address, self.config, self.repo.get(run_id).backend.base_url)
            job, meta = await self._settle_backend(run_id, job)
            hooks = self.events.hooks(run_id)
            # the run's final scores are kept as its store's rows by the library's runner (pipeline/final_scores)
            _scores, failed_calls = await library.run_job(job, hooks, self._backend(meta, job))
        except asyncio.CancelledError:
            elapsed = time.monotonic() - started
            self._set(run_id, status=self._stopped(), finished_at=time.time(), elapsed_s=elapsed)
            raise
        except MadragError as exc:
            self._set(run_id, status="failed", error=str(exc), finished_at=time.time())
        except Exception as exc:  # a bug must not take the server down; the log has the traceback
            log.exception("run %s failed", run_id)
            self._set(run_id, status="failed", error=f"internal error ({type(exc).__name__})", finished_at=time.time())
        else:
            self._finish(run_id, started, failed_calls)

    async def _settle_backend(self, run_id: str, job: ScoreJob) -> tuple[ScoreJob, RunMeta]:
        """Test an OpenAI-compatible backend whose logprobs are not known before the first call (not fail in
        it); the job and description with the answer."""
        meta = self.repo.get(run_id)
        if not probe.needs_probe(meta.backend):
            return job, meta
        prog = self.events.of(run_id)
        prog.change({"type": "stage", "message": "testing the backend"}, stage="testing the backend")
        key_env = run_key_env(self.config, meta)
        limiter = self.backends.limiter_for(meta.backend.kind, meta.backend.base_url)
        tested = await probe.settle(meta.backend, key_env, self._typed_key(meta), slot=limiter.slot)
        meta = self._set(run_id, backend=tested)
        prog.change({"type": "stage", "message": tested.tested}, stage=tested.tested or "")
        return self.job(meta), meta

    def _finish(self, run_id: str, started: float, failed_calls: int) -> None:
        meta = self.repo.get(run_id)
        elapsed = time.monotonic() - started
        setup_s = self.events.scoring_from.get(run_id, started) - started
        estimate = self._estimate(meta, elapsed, setup_s) if meta.kind == "estimate" else None
        self._set(
            run_id,
            status="finished",
            finished_at=time.time(),
            elapsed_s=elapsed,
            estimate=estimate,
            failed_calls=failed_calls,
        )

    def _estimate(self, meta: RunMeta, elapsed_s: float, setup_s: float = 0.0) -> dict[str, object]:
        """The library's estimate from this sample run, with the time at the sample's pace: the one-time set-up
        (the exemplar index built, the model loaded) apart from the time per essay."""
        planned = meta.planned_essays or meta.n_essays
        found = library.estimate(self.repo.folder(meta.id), planned, meta.n_traits, meta.price)
        per_essay = max(0.0, elapsed_s - setup_s) / max(1, meta.n_essays)
        time_s = setup_s + per_essay * planned
        return found | {"setup_s": setup_s, "per_essay_s": per_essay, "time_s": time_s, "sample_essays": meta.n_essays}

    # -- cancel, resume, wait ----------------------------------------------------------------------------------
    def stop(self, run_id: str) -> concurrent.futures.Future[None]:
        """Ask a queued or running run to stop and return at once (:class:`WrongState` when it is not active);
        the future of its end, to wait for. A run the starter has not started yet is never started."""
        meta = self.repo.get(run_id)
        if meta.status == "queued" and self.starter.withdraw(run_id, lambda: run_id in self._tasks):
            self._set(run_id, status=self._stopped(), finished_at=time.time())
            ended: concurrent.futures.Future[None] = concurrent.futures.Future()
            ended.set_result(None)
            return ended
        task = self._tasks.get(run_id)
        if meta.status not in ACTIVE or task is None or task.done():
            raise WrongState(f"run {run_id} is not running (status {meta.status})")
        task.cancel()
        return task.ended

    async def cancel(self, run_id: str) -> RunMeta:
        """Stop a queued or running run (finished calls stay; it can be resumed). Waits, without blocking the
        event loop, at most :data:`CANCEL_WAIT_S` for the run to record that it stopped."""
        ended = self.stop(run_id)
        await asyncio.wait([asyncio.wrap_future(ended)], timeout=CANCEL_WAIT_S)
        return self.repo.get(run_id)

    def resume(self, run_id: str, api_key: SecretStr | None) -> RunMeta:
        """Continue an interrupted, cancelled or failed run, or a finished one with failed calls (which are
        retried); the run store skips every finished call."""
        meta = self.repo.get(run_id)
        if meta.status in ACTIVE:
            raise WrongState(f"run {run_id} is already {meta.status}")
        if meta.status == "finished" and not meta.failed_calls:
            raise WrongState(f"run {run_id} has finished; there is nothing to resume")
        access.check_address(self.config, meta.backend.base_url)
        typed = api_key is not None and bool(api_key.get_secret_value())
        if meta.backend.key_source == "memory" and meta.key_env and meta.key_env not in self.keys and not typed:
            raise BadInput("this run's API key was only in memory before a restart: give it again", "api_key")
        if api_key is not None and typed and meta.key_env:
            self.keys.put(meta.key_env, api_key)
        meta = self._set(run_id, status="queued", error=None)
        self.events.begin(run_id)
        self._schedule(meta)
        return meta

    async def test_backend(
        self, kind: str, model: str, base_url: str | None, key_env: str | None, api_key: SecretStr | None
    ) -> probe.ProbeResult:
        """:func:`probe.probe` of the ``kind`` backend at ``base_url``, sent from the scoring loop in slots of
        its server's limit, as every call of a run is (tests never put more than ``backend_concurrency``
        requests in flight)."""
        limiter = self.backends.limiter_for(kind, base_url)

        async def checked() -> probe.ProbeResult:  # on the scoring loop, just before the request
            await asyncio.to_thread(access.check_address, self.config, base_url)
            return await probe.probe(model, base_url, key_env, api_key, slot=limiter.slot)

        return await asyncio.wrap_future(self.worker.submit(self._guarded(checked)))

    def ended(self, run_id: str) -> asyncio.Future[None] | None:
        """A future (of the calling loop) done when the run's task has ended (after the starter started it); None
        when it never ran here. Cancelling it (a timeout) leaves the run alone: :meth:`stop` stops it."""
        pending = self.starter.pending(run_id)
        if pending is None and run_id not in self._tasks:
            return None

        async def after_start() -> None:
            if pending is not None:
                await asyncio.wrap_future(pending)
            task = self._tasks.get(run_id)
            if task is not None:
                await asyncio.wrap_future(task.ended)

        return asyncio.shield(asyncio.ensure_future(after_start()))

    def wait(self, run_id: str, timeout: float | None = None) -> None:
        """Block until the run's task ends (tests, scripts)."""
        pending = self.starter.pending(run_id)
        if pending is not None:
            concurrent.futures.wait([pending], timeout)
        task = self._tasks.get(run_id)
        if task is not None:
            concurrent.futures.wait([task.ended], timeout)
