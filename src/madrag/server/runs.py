"""The server's runs: each in its own run directory under ``<data_dir>/runs/<id>/``, started, watched,
cancelled and resumed here, scored by the library's job on the scoring thread.

A run directory holds the library's run store (``store.sqlite``), the inputs the job reads (``inputs/``), the
teacher's reviews (``reviews.sqlite``) and the server's description of the run (``run.json``: name, status,
backend without any key, counts). A run that was queued or running when the server stopped is listed as
``interrupted`` at the next start and can be resumed: the run store gives back every finished call.

An API key typed into a page or an API call is put into this process's environment under a name of the run's
own (``MADRAG_SERVE_KEY_<ID>``) and nowhere else; the run records that name, never the key.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr

from madrag.data.essay import Essay
from madrag.errors import MadragError
from madrag.protocols.base import TraitScore
from madrag.records import AgentRecord
from madrag.rubric import Rubric
from madrag.server import library, library_runs, probe
from madrag.server.backends import BackendPool
from madrag.server.config import ServerConfig
from madrag.server.errors import ApiError
from madrag.server.progress import Progress, ScoringThread
from madrag.server.refusals import Refusals, RefusedFields
from madrag.server.schemas import BackendSettings, RunKind, RunStatus
from madrag.settings import ScoringSettings

log = logging.getLogger("madrag.server")
_RUN_ID = re.compile(r"^[a-z0-9]{6,40}$")
ACTIVE = ("queued", "running")


class RunMeta(RefusedFields):
    """What the server keeps about a run in ``run.json`` (no key, ever); the refused input rows summarised."""

    id: str
    kind: RunKind = "run"
    name: str = ""
    created_at: float = Field(default_factory=time.time)
    finished_at: float | None = None
    status: RunStatus = "queued"
    error: str | None = None
    rubric_name: str = ""
    protocols: list[str]
    pool: str
    eval_fold: int | None
    backend: dict[str, Any]
    key_env: str | None = None
    n_essays: int
    n_traits: int
    limit: int | None = None
    planned_essays: int | None = None
    price: tuple[float, float] | None = None
    estimate: dict[str, Any] | None = None
    elapsed_s: float | None = None
    # calls of the last session that got no answer after their retries (failed records; their essay-traits have
    # no score): a finished run with some can be resumed, which retries exactly those
    failed_calls: int = 0


def backend_info(backend: BackendSettings, key_source: str) -> dict[str, Any]:
    """The backend as a run describes it: its settings and where its key comes from, never the key."""
    info = backend.model_dump(exclude={"api_key"})
    info["key_source"] = key_source
    return info


class RunManager:
    """Every run of this server: create, start, cancel, resume, progress, and a cache of each run's scores."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.root = config.runs_dir
        self.root.mkdir(parents=True, exist_ok=True)
        self.worker = ScoringThread()
        self.backends = BackendPool(config.backend_concurrency)
        self.progress: dict[str, Progress] = {}
        self._futures: dict[str, concurrent.futures.Future[None]] = {}
        self._views: dict[str, tuple[object, library_runs.RunView]] = {}
        self._live: dict[str, dict[tuple[str, str, str], TraitScore]] = {}
        self._closing = False
        self._lock = threading.Lock()

    # -- files -------------------------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        """The run's directory; 404 for an unknown or malformed id."""
        if not _RUN_ID.match(run_id) or not (self.root / run_id / "run.json").is_file():
            raise ApiError(404, f"no run {run_id!r}", "run_id")
        return self.root / run_id

    def meta(self, run_id: str) -> RunMeta:
        return RunMeta.model_validate_json((self.run_dir(run_id) / "run.json").read_text(encoding="utf-8"))

    def _save(self, meta: RunMeta) -> None:
        folder = self.root / meta.id
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / "run.json.tmp"
        tmp.write_text(meta.model_dump_json(indent=2), encoding="utf-8")
        tmp.replace(folder / "run.json")

    def _update(self, run_id: str, **fields: Any) -> RunMeta:
        with self._lock:
            meta = self.meta(run_id).model_copy(update=fields)
            self._save(meta)
        if "status" in fields:
            prog = self.progress_of(run_id)
            prog.set(status=fields["status"])
            prog.emit({"type": "status", "status": fields["status"], "error": meta.error})
        return meta

    def rename(self, run_id: str, name: str) -> RunMeta:
        """Give a run a new name (only its description changes)."""
        return self._update(run_id, name=name.strip()[:200] or self.meta(run_id).name)

    def all(self) -> list[RunMeta]:
        """Every run, newest first."""
        metas = []
        for path in self.root.glob("*/run.json"):
            try:
                metas.append(RunMeta.model_validate_json(path.read_text(encoding="utf-8")))
            except ValueError:
                log.warning("unreadable run description %s", path)
        return sorted(metas, key=lambda m: m.created_at, reverse=True)

    def progress_of(self, run_id: str) -> Progress:
        if run_id not in self.progress:
            self.progress[run_id] = Progress(run_id, status=self.meta(run_id).status)
        return self.progress[run_id]

    # -- start-up and shutdown ---------------------------------------------------------------------------
    def recover(self) -> list[str]:
        """Mark runs left queued or running by a stopped server as interrupted; resume them with
        ``auto_resume``. Returns their ids."""
        found = [m.id for m in self.all() if m.status in ACTIVE]
        for run_id in found:
            self._update(run_id, status="interrupted", error="the server stopped while this run was active")
        if self.config.auto_resume:
            for run_id in found:
                try:
                    self.resume(run_id, None)
                except ApiError as exc:
                    log.warning("run %s not resumed: %s", run_id, exc.message)
        return found

    def close(self) -> None:
        """Stop every run (they become interrupted: resumable at the next start) and the scoring thread."""
        self._closing = True
        self.worker.stop(self.backends.aclose)

    # -- keys ----------------------------------------------------------------------------------------------
    def _key(self, run_id: str, backend: BackendSettings, key: SecretStr | None) -> tuple[str | None, str]:
        """(name of the environment variable holding the key, where the key comes from)."""
        if backend.kind != "openai":
            return None, "none"
        if key is not None and key.get_secret_value():
            name = f"MADRAG_SERVE_KEY_{run_id.upper()}"
            os.environ[name] = key.get_secret_value()
            return name, "memory"
        return self.config.api_key_env, "server-env"

    # -- creating and running ------------------------------------------------------------------------------
    def create(
        self,
        *,
        kind: RunKind,
        name: str,
        rubric: Rubric,
        essays: list[Essay],
        refused: Refusals,
        protocols: list[str],
        pool: library.PoolMode,
        pool_essays: list[Essay] | None,
        eval_fold: int,
        backend: BackendSettings,
        limit: int | None = None,
        planned: int | None = None,
        price: tuple[float, float] | None = None,
    ) -> RunMeta:
        """Write a new run's inputs and description and start it."""
        run_id = uuid.uuid4().hex[:12]
        run_dir = self.root / run_id
        inputs = library.write_inputs(run_dir, rubric, essays, pool, pool_essays, eval_fold)
        key_env, source = self._key(run_id, backend, backend.api_key)
        scored = len([e for e in essays if inputs.eval_fold is None or e.fold == inputs.eval_fold])
        if pool == "asap":
            scored = len(essays)
        meta = RunMeta(
            id=run_id,
            kind=kind,
            name=name or f"{rubric.name or 'rubric'}: {len(essays)} essays",
            rubric_name=rubric.name,
            protocols=protocols,
            pool=pool,
            eval_fold=inputs.eval_fold,
            backend=backend_info(backend, source),
            key_env=key_env,
            n_essays=min(scored, limit) if limit else scored,
            n_traits=len(rubric.traits),
            **refused.fields(),
            limit=limit,
            planned_essays=planned,
            price=price,
        )
        self._save(meta)
        self._start(meta)
        return meta

    def job(self, meta: RunMeta) -> Any:
        """The library's scoring job of a run (from its inputs and description)."""
        run_dir = self.root / meta.id
        inputs = library.JobInputs(
            run_dir / "inputs" / "essays.jsonl", run_dir / "inputs" / "rubric.json", meta.eval_fold
        )
        b = meta.backend
        extra: dict[str, Any] = {"slots": self.config.slots}
        if b["kind"] == "llamacpp" and self.config.model_path:
            extra["model_path"] = self.config.model_path
        if b["kind"] == "fake":
            extra["fake_latency_s"] = b.get("fake_latency_s", 0.0)
        if b["kind"] == "openai":
            extra["logprobs"] = b.get("logprobs") is not False
        spec = library.provider_spec(
            b["kind"],
            b.get("model"),
            b.get("base_url"),
            meta.key_env or self.config.api_key_env,
            b.get("concurrency"),
            **extra,
        )
        tokens = int(b.get("max_tokens", 400))
        settings = ScoringSettings(debater_max_tokens=tokens, judge_max_tokens=tokens)
        limit = meta.limit
        cache = self.config.cache_dir
        return library.make_job(run_dir, inputs, meta.protocols, spec, settings, cache, limit, self.config.embedder)

    def _start(self, meta: RunMeta) -> None:
        prog = Progress(meta.id, status="queued")
        self.progress[meta.id] = prog
        job = self.job(meta)
        self._futures[meta.id] = self.worker.submit(self._execute(meta.id, job))

    async def _execute(self, run_id: str, job: Any) -> None:
        prog = self.progress_of(run_id)
        started = time.monotonic()
        scoring_from: list[float] = []  # when the one-time set-up (index build, model load) was done
        self._update(run_id, status="running", error=None, finished_at=None)
        hooks = library.Hooks(
            on_record=lambda r: self._on_record(prog, r),
            on_essay_done=lambda e, s: self._on_essay(run_id, prog, e, s),
            on_stage=lambda m: prog.change({"type": "stage", "message": m}, stage=m),
            on_start=lambda n: self._on_start(prog, n, scoring_from),
            on_bank_progress=lambda done, total: self._on_bank(prog, done, total),
            on_failed=lambda r: self._on_failed(prog, r),
        )
        with self._lock:
            self._live[run_id] = {}
        try:
            meta = self.meta(run_id)
            if probe.needs_probe(meta.backend):  # find out before the first call, not fail in it
                prog.change({"type": "stage", "message": "testing the backend"}, stage="testing the backend")
                tested = await probe.settle(meta.backend, meta.key_env or self.config.api_key_env)
                meta = self._update(run_id, backend=tested)
                prog.change({"type": "stage", "message": meta.backend["tested"]}, stage=meta.backend["tested"])
                job = self.job(meta)
            scores, failed_calls = await library.run_job(job, hooks, self.backends.get(job.provider))
            run_dir = self.root / run_id
            await asyncio.to_thread(library_runs.save_index, run_dir, scores, library_runs.record_count(run_dir))
        except asyncio.CancelledError:
            status = "interrupted" if self._closing else "cancelled"
            self._update(run_id, status=status, finished_at=time.time(), elapsed_s=time.monotonic() - started)
            raise
        except MadragError as exc:
            self._update(run_id, status="failed", error=str(exc), finished_at=time.time())
        except Exception as exc:  # a bug must not take the server down; the log has the traceback
            log.exception("run %s failed", run_id)
            self._update(
                run_id, status="failed", error=f"internal error ({type(exc).__name__})", finished_at=time.time()
            )
        else:
            meta = self.meta(run_id)
            elapsed = time.monotonic() - started
            setup_s = (scoring_from[0] if scoring_from else started) - started
            estimate = self._estimate(meta, elapsed, setup_s) if meta.kind == "estimate" else None
            self._update(
                run_id,
                status="finished",
                finished_at=time.time(),
                elapsed_s=elapsed,
                estimate=estimate,
                failed_calls=failed_calls,
            )

    def _estimate(self, meta: RunMeta, elapsed_s: float, setup_s: float = 0.0) -> dict[str, Any]:
        """The library's estimate from this sample run, with the time at the sample's pace: the one-time set-up
        (the exemplar index built, the model loaded) apart from the time per essay."""
        planned = meta.planned_essays or meta.n_essays
        found = library.estimate(self.root / meta.id, planned, meta.n_traits, meta.price)
        per_essay = max(0.0, elapsed_s - setup_s) / max(1, meta.n_essays)
        found["setup_s"] = setup_s
        found["per_essay_s"] = per_essay
        found["time_s"] = setup_s + per_essay * planned
        found["sample_essays"] = meta.n_essays
        return found

    @staticmethod
    def _on_start(prog: Progress, total: int, scoring_from: list[float]) -> None:
        scoring_from.append(time.monotonic())
        prog.change({"type": "start", "total": total}, total=total)

    @staticmethod
    def _on_bank(prog: Progress, done: int, total: int) -> None:
        stage = f"building the exemplar index: {done:,} of {total:,} pool essays embedded"
        prog.change({"type": "bank", "done": done, "total": total, "message": stage}, stage=stage)

    @staticmethod
    def _on_record(prog: Progress, record: AgentRecord) -> None:
        prog.count_record()
        done: list[tuple[str, str, str]] = []
        score = None if record.score is None else record.score.reported
        if record.role == "judge":
            if record.trait == "*":
                done = [(record.protocol, record.essay_id, t) for t in (record.trait_scores or {})]
            else:
                done = [(record.protocol, record.essay_id, record.trait)]
        event = {
            "type": "record",
            "essay_id": record.essay_id,
            "trait": record.trait,
            "role": record.role,
            "protocol": record.protocol,
            "score": score,
            "key": record.key,
            "stored_at": record.created_at,
        }
        prog.emit(event, done)

    @staticmethod
    def _on_failed(prog: Progress, record: AgentRecord) -> None:
        prog.count_failed()
        event = {"type": "failed", "essay_id": record.essay_id, "trait": record.trait, "role": record.role}
        prog.emit({**event, "error": record.error})

    def _on_essay(self, run_id: str, prog: Progress, essay: Essay, scores: list[TraitScore]) -> None:
        with self._lock:
            self._live[run_id].update({(s.protocol, s.essay_id, s.trait): s for s in scores})
        cells = {f"{s.protocol}|{s.trait}": s.score for s in scores}
        prog.emit(
            {"type": "essay", "essay_id": essay.id, "scores": cells},
            [(s.protocol, s.essay_id, s.trait) for s in scores],
        )

    def cancel(self, run_id: str) -> RunMeta:
        """Stop a queued or running run (finished calls stay; it can be resumed); 409 when it is not active."""
        meta = self.meta(run_id)
        future = self._futures.get(run_id)
        if meta.status not in ACTIVE or future is None or future.done():
            raise ApiError(409, f"run {run_id} is not running (status {meta.status})")
        future.cancel()
        try:
            future.result(timeout=0)
        except (concurrent.futures.CancelledError, concurrent.futures.TimeoutError):
            pass
        deadline = time.monotonic() + 5
        while self.meta(run_id).status in ACTIVE and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.meta(run_id)

    def resume(self, run_id: str, api_key: SecretStr | None) -> RunMeta:
        """Continue an interrupted, cancelled or failed run, or a finished one with failed calls (which are
        retried); the run store skips every finished call."""
        meta = self.meta(run_id)
        if meta.status in ACTIVE:
            raise ApiError(409, f"run {run_id} is already {meta.status}")
        if meta.status == "finished" and not meta.failed_calls:
            raise ApiError(409, f"run {run_id} has finished; there is nothing to resume")
        if meta.backend.get("key_source") == "memory" and meta.key_env and not os.environ.get(meta.key_env):
            if api_key is None or not api_key.get_secret_value():
                raise ApiError(400, "this run's API key was only in memory before a restart: give it again", "api_key")
        if api_key is not None and api_key.get_secret_value() and meta.key_env:
            os.environ[meta.key_env] = api_key.get_secret_value()
        meta = self._update(run_id, status="queued", error=None)
        self._start(meta)
        return meta

    def wait(self, run_id: str, timeout: float | None = None) -> None:
        """Block until the run's task ends (tests, the single-essay call)."""
        future = self._futures.get(run_id)
        if future is not None:
            concurrent.futures.wait([future], timeout)

    def future(self, run_id: str) -> concurrent.futures.Future[None] | None:
        return self._futures.get(run_id)

    # -- reading -------------------------------------------------------------------------------------------
    def view(self, run_id: str) -> library_runs.RunView:
        """The run's scores. A run scoring in this process shows the scores of its finished essays (the
        library's, as each essay completes); any other run is read through its score index, built once by the
        library's run reader when missing or stale."""
        run_dir = self.run_dir(run_id)
        if not (run_dir / "store.sqlite").is_file():
            raise ApiError(409, f"run {run_id} has not stored anything yet")
        status = self.progress[run_id].snapshot()["status"] if run_id in self.progress else self.meta(run_id).status
        cached = self._views.get(run_id)
        if status in ACTIVE and run_id in self._live:
            with self._lock:
                live = list(self._live[run_id].values())
            version: object = ("live", len(live))
            if cached is None or cached[0] != version:
                cached = (version, library_runs.view_of(run_dir, live))
                self._views[run_id] = cached
            return cached[1]
        count = library_runs.record_count(run_dir)
        if cached is not None and cached[0] == count:
            return cached[1]
        scores = library_runs.load_index(run_dir, count)
        if scores is not None:
            view = library_runs.view_of(run_dir, scores)
        else:
            view = library_runs.read_run(run_dir)
            if status == "finished":
                library_runs.save_index(run_dir, view.scores, count)
        self._views[run_id] = (count, view)
        return view

    def describe(self, run_id: str) -> dict[str, Any]:
        """The run as the API returns it: description and live progress."""
        meta = self.meta(run_id)
        progress = self.progress[run_id].snapshot() if run_id in self.progress else None
        return {**json.loads(meta.model_dump_json()), "progress": progress}
