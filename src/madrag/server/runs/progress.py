"""Live progress of runs, and the thread their scoring runs on.

Runs execute on one scoring thread with its own event loop (:class:`ScoringThread`), so a long step of one run
(building an exemplar index, a CPU-bound embedded model) never stalls the web server's loop, and every run shares
that loop's backend limits. Each run's :class:`Progress` is fed from the scoring thread (the library's
callbacks) and read from the web loop: events are handed to subscribers' queues with ``call_soon_threadsafe``
the moment the record behind them is stored.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from madrag.server.runs.time_left import Remaining, TimeLeft

log = logging.getLogger(__name__)
T = TypeVar("T")
Event = dict[str, Any]


class ScoringThread:
    """A daemon thread running an event loop for the runs' coroutines."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="madrag-scoring", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the scoring loop; cancelling the returned future cancels it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def schedule(self, coro: Coroutine[Any, Any, None], on_end: Callable[[], None] | None = None) -> ScheduledTask:
        """Schedule ``coro`` on the scoring loop as a task that any thread can cancel and wait for; ``on_end``
        runs once it has ended, before its waiters are told."""
        return ScheduledTask(self.loop, coro, on_end)

    def stop(self, finish: Callable[[], Awaitable[None]] | None = None, timeout: float = 10.0) -> None:
        """Cancel what still runs (records in flight are committed first), await ``finish()`` (closing the
        backends), then end the thread."""

        async def _cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if finish is not None:
                await finish()

        if self.loop.is_running():
            try:
                self.submit(_cancel_all()).result(timeout)
            except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError, RuntimeError):
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)


class ScheduledTask:
    """A coroutine run as a task on the scoring loop. :meth:`cancel` works from any thread and never waits;
    ``ended`` is done once the coroutine has ended however it ended: finished, failed (its exception), or
    cancelled, also when cancelled before its first step (which a future of ``run_coroutine_threadsafe`` does
    not tell: it is cancelled at once, while its task still unwinds). ``on_end`` runs before ``ended`` is done,
    so a waiter sees what it did."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, None],
        on_end: Callable[[], None] | None = None,
    ) -> None:
        self.loop = loop
        self._on_end = on_end
        self.ended: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._coro = coro
        self._task: asyncio.Task[None] | None = None
        self._cancelled = False
        self._lock = threading.Lock()
        loop.call_soon_threadsafe(self._create)

    def _create(self) -> None:
        with self._lock:
            if self._cancelled:
                self._coro.close()
                self._end()
                if not self.ended.cancelled():
                    self.ended.set_result(None)
                return
            self._task = self.loop.create_task(self._coro)
        self._task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        error = None if task.cancelled() else task.exception()
        self._end()
        if self.ended.cancelled():  # a waiter cancelled it (it should have shielded it): nothing to tell
            return
        if error is not None:
            self.ended.set_exception(error)
        else:
            self.ended.set_result(None)

    def _end(self) -> None:
        if self._on_end is not None:
            try:
                self._on_end()
            except Exception:  # a failing report must not leave the waiters waiting
                log.exception("after a scheduled task ended")

    def cancel(self) -> None:
        """Ask the task to stop (or never to start); returns at once."""
        with self._lock:
            self._cancelled = True
            task = self._task
        if task is not None:
            try:
                self.loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop has closed: nothing runs any more
                pass

    def done(self) -> bool:
        return self.ended.done()


@dataclass
class _Listener:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[Event]


@dataclass(frozen=True)
class Work:
    """What a session has done: ``calls`` answered, ``essays_done`` finished, the run's ``essays_total`` and the
    ``essays_left`` (default: total less done); with ``in_flight``, per unfinished essay of the session the calls
    it made so far and the seconds since its last answer (None: not told apart, every call counted as a finished
    essay's)."""

    calls: int
    essays_done: int
    essays_total: int | None
    essays_left: int | None = None
    in_flight: tuple[tuple[int, float], ...] | None = None

    def remaining(self) -> Remaining | None:
        """The work left: the calls per finished essay (every essay of a run makes the same calls, where a
        trait score is not: a shared debate or a comparison serves several) times the essays left, less the
        calls the unfinished essays already made; None before an essay is finished."""
        left = self.essays_left
        if left is None and self.essays_total is not None:
            left = max(0, self.essays_total - self.essays_done)
        if not self.essays_done or left is None:
            return None
        started = self.in_flight or ()
        made = sum(n for n, _ in started)
        per_essay = (self.calls - made) / self.essays_done
        calls_left = max(0, round(per_essay * left - made))
        if self.in_flight is None:
            return Remaining(calls_left)
        mine = tuple((max(0.0, per_essay - n), age) for n, age in started)
        return Remaining(calls_left, mine, max(0, left - len(mine)), per_essay)


def work_pace(since: float | None, work: Work, now: float, time_left: TimeLeft) -> dict[str, Any]:
    """How fast a run goes, from the ``work.calls`` made since ``since`` (monotonic seconds, this session's start
    of scoring; ``now`` the clock's reading): seconds per call, the calls left (:meth:`Work.calls_left`) and the
    time left: those calls over the session's smoothed rate of calls
    (:class:`~madrag.server.runs.time_left.TimeLeft`, ``time_left`` keeping it from one reading to the next; a
    fresh one: the session's mean rate). What cannot be measured yet is None."""
    elapsed = None if since is None else max(0.0, now - since)
    per_call = elapsed / work.calls if elapsed is not None and work.calls else None
    left = work.remaining() if per_call is not None else None
    slots = len(work.in_flight or ()) or 1
    eta = None if since is None else time_left.reading(now, since, work.calls, left, slots)
    calls_left = None if left is None else left.calls_left
    return {"elapsed_s": elapsed, "per_call_s": per_call, "calls_left": calls_left, "eta_s": eta}


@dataclass
class Progress:
    """What a run has done so far: scores done of the total, records seen, the current stage, and the last
    events (for late subscribers). Thread-safe: written on the scoring thread, read on the web loop."""

    run_id: str
    status: str = "queued"
    total: int | None = None
    records: int = 0
    failed: int = 0  # calls that failed after their retries
    stage: str = ""
    seq: int = 0
    scoring_since: float | None = None  # time.monotonic() when the scoring calls began (after the set-up)
    done: set[tuple[str, str, str]] = field(default_factory=set)
    essays: int | None = None  # the run's essays
    essays_done: set[str] = field(default_factory=set)  # essays finished in this session
    essays_called: set[str] = field(default_factory=set)  # essays that made a call in this session
    calls_of: dict[str, int] = field(default_factory=dict)  # this session's calls per essay
    answered_at: dict[str, float] = field(default_factory=dict)  # the clock at each essay's last answer
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)  # a test hands a simulated one
    time_left: TimeLeft = field(default_factory=TimeLeft, repr=False)
    recent: deque[Event] = field(default_factory=lambda: deque(maxlen=200))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _listeners: list[_Listener] = field(default_factory=list, repr=False)

    def snapshot(self) -> dict[str, Any]:
        """Counts and status as the API reports them."""
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "total": self.total,
            "done": len(self.done),
            "records": self.records,
            "failed_calls": self.failed,
            "stage": self.stage,
            "seq": self.seq,
            **self._pace(),
        }

    def _pace(self) -> dict[str, Any]:
        # a (re)start makes a fresh Progress (RunEvents.begin): its records and essays are this session's own;
        # a resumed essay whose calls were all stored finishes at once without a call: it counts as done, not
        # in the pace (calls and seconds per essay)
        paced = self.essays_done & self.essays_called
        left = None if self.essays is None else max(0, self.essays - len(self.essays_done))
        now = self.clock()
        started = tuple((n, now - self.answered_at[e]) for e, n in self.calls_of.items() if e not in self.essays_done)
        work = Work(self.records, len(paced), self.essays, left, started)
        return work_pace(self.scoring_since, work, now, self.time_left)

    def essay_done(self, essay_id: str) -> None:
        """An essay's scores are all in (counted once, however often it is told)."""
        with self._lock:
            self.essays_done.add(essay_id)

    def emit(self, event: Event, done: list[tuple[str, str, str]] | None = None) -> None:
        """Record an event (and any scores it completes) and hand it to every subscriber."""
        with self._lock:
            if done:
                self.done.update(done)
            self.seq += 1
            full = {**event, "seq": self.seq, "at": time.time(), "progress": self._snapshot()}
            self.recent.append(full)
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener.loop.call_soon_threadsafe(listener.queue.put_nowait, full)
            except RuntimeError:  # that loop has closed
                self.unsubscribe(listener.queue)

    def set(self, **fields: Any) -> None:
        """Update counters or status (then emit an event if the caller wants subscribers told)."""
        with self._lock:
            for name, value in fields.items():
                setattr(self, name, value)

    def change(self, event: Event, **fields: Any) -> None:
        """Update counters or the stage, then tell subscribers with ``event``."""
        self.set(**fields)
        self.emit(event)

    def count_record(self, essay_id: str | None = None) -> None:
        """One call stored in this session (of essay ``essay_id``)."""
        with self._lock:
            self.records += 1
            if essay_id is not None:
                self.essays_called.add(essay_id)
                self.calls_of[essay_id] = self.calls_of.get(essay_id, 0) + 1
                self.answered_at[essay_id] = self.clock()

    def count_failed(self) -> None:
        with self._lock:
            self.failed += 1

    def subscribe(self, loop: asyncio.AbstractEventLoop) -> asyncio.Queue[Event]:
        """A queue receiving every event from now on."""
        queue: asyncio.Queue[Event] = asyncio.Queue()
        with self._lock:
            self._listeners.append(_Listener(loop, queue))
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        with self._lock:
            self._listeners = [x for x in self._listeners if x.queue is not queue]
