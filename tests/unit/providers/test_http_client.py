"""madrag's one HTTP client (on aiohttp) gives field for field the responses and errors of the reference clients
(httpx's, and the openai package's where installed) for the same requests to the same servers: the stub server and
a scripted one."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from tests.reference_clients import ClientKind, factory
from tests.script_server import ScriptServer, closed_port, drop

from madrag.errors import ProviderError, TransientProviderError
from madrag.providers.base import ChatRequest, ChatResponse, Message
from madrag.providers.http_client import AiohttpClient, env_proxy
from madrag.providers.openai_compat import OpenAICompatProvider
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.testing.stub_answers import MODEL, StubConfig
from madrag.testing.stub_server import StubServer

CLIENTS: list[ClientKind] = ["httpx", "aiohttp"] + (["openai"] if importlib.util.find_spec("openai") else [])
"""Every client to compare (the openai package's where installed)."""

JUDGE = [
    Message(role="system", content="You are the Synthesizer-Judge of an essay debate."),
    Message(role="user", content="The essay is about waiting. " * 20 + "Give a score between 1 and 4."),
]
ADVOCATE = [Message(role="system", content="You are an Advocate Agent."), Message(role="user", content="Argue.")]
SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
REQUESTS = {
    "plain": ChatRequest(messages=JUDGE),
    "logprobs-top0": ChatRequest(messages=JUDGE, logprobs=True),
    "logprobs-top5": ChatRequest(messages=JUDGE, logprobs=True, top_logprobs=5, seed=7, temperature=0.7),
    "logprobs-top20": ChatRequest(messages=ADVOCATE, logprobs=True, top_logprobs=20, max_tokens=12),
    "json-schema": ChatRequest(messages=JUDGE, json_schema=SCHEMA, stop=["\n\n"]),
}


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with StubServer(StubConfig(capacity=8, latency_s=0.0, debater_tokens=30, judge_tokens=15)) as server:
        yield server


def provider(client: ClientKind, base_url: str, **kwargs: Any) -> OpenAICompatProvider:
    return OpenAICompatProvider(MODEL, base_url=base_url, http=factory(client), **kwargs)


async def answers(base_url: str, request: ChatRequest, **kwargs: Any) -> dict[str, ChatResponse]:
    """Each client's response to ``request``."""
    out = {}
    for client in CLIENTS:
        p = provider(client, base_url, **kwargs)
        try:
            out[client] = await p.complete(request)
        finally:
            await p.aclose()
    return out


def fields(response: ChatResponse) -> dict[str, Any]:
    """Every field but how long the call took (and the second the stub stamped into the answer)."""
    data = response.model_dump(exclude={"latency_s"})
    assert isinstance(data["raw"].pop("created"), int)
    return data


@pytest.mark.parametrize("name", sorted(REQUESTS))
async def test_every_client_gives_the_same_response_from_the_stub(stub: StubServer, name: str) -> None:
    request = REQUESTS[name]
    got = await answers(stub.base_url, request)
    lean = fields(got["httpx"])
    for client in CLIENTS[1:]:
        assert fields(got[client]) == lean, client
    response = got["aiohttp"]
    assert response.text and response.usage.prompt_tokens and response.usage.completion_tokens
    if request.logprobs:
        n = request.top_logprobs
        assert response.tokens and all(0 < len(t.top) <= n if n else t.top == [] for t in response.tokens)
    else:
        assert response.tokens is None
    if name == "logprobs-top20":
        assert response.finish_reason == "length" and len(response.tokens or []) == 12


def completion(cached: int | None) -> dict[str, Any]:
    tokens = [{"token": t, "logprob": -0.25, "top_logprobs": [{"token": t, "logprob": -0.25}]} for t in ("A", "B")]
    usage: dict[str, Any] = {"prompt_tokens": 40, "completion_tokens": 2}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    choice = {"message": {"content": "AB"}, "logprobs": {"content": tokens}, "finish_reason": "length"}
    return {"id": "x", "model": "served", "choices": [choice], "usage": usage}


@pytest.mark.parametrize("cached", [None, 0, 32])
async def test_cached_tokens_and_finish_reason_read_the_same(cached: int | None) -> None:
    async def answer(_request: web.Request) -> web.StreamResponse:
        return web.json_response(completion(cached))

    with ScriptServer(answer) as server:
        got = await answers(server.base_url, ChatRequest(messages=JUDGE, logprobs=True, top_logprobs=1))
    dumps = {c: r.model_dump(exclude={"latency_s"}) for c, r in got.items()}
    assert all(d == dumps["httpx"] for d in dumps.values())
    usage = got["aiohttp"].usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens) == (40, 2, cached)
    assert got["aiohttp"].finish_reason == "length" and got["aiohttp"].model == "served"
    assert got["aiohttp"].raw == completion(cached)


def status(code: int, body: str, kind: str = "application/json", **headers: str) -> Any:
    async def answer(_request: web.Request) -> web.StreamResponse:
        return web.Response(status=code, text=body, content_type=kind, headers=headers)

    return answer


async def late(_request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(2.0)
    return web.json_response(completion(None))


ERRORS = {
    "429-retry-after": (status(429, '{"error": {"message": "rate limited"}}', **{"Retry-After": "1"}), True),
    "500-text": (status(500, "boom", "text/plain"), True),
    "503-html": (status(503, "<html>Service Unavailable</html>", "text/html"), True),
    "500-empty": (status(500, ""), True),
    "400": (status(400, '{"error": {"message": "model not found"}}'), False),
    "401": (status(401, '{"error": {"message": "bad key sk-abcdefghijklmnop"}}'), False),
    "timeout": (late, True),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
async def test_every_client_fails_the_same_way(name: str) -> None:
    handler, transient = ERRORS[name]
    messages = {}
    with ScriptServer(handler) as server:
        for client in CLIENTS:
            p = provider(client, server.base_url, timeout_s=0.3)
            with pytest.raises(ProviderError) as info:
                await p.complete(ChatRequest(messages=JUDGE))
            await p.aclose()
            assert isinstance(info.value, TransientProviderError) is transient, client
            messages[client] = str(info.value)
    assert all(m == messages["httpx"] for m in messages.values()), messages
    assert "\n" not in messages["httpx"] and "sk-abcdef" not in messages["httpx"]
    assert "timed out after 0.3s" in messages["httpx"] if name == "timeout" else name[:3] in messages["httpx"]


@pytest.mark.parametrize("where", ["refused", "dropped"])
async def test_no_answer_is_transient_unreachable_from_every_client(where: str) -> None:
    with ScriptServer(drop) as server:
        url = f"http://127.0.0.1:{closed_port()}/v1" if where == "refused" else server.base_url
        prefixes = set()
        for client in CLIENTS:
            p = provider(client, url)
            with pytest.raises(TransientProviderError) as info:
                await p.complete(ChatRequest(messages=JUDGE))
            await p.aclose()
            message = str(info.value)
            assert "\n" not in message
            prefixes.add(message.split(": ", 1)[0])  # the detail names each client's own exception
    assert prefixes == {f"openai-compatible server {url} unreachable"}


async def test_retries_after_a_429_record_the_same_reasons() -> None:
    """A 429 (with Retry-After) then a 503 then an answer: retried by the policy, the same reasons recorded."""
    seen: list[str] = []

    async def flaky(request: web.Request) -> web.StreamResponse:
        seen.append(request.headers["User-Agent"])
        turn = len(seen) % 3
        if turn == 1:
            return await status(429, '{"error": {"message": "slow down"}}', **{"Retry-After": "0"})(request)
        if turn == 2:
            return await status(503, '{"error": {"message": "overloaded"}}')(request)
        return web.json_response(completion(8))

    retried = {}
    with ScriptServer(flaky) as server:
        for client in CLIENTS:
            managed = ManagedProvider(provider(client, server.base_url), RetryPolicy(retries=2, base_delay_s=0.001))
            try:
                retried[client] = (await managed.complete(ChatRequest(messages=JUDGE))).retries
            finally:
                await managed.aclose()
    assert len(retried["httpx"]) == 2 and "429" in retried["httpx"][0] and "503" in retried["httpx"][1]
    assert all(r == retried["httpx"] for r in retried.values())
    assert len(seen) == 3 * len(CLIENTS)


async def test_requests_carry_the_same_headers_and_body() -> None:
    seen: dict[str, tuple[dict[str, str], Any]] = {}

    async def record(request: web.Request) -> web.StreamResponse:
        wanted = ("authorization", "content-type", "accept", "user-agent")
        headers = {k.lower(): v for k, v in request.headers.items() if k.lower() in wanted}
        seen[request.headers["X-Client"]] = (headers, json.loads(await request.read()))
        return web.json_response(completion(None))

    with ScriptServer(record) as server:
        for client in ("httpx", "aiohttp"):
            p = provider(client, server.base_url, max_concurrency=2)
            p._client._headers["X-Client"] = client  # type: ignore[attr-defined]  # tells the two apart
            await p.complete(REQUESTS["logprobs-top5"])
            await p.aclose()
    assert seen["aiohttp"] == seen["httpx"]
    assert seen["aiohttp"][0]["content-type"] == "application/json" and seen["aiohttp"][1]["top_logprobs"] == 5


async def test_pool_sized_to_the_concurrency_and_closed_by_aclose() -> None:
    ports: set[int] = set()
    busy = [0, 0]  # in flight now, most at once

    async def slow(request: web.Request) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        ports.add(peer[1])
        busy[0] += 1
        busy[1] = max(busy)
        await asyncio.sleep(0.05)  # long enough for the three slots to overlap on a loaded machine
        busy[0] -= 1
        return web.json_response(completion(None))

    with ScriptServer(slow) as server:
        p = provider("aiohttp", server.base_url, max_concurrency=3)
        await asyncio.gather(*(p.complete(ChatRequest(messages=JUDGE)) for _ in range(12)))
        client = p._client
        assert isinstance(client, AiohttpClient)
        session = client._session
        assert session is not None and session.connector is not None and session.connector.limit == 3 + 4
        await p.aclose()
    assert busy[1] == 3 and len(ports) == 3  # three connections, each reused
    assert client.is_closed and session.closed
    with pytest.raises(RuntimeError, match="closed"):
        await p.complete(ChatRequest(messages=JUDGE))


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_provider_built_outside_a_loop_works_in_each_loop_it_is_used_in(stub: StubServer) -> None:
    p = provider("aiohttp", stub.base_url)
    first = asyncio.run(p.complete(REQUESTS["plain"]))
    second = asyncio.run(p.complete(REQUESTS["plain"]))  # a new loop: a new session
    asyncio.run(p.aclose())
    assert first.text == second.text != ""
    gc.collect()  # the first loop's session, left open when its loop ended, warns here rather than in a later test


def test_madrags_client_is_the_only_one_a_backend_builds_and_the_retired_client_option_is_refused() -> None:
    from madrag.providers.builtin import OpenAIOptions
    from madrag.providers.spec import ProviderSpec, make_provider

    plain = OpenAICompatProvider("m", base_url="http://127.0.0.1:9/v1")
    assert isinstance(plain._client, AiohttpClient) and "client" not in plain.describe()
    built = make_provider(ProviderSpec(kind="openai", model="m", base_url="http://127.0.0.1:9/v1"))
    assert isinstance(built, OpenAICompatProvider) and isinstance(built._client, AiohttpClient)
    # the options model knows only today's options: a stored run's retired ``client`` is set aside by
    # madrag.pipeline.migrations before they are read (tests/unit/pipeline/test_run_config.py)
    with pytest.raises(ValueError, match="client"):
        OpenAIOptions.model_validate({"client": "httpx", "logprobs": False})
    with pytest.raises(ValueError, match="unknown_option"):
        OpenAIOptions.model_validate({"unknown_option": 1})  # any other unknown option is still refused


def test_the_environment_proxy_is_read_once_as_httpx_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert env_proxy("https://api.openai.com/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.local:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert env_proxy("https://api.openai.com/v1") == "http://proxy.local:3128"
    assert env_proxy("http://api.openai.com/v1") is None  # no proxy for plain http
    assert env_proxy("https://localhost:8080/v1") is None
    client = AiohttpClient("https://api.openai.com/v1", "k", 1.0, 1)
    assert client._proxy == "http://proxy.local:3128"
