"""A model computed in this process (the embedded model) is never cut off by the call timeout: on a loaded machine
its calls queue behind each other for longer than the timeout, and each still finishes once, its work kept. A
remote backend's call in the same queue keeps its timeout (and is retried)."""

from __future__ import annotations

import asyncio

import pytest

from madrag.errors import ProviderError, RetriesExhausted
from madrag.providers import ChatRequest, Message, RetryPolicy
from madrag.providers.fake import FakeProvider
from madrag.providers.policy import ManagedProvider
from madrag.server.runs.backends import SharedBackend

LATENCY_S = 0.12
TIMEOUT_S = 0.2  # longer than one call, shorter than a call waiting behind two others
CALLS = 4


def _loaded(in_process: bool) -> tuple[FakeProvider, ManagedProvider]:
    """A backend serving one request at a time (a loaded machine), shared like the web server shares one, with
    every call of a run sent at once."""
    fake = FakeProvider(script=["ok"], cycle=True, latency_s=LATENCY_S, concurrency=1)
    fake.in_process = in_process
    shared = SharedBackend(fake, limit=1)
    policy = RetryPolicy(retries=1, base_delay_s=0.01, max_delay_s=0.01, timeout_s=TIMEOUT_S)
    return fake, ManagedProvider(provider=shared, policy=policy, concurrency=CALLS)


def _request(i: int) -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content=f"essay {i}")], max_tokens=8)


def test_an_in_process_call_slower_than_the_timeout_finishes_once() -> None:
    fake, managed = _loaded(in_process=True)

    async def main() -> list[str]:
        answers = await asyncio.gather(*(managed.complete(_request(i)) for i in range(CALLS)))
        assert all(a.retries == [] for a in answers)
        return [a.text for a in answers]

    assert asyncio.run(main()) == ["ok"] * CALLS
    assert len(fake.calls) == CALLS  # every call made once: none restarted
    assert managed.timeout_s is None
    assert managed.requests_sent == CALLS


def test_a_remote_call_in_the_same_queue_keeps_its_timeout() -> None:
    _fake, managed = _loaded(in_process=False)

    async def main() -> None:
        await asyncio.gather(*(managed.complete(_request(i)) for i in range(CALLS)))

    with pytest.raises(RetriesExhausted, match=r"timed out after 0\.2s"):
        asyncio.run(main())
    assert managed.timeout_s == TIMEOUT_S
    assert managed.requests_sent > CALLS  # the ones cut off were sent again


def test_the_embedded_model_and_its_shared_backend_say_they_run_in_process() -> None:
    from madrag.providers.models import smollm2_gguf_path

    try:
        path = smollm2_gguf_path()
    except ProviderError as exc:  # the model package is not installed here
        pytest.skip(f"the embedded model is not installed: {exc}")
    from madrag.providers.llamacpp import LlamaCppProvider

    model = LlamaCppProvider(model_path=path, n_ctx=512, slots=1)
    try:
        assert model.in_process is True
        assert SharedBackend(model, 1).in_process is True
        assert ManagedProvider(provider=model).timeout_s is None
    finally:
        asyncio.run(model.aclose())
    assert SharedBackend(FakeProvider(), 1).in_process is False
