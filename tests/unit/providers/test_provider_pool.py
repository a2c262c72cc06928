"""Several ``--base-url`` endpoints as one provider: balanced within each endpoint's limit, a failing endpoint
taken out and tried again later (stub servers on 127.0.0.1, and scripted endpoints for the timing)."""

from __future__ import annotations

import asyncio
import time

import pytest
from tests.servers import free_port

from madrag.errors import ProviderError, TransientProviderError
from madrag.providers import ProviderSpec, managed, spec_identity
from madrag.providers.base import Capabilities, ChatRequest, ChatResponse, Message, Provider
from madrag.providers.openai_compat import OpenAICompatProvider
from madrag.providers.policy import ManagedProvider
from madrag.providers.pool import EndpointPool
from madrag.providers.spec import make_provider
from madrag.testing.stub_server import MODEL, StubServer

REQUEST = ChatRequest(messages=[Message(role="user", content="Judge this. Score between 0 and 3.")], max_tokens=8)


class Scripted(Provider):
    """An endpoint that answers after ``latency_s`` or fails (transiently) while ``down``; counts its calls."""

    def __init__(self, name: str, slots: int = 4, latency_s: float = 0.0, down: bool = False) -> None:
        self.name, self.model, self.capabilities = "openai", "m", Capabilities()
        self.label, self.slots, self.latency_s, self.down = name, slots, latency_s, down
        self.calls = 0
        self.in_flight = 0
        self.peak = 0
        self._sem = asyncio.Semaphore(slots)

    @property
    def max_concurrency(self) -> int:
        return self.slots

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        async with self._sem:
            self.calls += 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                await asyncio.sleep(self.latency_s)
                if self.down:
                    raise TransientProviderError(f"{self.label} unreachable")
                return ChatResponse(text=self.label)
            finally:
                self.in_flight -= 1


async def test_calls_are_balanced_over_real_servers_within_each_endpoints_limit() -> None:
    with StubServer(capacity=16, latency_s=0.05) as a, StubServer(capacity=16, latency_s=0.05) as b:
        endpoints = [OpenAICompatProvider(MODEL, base_url=s.base_url, max_concurrency=3) for s in (a, b)]
        pool = ManagedProvider(EndpointPool(endpoints))
        assert pool.max_concurrency == 6
        await asyncio.gather(*(pool.complete(REQUEST) for _ in range(40)))
        await pool.aclose()
        stats = [a.stats(), b.stats()]
    served = [s.requests for s in stats]
    assert sum(served) == 40 and abs(served[0] - served[1]) <= 4  # equal endpoints, (about) equal shares
    assert all(s.max_in_flight == 3 for s in stats)  # each endpoint full, never over its own limit


async def test_a_dead_endpoint_is_taken_out_and_the_run_goes_on() -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there: connection refused
    with StubServer(capacity=8, latency_s=0.0) as live:
        endpoints = [OpenAICompatProvider(MODEL, base_url=url, max_concurrency=4) for url in (dead, live.base_url)]
        pool = EndpointPool(endpoints, cooldown_s=30.0)
        first = await asyncio.gather(*(pool.complete(REQUEST) for _ in range(12)))
        tried = pool.stats()[0]["calls"]  # the calls sent before its first failure came back
        second = await asyncio.gather(*(pool.complete(REQUEST) for _ in range(12)))
        await pool.aclose()
        served = live.stats().requests
    assert len(first) == len(second) == 12 and served == 24  # every call answered, by the live server
    down, up = pool.stats()
    assert down["calls"] == tried and not down["up"] and up["up"]  # taken out: no call since
    assert down["failures"] == 1  # one outage, however many calls were in flight when it showed


async def test_a_taken_out_endpoint_gets_calls_again_after_its_cooldown() -> None:
    flaky, steady = Scripted("flaky", down=True), Scripted("steady")
    pool = EndpointPool([flaky, steady], cooldown_s=0.2)
    assert (await pool.complete(REQUEST)).text == "steady"  # flaky failed, the call went to steady at once
    assert pool.stats()[0] == {"calls": 1, "failures": 1, "up": False}
    for _ in range(5):
        await pool.complete(REQUEST)
    assert flaky.calls == 1  # cooling down: not tried
    flaky.down = False
    await asyncio.sleep(0.25)
    answers = [(await pool.complete(REQUEST)).text for _ in range(4)]
    assert "flaky" in answers and pool.stats()[0]["failures"] == 0  # back, and fully trusted again


async def test_cooldown_doubles_while_an_endpoint_keeps_failing() -> None:
    flaky, steady = Scripted("flaky", down=True), Scripted("steady")
    pool = EndpointPool([flaky, steady], cooldown_s=0.1, max_cooldown_s=0.3)
    pauses = []
    for _ in range(4):
        while pool.endpoints[0].down_until > time.monotonic():
            await asyncio.sleep(0.02)
        await pool.complete(REQUEST)
        pauses.append(round(pool.endpoints[0].down_until - time.monotonic(), 1))
    assert pauses == [0.1, 0.2, 0.3, 0.3]


async def test_every_endpoint_failing_is_a_transient_error_and_a_refusal_is_not_retried_elsewhere() -> None:
    pool = EndpointPool([Scripted("a", down=True), Scripted("b", down=True)])
    with pytest.raises(TransientProviderError, match="every endpoint of the pool failed"):
        await pool.complete(REQUEST)

    class Refuses(Scripted):
        async def _complete(self, request: ChatRequest) -> ChatResponse:
            self.calls += 1
            raise ProviderError("HTTP 400: bad request")

    first, second = Refuses("a"), Scripted("b")
    with pytest.raises(ProviderError, match="bad request"):
        await EndpointPool([first, second]).complete(REQUEST)
    assert first.calls + second.calls == 1


async def test_a_slow_endpoint_gets_fewer_calls() -> None:
    fast, slow = Scripted("fast", slots=2, latency_s=0.01), Scripted("slow", slots=2, latency_s=0.1)
    pool = ManagedProvider(EndpointPool([fast, slow]))
    await asyncio.gather(*(pool.complete(REQUEST) for _ in range(60)))
    assert fast.calls > 3 * slow.calls and fast.peak <= 2 and slow.peak <= 2


def test_several_base_urls_make_a_pool_with_a_limit_per_endpoint() -> None:
    urls = ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1", "http://127.0.0.1:3/v1"]
    spec = ProviderSpec(kind="openai", model="m", base_url=urls[0], extra_base_urls=urls[1:], concurrency=16)
    backend = managed(spec, None)
    assert isinstance(backend.provider, EndpointPool) and backend.max_concurrency == 48
    assert [e["base_url"] for e in backend.provider.describe()["endpoints"]] == urls
    one = spec.model_copy(update={"extra_base_urls": []})
    assert isinstance(make_provider(one), OpenAICompatProvider)
    assert spec_identity(spec) == spec_identity(one)  # adding servers of the same model resumes the same run
