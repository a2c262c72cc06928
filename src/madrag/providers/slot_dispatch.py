"""Which of the embedded model's slots answers which request, so that a request reuses the prompt its slot
evaluated last (each slot is one model context whose KV cache keeps its last prompt: a Judge's score step
repeats its rationale's prompt, a Skeptic its Advocate's essay and rubric).

A free slot goes to the waiting request whose text shares the longest start with that slot's last request; a
request arriving while slots are free takes the free slot whose last request shares the longest start with it.
When a slot is released and requests are waiting, it is held for a short grace (``grace_s``) before it is
handed out: the caller that just got its answer sends its continuation within the same step of the event loop,
and without the grace the oldest waiter (another chain) would take the slot and evaluate its own prompt in
full, and then the continuation too. Ties keep the order of arrival. Which slot answers changes no number
(every slot evaluates a prompt as a fresh context would: :mod:`madrag.providers.llamacpp`), only how much of
the prompt is evaluated.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

E = TypeVar("E")


def shared_start(a: str, b: str) -> int:
    """The length of the longest common start of ``a`` and ``b`` (by halving: slices compare in C)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class SlotDispatch(Generic[E]):
    """Hands ``engines`` (one request at a time each) to requests, by the text each request renders."""

    def __init__(self, engines: list[E], grace_s: float = 0.05) -> None:
        self._free: list[E] = list(engines)
        self._held: set[int] = set()  # id() of the free engines still in their grace
        self._last: dict[int, str] = {}  # id(engine) -> the text of the last request it answered
        self._waiting: list[tuple[str, asyncio.Future[E]]] = []
        self.grace_s = grace_s

    async def acquire(self, text: str) -> E:
        """A slot for the request rendering ``text``: at once when one is free and no request waits (the free
        one that answered the most similar request), else when a slot is handed to it."""
        ready = [e for e in self._free if id(e) not in self._held]
        if ready and not self._waiting:
            return self._take(max(ready, key=lambda e: shared_start(self._last.get(id(e), ""), text)), text)
        future: asyncio.Future[E] = asyncio.get_running_loop().create_future()
        self._waiting.append((text, future))
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(future.result())  # handed over as the waiter was cancelled: not lost
            self._waiting = [w for w in self._waiting if w[1] is not future]
            raise

    def release(self, engine: E) -> None:
        """``engine`` is free again; when requests wait, it is handed out after the grace."""
        self._free.append(engine)
        if not self._waiting:
            return
        self._held.add(id(engine))
        asyncio.get_running_loop().call_later(self.grace_s, self._end_grace, engine)

    def _end_grace(self, engine: E) -> None:
        self._held.discard(id(engine))
        if engine not in self._free:
            return
        self._waiting = [w for w in self._waiting if not w[1].done()]
        if not self._waiting:
            return
        last = self._last.get(id(engine), "")
        best = max(range(len(self._waiting)), key=lambda i: (shared_start(last, self._waiting[i][0]), -i))
        text, future = self._waiting.pop(best)
        future.set_result(self._take(engine, text))

    def _take(self, engine: E, text: str) -> E:
        self._free.remove(engine)
        self._last[id(engine)] = text
        return engine
