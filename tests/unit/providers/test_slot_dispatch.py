"""The embedded model's slots go to the request that continues a slot's last prompt (a Judge's score step after
its rationale), not to whichever call waited longest: that continuation reuses the prompt the slot evaluated,
where another slot would evaluate it all again. Without the model: engines that only note what they answered."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from madrag.providers import llamacpp
from madrag.providers.base import ChatRequest, Message
from madrag.providers.embedded import Generated
from madrag.providers.llamacpp import LlamaCppProvider
from madrag.providers.policy import ManagedProvider
from madrag.providers.slot_dispatch import SlotDispatch, shared_start


class NotingEngine:
    """An engine that answers after a short while and notes which requests it answered, and its threads."""

    made: ClassVar[list[NotingEngine]] = []

    def __init__(self, path: Path, n_ctx: int, n_threads: int, n_batch: int, n_threads_batch: int) -> None:
        self.n_threads, self.n_threads_batch = n_threads, n_threads_batch
        self.answered: list[str] = []
        self._lock = threading.Lock()
        NotingEngine.made.append(self)

    def generate(self, request: ChatRequest) -> Generated:
        with self._lock:
            threading.Event().wait(0.02)
            self.answered.append(request.messages[0].content + (request.prefill or ""))
            return Generated(text="ok", tokens=[], n_prompt=1, finish_reason="stop")

    def close(self) -> None:
        pass


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> LlamaCppProvider:
    NotingEngine.made = []
    monkeypatch.setattr(llamacpp, "runtime_engine", lambda runtime: NotingEngine)
    monkeypatch.setattr(llamacpp, "usable_cores", lambda: 2)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    return LlamaCppProvider(model_path=model, slots=2)


async def test_each_chain_s_continuation_is_answered_by_the_slot_that_answered_its_start(
    provider: LlamaCppProvider,
) -> None:
    """Four chains on two slots, as the demo runs an essay's four traits: each sends a request, then its
    continuation (the same messages, a prefill). Every continuation goes to the slot of its chain's first request,
    although other chains' requests were waiting before it; a first-come queue gives most of them the other slot."""
    managed = ManagedProvider(provider=provider)

    async def chain(name: str) -> None:
        messages = [Message(role="user", content=f"essay {name} " * 20)]
        await managed.complete(ChatRequest(messages=messages, max_tokens=4))
        await managed.complete(ChatRequest(messages=messages, max_tokens=1, prefill="Final score: "))

    await asyncio.gather(*(chain(n) for n in "abcd"))
    answered = [e.answered for e in NotingEngine.made]
    assert sum(len(a) for a in answered) == 8
    for name in "abcd":
        start = f"essay {name} " * 20
        (home,) = [a for a in answered if start in a]  # both of the chain's requests on one slot
        assert home.index(start + "Final score: ") == home.index(start) + 1  # the continuation right after


async def test_a_slot_released_with_nobody_waiting_is_taken_at_once() -> None:
    slots = SlotDispatch(["A", "B"], grace_s=30.0)
    first = await slots.acquire("x")
    slots.release(first)
    assert await asyncio.wait_for(slots.acquire("y"), 1.0) in ("A", "B")  # no grace without a waiter


async def test_a_waiter_gets_a_held_slot_when_no_continuation_comes() -> None:
    slots = SlotDispatch(["A"], grace_s=0.01)
    held = await slots.acquire("x")
    waiter = asyncio.create_task(slots.acquire("other"))
    await asyncio.sleep(0)
    slots.release(held)
    assert await asyncio.wait_for(waiter, 1.0) == "A"


async def test_a_cancelled_waiter_loses_no_slot() -> None:
    slots = SlotDispatch(["A"], grace_s=0.0)
    held = await slots.acquire("x")
    gone = asyncio.create_task(slots.acquire("y"))
    await asyncio.sleep(0)
    gone.cancel()
    slots.release(held)
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert await asyncio.wait_for(slots.acquire("z"), 1.0) == "A"


def test_each_slot_gets_its_share_of_the_cores_for_prompt_batches_too(provider: LlamaCppProvider) -> None:
    """Two slots on two cores: one thread each, for generation and for prompt batches (a runtime's default of
    every core for batches runs four spinning threads on two cores)."""
    assert [(e.n_threads, e.n_threads_batch) for e in NotingEngine.made] == [(1, 1), (1, 1)]


def test_the_shared_start_of_two_texts_is_found_by_halving() -> None:
    import random

    rng = random.Random(3)
    for _ in range(300):
        a = "".join(rng.choice("ab") for _ in range(rng.randrange(0, 40)))
        b = a[: rng.randrange(0, len(a) + 1)] + "".join(rng.choice("ab") for _ in range(rng.randrange(0, 5)))
        by_char = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        assert shared_start(a, b) == by_char
