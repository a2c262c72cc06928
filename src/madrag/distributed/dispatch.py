"""The driver's side of a distributed run: hand shards to workers, write what they stream, redo lost shards.

Each worker has ``shards_per_worker`` slots; a slot takes the next shard from the queue, calls the worker's
streaming ``score`` and, batch by batch, commits the records to the run store (the driver is its only writer;
records that arrive together share a commit, and a record whose key is already stored is dropped) and reports
finished essays. A worker that dies, or whose node does, loses only its shards in flight: each goes back to
the queue (less the essays already finished) and is handed out again with the records stored so far, up to
``max_attempts`` times; the slot waits for its worker to be restarted, or ends if it is gone for good. Any
other error in a worker stops the run as it would locally: the pending work is cancelled and every record
already written stays.

A call that fails after its retries arrives as a failed record (its key holds ``|failed|``) and the shard goes
on; the driver counts the failed calls into the run's statistics and its failure budget (``--max-failures``,
cluster-wide). Once the budget is spent no shard is handed out any more, the workers are told to start no new
call (``halt``), the shards in flight finish what they have started, and :meth:`Dispatcher.run` returns (the
driver then raises :class:`~madrag.errors.TooManyFailures`).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from madrag.agents.calls import CallContext
from madrag.data.essay import Essay
from madrag.distributed.cluster import import_ray
from madrag.distributed.shard import Plan, Shard
from madrag.errors import MadragError
from madrag.pipeline.final_scores import KeepScores
from madrag.protocols.base import TraitScore
from madrag.protocols.concurrency import gather_or_cancel
from madrag.records import FAILED_MARK, AgentRecord
from madrag.store import RunStore
from madrag.store.writer import Row

EssayDone = Callable[[Essay, list[TraitScore]], None]
Prepare = Callable[[Shard], Any]  # fills a shard's known records and query vectors before it is handed out


class WorkerLost(Exception):
    """A worker (or its node) died while scoring a shard."""


@dataclass
class Progress:
    """What the workers have reported so far."""

    scores: dict[str, list[TraitScore]] = field(default_factory=dict)  # essay id -> its new scores
    reused: int = 0
    cached: int = 0  # calls made by the workers answered from the response cache
    failed_scores: int = 0
    failed_calls: int = 0
    redone: int = 0
    shards_done: int = 0


def lost_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors that mean a worker or its node (not the scoring) failed: the shard is redone."""
    ex = import_ray().exceptions
    return (ex.RayActorError, ex.WorkerCrashedError, ex.ObjectLostError, ex.NodeDiedError, ex.OutOfMemoryError)


def task_cause(exc: BaseException) -> BaseException:
    """The worker's own exception inside a Ray task error (a MadragError stays one), else ``exc``."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


@dataclass
class Dispatcher:
    """Shards in, records to the store, scores out (see the module docstring)."""

    ctx: CallContext
    store: RunStore
    plan: Plan
    essays: dict[str, Essay]
    actors: list[Any]
    prepare: Prepare
    max_attempts: int
    shards_per_worker: int
    restart_wait_s: float
    on_essay_done: EssayDone | None = None
    keep_scores: KeepScores | None = None  # an essay's final scores kept as the run's rows, before it is reported
    stage: Callable[[str], None] = lambda _msg: None
    progress: Progress = field(default_factory=Progress)
    _queue: deque[Shard] = field(default_factory=deque)
    _open: int = 0
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _halted: bool = False

    @property
    def stopping(self) -> bool:
        """Whether the run's failure budget is spent (no shard is handed out any more)."""
        return self.ctx.failures is not None and self.ctx.failures.spent

    async def run(self, shards: list[Shard]) -> Progress:
        """Score every shard; returns when all are done (or raises what stopped the run)."""
        self._queue.extend(shards)
        self._open = len(shards)
        slots = [self._slot(i) for i in range(len(self.actors)) for _ in range(self.shards_per_worker)]
        await gather_or_cancel(*slots)
        if self._open and not self.stopping:
            raise MadragError(f"every Ray worker was lost; {self._open} shard(s) left (run the command again)")
        return self.progress

    async def _next(self) -> Shard | None:
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._queue) or self._open == 0 or self.stopping)
            return self._queue.popleft() if self._queue and not self.stopping else None

    async def _finish(self, shard: Shard | None) -> None:
        async with self._changed:
            if shard is None:
                self._open -= 1
                self.progress.shards_done += 1
            else:
                self._queue.appendleft(shard)
            self._changed.notify_all()

    async def _slot(self, worker: int) -> None:
        actor = self.actors[worker]
        while (shard := await self._next()) is not None:
            try:
                await self._score(actor, shard)
            except WorkerLost as lost:
                await self._finish(self._redo(shard, worker, lost))
                if not await self._wait_for(actor):
                    self.stage(f"ray: worker {worker} is gone; its slot is closed")
                    return
                continue
            await self._finish(None)

    def _redo(self, shard: Shard, worker: int, lost: WorkerLost) -> Shard | None:
        """What is left of a lost shard, to hand out again (None: every essay had finished)."""
        left = [e for e in shard.essays if e.id not in self.progress.scores]
        if not left:
            return None
        if shard.attempt >= self.max_attempts:
            raise MadragError(
                f"shard {shard.index} was lost {shard.attempt} times (last: {lost}); stopping "
                "(every finished call is saved: run the command again to resume)"
            )
        self.progress.redone += 1
        self.stage(f"ray: worker {worker} lost ({lost}); shard {shard.index} goes out again ({len(left)} essays)")
        return Shard(shard.index, left, {e.id: shard.todo[e.id] for e in left}, attempt=shard.attempt + 1)

    async def _wait_for(self, actor: Any) -> bool:
        """Wait until a lost worker answers again (Ray restarts it); False once it is gone for good."""
        ray = import_ray()
        deadline = time.monotonic() + self.restart_wait_s
        while time.monotonic() < deadline:
            try:
                await actor.hello.remote()
                return True
            except ray.exceptions.ActorDiedError:
                return False
            except lost_errors():
                await asyncio.sleep(0.5)
        return False

    async def _score(self, actor: Any, shard: Shard) -> None:
        ray = import_ray()
        lost = lost_errors()
        await self.prepare(shard)
        try:
            async for ref in actor.score.remote(shard):
                await self._absorb(await ref)
        except ray.exceptions.RayTaskError as exc:
            cause = task_cause(exc)
            if isinstance(cause, lost):
                raise WorkerLost(type(cause).__name__) from exc
            raise cause from None
        except lost as exc:
            raise WorkerLost(type(exc).__name__) from exc

    async def _absorb(self, batch: list[tuple[str, Any]]) -> None:
        """Commit a batch's records (one group commit), then report the essays it finished, in order."""
        pending: list[tuple[Row, str]] = []
        for kind, payload in batch:
            if kind == "record":
                pending.append(payload)
                continue
            await self._commit(pending)
            pending = []
            if kind == "essay":
                if self.keep_scores is not None:
                    await self.keep_scores(payload[1])
                self._essay_done(*payload)
            elif kind == "done":
                self.progress.reused += int(payload.get("reused", 0))
                self.progress.cached += int(payload.get("cached", 0))
                self.progress.failed_scores += int(payload.get("failed_scores", 0))
        await self._commit(pending)
        if self.stopping and not self._halted:
            await self._halt()

    async def _halt(self) -> None:
        """The budget is spent: wake the idle slots (they end) and tell every worker to start no new call."""
        self._halted = True
        async with self._changed:
            self._changed.notify_all()
        self.stage("ray: the failure budget is spent; no new calls start, the calls in flight finish")
        for actor in self.actors:
            try:
                actor.halt.remote()
            except Exception:  # a lost worker: its shard is not redone anyway
                continue

    async def _commit(self, records: list[tuple[Row, str]]) -> None:
        """Write the rows as the workers serialised them (no parsing here: the driver's time per record is
        what bounds a cluster); progress callbacks get the light copy of each new record."""
        if not records:
            return
        inserted = await asyncio.gather(*(self.store.aput_row(row) for row, _ in records))
        for (row, light), new in zip(records, inserted, strict=True):
            if new and FAILED_MARK in str(row[0]):
                self._count_failure(AgentRecord.model_validate_json(light))
            elif new:
                self.ctx.stats.made += 1
                if self.ctx.on_record is not None:
                    self.ctx.on_record(AgentRecord.model_validate_json(light))

    def _count_failure(self, record: AgentRecord) -> None:
        """A call that failed after its retries on a worker: counted in the run's statistics and budget."""
        self.progress.failed_calls += 1
        self.ctx.stats.failed_calls += 1
        if self.ctx.failures is not None:
            key = record.key.split(FAILED_MARK, 1)[0]
            self.ctx.failures.add(key, record.error or "no answer after retries")
        if self.ctx.on_failed is not None:
            self.ctx.on_failed(record)

    def _essay_done(self, essay_id: str, scores: list[TraitScore]) -> None:
        full = [*self.plan.finished.get(essay_id, []), *scores]
        self.progress.scores[essay_id] = full
        if self.on_essay_done is not None:
            self.on_essay_done(self.essays[essay_id], full)
