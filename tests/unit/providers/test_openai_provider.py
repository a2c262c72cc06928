"""Unit tests of OpenAICompatProvider against scripted answers: an in-process fake HTTP transport for the httpx
clients (no server, no network), the same answers from a scripted server on 127.0.0.1 for the aiohttp client."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from aiohttp import web
from tests.reference_clients import over
from tests.script_server import ScriptServer, closed_port, drop

from madrag.errors import ProviderError, TransientProviderError
from madrag.providers.base import ChatRequest, Message
from madrag.providers.openai_compat import NO_KEY, OpenAICompatProvider, RequestShape

SECRET = "sk-test-SECRETSECRET-0123456789abcdef"
KEY_ENV = "MADRAG_TEST_OPENAI_KEY"
BASE_URL = "http://fake.local/v1"

Handler = Callable[[httpx.Request], httpx.Response]


def _token(tok: str, lp: float, alts: list[tuple[str, float]]) -> dict[str, Any]:
    return {
        "token": tok,
        "logprob": lp,
        "bytes": list(tok.encode()),
        "top_logprobs": [{"token": t, "logprob": v, "bytes": None} for t, v in alts],
    }


def completion_body(
    text: str = "Final score: 3",
    logprobs: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "served-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None if logprobs is None else {"content": logprobs, "refusal": None},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }


LOGPROB_TOKENS = [
    _token("Final", -0.1, [("Final", -0.1), ("The", -2.5), ("Score", -3.0)]),
    _token(" score", -0.05, [(" score", -0.05), (" Score", -3.2), (":", -4.0)]),
    _token(": 3", -0.7, [(": 3", -0.7), (": 4", -1.0), (": 2", -2.0)]),
]


class Recorder:
    """A MockTransport handler that answers scripted responses and keeps every request it saw."""

    def __init__(self, *responses: httpx.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []
        self.base_url = BASE_URL
        self.closed: Callable[[], bool] = lambda: False  # whether the provider's HTTP client is closed

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        item = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(item, Exception):
            raise item
        return item

    @property
    def last_json(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.requests[-1].content)
        return body


def ok(body: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, json=body)


def replay(recorder: Recorder) -> Callable[[web.Request], Any]:
    """A scripted server's handler answering what ``recorder`` scripts: its responses as they are; a timeout by
    answering late (the provider's timeout is short), any other transport error by dropping the connection."""

    async def handle(request: web.Request) -> web.StreamResponse:
        seen = httpx.Request(request.method, str(request.url), headers=list(request.headers.items()))
        seen._content = await request.read()
        try:
            item = recorder(seen)
        except httpx.TimeoutException:
            await asyncio.sleep(2.0)
            return web.Response(status=500)
        except httpx.TransportError:
            return await drop(request)
        kind = item.headers.get("content-type", "application/octet-stream")
        return web.Response(status=item.status_code, body=item.content, headers={"Content-Type": kind})

    return handle


@pytest.fixture(params=["httpx", "aiohttp", "openai"])
async def make(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> AsyncIterator[Callable[..., tuple[OpenAICompatProvider, Recorder]]]:
    """A provider over scripted answers, with each HTTP client (every test using it runs with all three)."""
    if request.param == "openai":
        pytest.importorskip("openai")
    monkeypatch.setenv(KEY_ENV, SECRET)
    made: list[OpenAICompatProvider] = []
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptServer(drop)) if request.param == "aiohttp" else None

        def _make(*responses: httpx.Response | Exception, **kwargs: Any) -> tuple[OpenAICompatProvider, Recorder]:
            recorder = Recorder(*responses)
            shape = kwargs.pop("shape", RequestShape())
            if server is None:
                client = httpx.AsyncClient(transport=httpx.MockTransport(recorder))
                recorder.closed = lambda: client.is_closed
                kwargs["http"] = over(client, request.param)
            else:  # the same script from a server: a refused connection is a closed port, a timeout a late answer
                server.handler = replay(recorder)
                refused = isinstance(responses[0], httpx.ConnectError)
                recorder.base_url = f"http://127.0.0.1:{closed_port()}/v1" if refused else server.base_url
                if isinstance(responses[0], httpx.TimeoutException):
                    kwargs.setdefault("timeout_s", 0.3)
            provider = OpenAICompatProvider(
                model="my-model", base_url=recorder.base_url, api_key_env=KEY_ENV, shape=shape, **kwargs
            )
            if server is not None:
                recorder.closed = lambda: bool(getattr(provider._client, "is_closed", False))
            made.append(provider)
            return provider, recorder

        yield _make
        for provider in made:
            await provider.aclose()


def req(**kwargs: Any) -> ChatRequest:
    messages = [Message(role="system", content="You are a judge."), Message(role="user", content="Score it.")]
    return ChatRequest(messages=messages, **kwargs)


# -- request mapping ---------------------------------------------------------------------------------------


async def test_request_mapping_passes_settings_through(make: Any) -> None:
    provider, rec = make(ok(completion_body(logprobs=LOGPROB_TOKENS)))
    await provider.complete(
        req(
            temperature=0.7,
            max_tokens=33,
            top_p=0.9,
            seed=42,
            stop=["\n\n", "END"],
            logprobs=True,
            top_logprobs=5,
        )
    )
    sent = rec.last_json
    assert rec.requests[-1].url == httpx.URL(f"{rec.base_url}/chat/completions")
    assert rec.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
    assert sent["model"] == "my-model"
    assert sent["messages"] == [
        {"role": "system", "content": "You are a judge."},
        {"role": "user", "content": "Score it."},
    ]
    assert sent["temperature"] == 0.7
    assert sent["max_tokens"] == 33
    assert sent["top_p"] == 0.9
    assert sent["seed"] == 42
    assert sent["stop"] == ["\n\n", "END"]
    assert sent["logprobs"] is True
    assert sent["top_logprobs"] == 5
    assert "response_format" not in sent


async def test_request_mapping_omits_unset_options(make: Any) -> None:
    provider, rec = make(ok(completion_body()))
    await provider.complete(req())
    sent = rec.last_json
    for key in ("seed", "stop", "logprobs", "top_logprobs", "response_format"):
        assert key not in sent
    assert sent["temperature"] == 0.0


async def test_logprobs_without_top_still_sends_top_logprobs_one(make: Any) -> None:
    """llama-cpp-python's server returns no logprobs without ``top_logprobs``, llama.cpp's C++ server none with 0:
    1 is sent, and the alternative it brings is cut from the tokens (kept in raw)."""
    provider, rec = make(ok(completion_body(logprobs=LOGPROB_TOKENS)))
    resp = await provider.complete(req(logprobs=True))
    assert rec.last_json["logprobs"] is True
    assert rec.last_json["top_logprobs"] == 1
    assert resp.tokens is not None and all(t.top == [] for t in resp.tokens)
    assert resp.raw["choices"][0]["logprobs"]["content"][0]["top_logprobs"]


async def test_json_schema_response_format(make: Any) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    provider, rec = make(ok(completion_body(text='{"score": 3}')))
    await provider.complete(req(json_schema=schema))
    assert rec.last_json["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": schema},
    }
    shape = RequestShape(json_schema_style="json_object")
    provider2, rec2 = make(ok(completion_body(text='{"score": 3}')), shape=shape)
    await provider2.complete(req(json_schema=schema))
    assert rec2.last_json["response_format"] == {"type": "json_object", "schema": schema}


async def test_no_key_sends_placeholder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MADRAG_TEST_UNSET_KEY", raising=False)
    rec = Recorder(ok(completion_body()))
    client = httpx.AsyncClient(transport=httpx.MockTransport(rec))
    provider = OpenAICompatProvider("m", base_url=BASE_URL, api_key_env="MADRAG_TEST_UNSET_KEY", http=over(client))
    await provider.complete(req())
    assert rec.requests[-1].headers["authorization"] == f"Bearer {NO_KEY}"
    assert provider.describe()["api_key_set"] is False


# -- response mapping --------------------------------------------------------------------------------------


async def test_response_mapping_with_tokens_and_alternatives(make: Any) -> None:
    body = completion_body(logprobs=LOGPROB_TOKENS, finish_reason="length")
    provider, _ = make(ok(body))
    resp = await provider.complete(req(logprobs=True, top_logprobs=2))
    assert resp.text == "Final score: 3"
    assert resp.finish_reason == "length"
    assert resp.usage.prompt_tokens == 11 and resp.usage.completion_tokens == 3
    assert resp.model == "served-model"
    assert resp.raw["id"] == "chatcmpl-1"
    assert resp.raw["choices"][0]["message"]["content"] == "Final score: 3"
    assert resp.tokens is not None
    assert [t.token for t in resp.tokens] == ["Final", " score", ": 3"]
    assert [t.logprob for t in resp.tokens] == [-0.1, -0.05, -0.7]
    # top alternatives, cut to the requested number
    assert [(a.token, a.logprob) for a in resp.tokens[2].top] == [(": 3", -0.7), (": 4", -1.0)]
    assert all(len(t.top) == 2 for t in resp.tokens)
    assert resp.choice_logprobs is None and resp.cached is False


async def test_no_tokens_when_logprobs_not_requested(make: Any) -> None:
    provider, _ = make(ok(completion_body(logprobs=LOGPROB_TOKENS)))
    resp = await provider.complete(req())
    assert resp.tokens is None


async def test_missing_usage_stays_unknown(make: Any) -> None:
    body = completion_body()
    del body["usage"]
    provider, _ = make(ok(body))
    resp = await provider.complete(req())
    assert resp.usage.prompt_tokens is None and resp.usage.completion_tokens is None


async def test_cached_prompt_tokens_read_where_the_server_says_and_unknown_where_not(make: Any) -> None:
    body = completion_body()
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 8}
    provider, _ = make(ok(body), ok(completion_body()))
    said = await provider.complete(req())
    silent = await provider.complete(req())  # llama-cpp-python's server says nothing about its prefix cache
    assert said.usage.cached_prompt_tokens == 8 and said.usage.prompt_tokens == 11
    assert silent.usage.cached_prompt_tokens is None and silent.usage.prompt_tokens == 11


async def test_missing_logprobs_raises(make: Any) -> None:
    provider, _ = make(ok(completion_body(logprobs=None)))
    with pytest.raises(ProviderError, match="no logprobs") as info:
        await provider.complete(req(logprobs=True, top_logprobs=5))
    assert not isinstance(info.value, TransientProviderError)


async def test_logprobs_unsupported_is_refused_before_any_call(make: Any) -> None:
    provider, rec = make(ok(completion_body()), supports_logprobs=False)
    assert provider.capabilities.logprobs is False
    with pytest.raises(ProviderError, match="no logprobs"):
        await provider.complete(req(logprobs=True))
    assert rec.requests == []


async def test_latency_is_the_time_the_server_took() -> None:
    delay = 0.05

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(delay)
        return ok(completion_body())

    client = httpx.AsyncClient(transport=httpx.MockTransport(slow))
    provider = OpenAICompatProvider("m", base_url=BASE_URL, http=over(client))
    resp = await provider.complete(req())
    # at least the server's delay (less a millisecond: the event loop may wake a timer that much early)
    assert delay - 1e-3 <= resp.latency_s < delay + 5.0


async def test_call_labels_are_not_sent(make: Any) -> None:
    provider, rec = make(ok(completion_body()))
    await provider.complete(req(seed=3))
    await provider.complete(req(seed=3, role="judge", trait="Ideas", round=1))
    assert rec.requests[0].content == rec.requests[1].content


async def test_capabilities_and_identity(make: Any) -> None:
    provider, _ = make(ok(completion_body()))
    caps = provider.capabilities
    assert provider.name == "openai" and provider.model == "my-model"
    assert caps.logprobs and caps.max_top_logprobs == 20 and caps.seed and caps.json_schema
    assert not (caps.prefill or caps.choices or caps.grammar)
    assert provider.max_concurrency == 8


async def test_prefill_and_grammar_refused(make: Any) -> None:
    provider, rec = make(ok(completion_body()))
    with pytest.raises(ProviderError):
        await provider.complete(req(prefill="Final score:"))
    with pytest.raises(ProviderError):
        await provider.complete(req(grammar='root ::= "1"'))
    assert rec.requests == []


# -- errors ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 502, 503, 408])
async def test_transient_statuses(make: Any, status: int) -> None:
    provider, rec = make(httpx.Response(status, json={"error": {"message": "slow down", "type": "x"}}))
    with pytest.raises(TransientProviderError) as info:
        await provider.complete(req())
    msg = str(info.value)
    assert str(status) in msg and "slow down" in msg and "\n" not in msg
    assert len(rec.requests) == 1  # no client retries by itself (the openai package's retries are off)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_transient(make: Any, status: int) -> None:
    provider, _ = make(httpx.Response(status, json={"error": {"message": "nope\nsecond line"}}))
    with pytest.raises(ProviderError) as info:
        await provider.complete(req())
    assert not isinstance(info.value, TransientProviderError)
    assert str(status) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "exc", [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("dropped")]
)
async def test_network_failures_are_transient(make: Any, exc: Exception) -> None:
    provider, _ = make(exc)
    with pytest.raises(TransientProviderError) as info:
        await provider.complete(req())
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, text="<html>502 Bad Gateway</html>", headers={"content-type": "text/html"}),
        httpx.Response(200, content=b"{not json", headers={"content-type": "application/json"}),
        httpx.Response(200, json={"id": "x", "object": "chat.completion", "choices": []}),
        httpx.Response(200, json={"hello": "world"}),
        httpx.Response(200, json=[1, 2, 3]),
    ],
    ids=["html", "broken-json", "no-choices", "wrong-object", "a-list"],
)
async def test_garbage_body_is_provider_error(make: Any, response: httpx.Response) -> None:
    provider, _ = make(response)
    with pytest.raises(ProviderError, match="garbage") as info:
        await provider.complete(req())
    assert not isinstance(info.value, TransientProviderError)
    assert "\n" not in str(info.value)


async def test_garbage_logprob_value(make: Any) -> None:
    bad = [_token("x", -0.1, [])]
    bad[0]["logprob"] = "high"
    provider, _ = make(ok(completion_body(text="x", logprobs=bad)))
    with pytest.raises(ProviderError):
        await provider.complete(req(logprobs=True))


# -- secrets -----------------------------------------------------------------------------------------------


async def test_key_never_leaks(make: Any) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {SECRET}. Also sk-abcd****wxyz.", "code": "x"}}
    provider, _ = make(httpx.Response(401, json=echo))
    assert SECRET not in repr(provider)
    assert SECRET not in str(provider)
    assert SECRET not in json.dumps(provider.describe())
    assert provider.describe()["api_key_env"] == KEY_ENV
    assert provider.describe()["api_key_set"] is True
    with pytest.raises(ProviderError) as info:
        await provider.complete(req())
    assert SECRET not in str(info.value) and "sk-abcd" not in str(info.value)
    assert "401" in str(info.value) and KEY_ENV in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


async def test_url_credentials_are_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    provider = OpenAICompatProvider(
        "m", base_url="http://user:pw@host.example:8080/v1?api-key=hunter2", api_key_env="NO_SUCH_KEY_VAR"
    )
    shown = repr(provider) + json.dumps(provider.describe())
    assert "hunter2" not in shown and "pw@" not in shown
    assert provider.describe()["base_url"] == "http://host.example:8080/v1"
    await provider.aclose()


async def test_aclose_closes_client(make: Any) -> None:
    provider, rec = make(ok(completion_body()))
    assert not rec.closed()
    await provider.complete(req())  # the aiohttp client opens its session on the first request
    await provider.aclose()
    assert rec.closed()


async def test_unprefixed_key_is_scrubbed_and_not_stored_on_the_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = "plainSecretValue0123456789"
    monkeypatch.setenv("MADRAG_PLAIN_KEY", plain)
    rec = Recorder(httpx.Response(400, json={"error": {"message": f"bad key {plain} in request"}}))
    client = httpx.AsyncClient(transport=httpx.MockTransport(rec))
    provider = OpenAICompatProvider("m", base_url=BASE_URL, api_key_env="MADRAG_PLAIN_KEY", http=over(client))
    own = {k: v for k, v in vars(provider).items() if k != "_client"}
    assert plain not in repr(own)
    with pytest.raises(ProviderError) as info:
        await provider.complete(req())
    assert plain not in str(info.value) and "bad key *** in request" in str(info.value)
    await provider.aclose()


# -- parsing the raw answer --------------------------------------------------------------------------------


async def test_raw_is_the_json_as_sent(make: Any) -> None:
    body = completion_body(logprobs=LOGPROB_TOKENS)
    body["system_fingerprint"] = "fp_1"  # a field madrag does not read is kept too
    provider, _ = make(ok(body))
    resp = await provider.complete(req(logprobs=True, top_logprobs=2))
    assert resp.raw == body
    # the alternatives beyond top_logprobs are cut from the tokens only, never from raw
    assert len(resp.raw["choices"][0]["logprobs"]["content"][0]["top_logprobs"]) == 3


async def test_integer_logprobs_and_null_content(make: Any) -> None:
    tokens = [_token("", 0, [("", 0), ("x", -3)])]
    provider, _ = make(ok(completion_body(text="", logprobs=tokens, finish_reason="length")))
    resp = await provider.complete(req(logprobs=True, top_logprobs=5))
    assert resp.tokens is not None and resp.tokens[0].logprob == 0.0 and isinstance(resp.tokens[0].logprob, float)
    assert [(a.token, a.logprob) for a in resp.tokens[0].top] == [("", 0.0), ("x", -3.0)]
    body = completion_body()
    body["choices"][0]["message"]["content"] = None
    provider, _ = make(ok(body))
    assert (await provider.complete(req())).text == ""


async def test_empty_answer_without_logprobs_is_no_tokens(make: Any) -> None:
    provider, _ = make(ok(completion_body(text="", logprobs=None)))
    resp = await provider.complete(req(logprobs=True, top_logprobs=5))
    assert resp.tokens == []


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("logprob", float("nan")),
        ("logprob", float("-inf")),
        ("logprob", None),
        ("logprob", True),
        ("logprob", "-0.5"),
        ("token", 7),
        ("token", None),
        ("alt_logprob", float("inf")),
        ("alt_logprob", "low"),
        ("alt_token", ["x"]),
        ("top_logprobs", "abc"),
        ("entry", "not an object"),
    ],
)
async def test_garbage_in_logprobs_is_provider_error(make: Any, where: str, value: Any) -> None:
    tokens = [_token("Final", -0.1, [("Final", -0.1), ("The", -2.5)]), _token(" score", -0.05, [(" score", -0.05)])]
    entry: Any = tokens[1]
    if where == "entry":
        tokens[1] = value
    elif where == "top_logprobs":
        entry["top_logprobs"] = value
    elif where.startswith("alt_"):
        entry["top_logprobs"][0][where[4:]] = value
    else:
        entry[where] = value
    # json.dumps writes NaN/Infinity literals, which some servers do send and json.loads accepts
    response = httpx.Response(200, content=json.dumps(completion_body(logprobs=tokens)).encode())
    provider, _ = make(response)
    with pytest.raises(ProviderError, match="garbage") as info:
        await provider.complete(req(logprobs=True, top_logprobs=5))
    assert not isinstance(info.value, TransientProviderError)
    assert "token 1" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b["choices"][0].update(message="text"),
        lambda b: b["choices"][0]["message"].update(content=["a", "b"]),
        lambda b: b["choices"][0].update(finish_reason=3),
        lambda b: b.update(usage={"prompt_tokens": "11"}),
        lambda b: b.update(usage=[1, 2]),
        lambda b: b["choices"][0].update(logprobs="none"),
        lambda b: b["choices"][0].update(logprobs={"content": {"a": 1}}),
        lambda b: b.update(choices=["x"]),
    ],
    ids=["message", "content", "finish-reason", "usage-count", "usage", "logprobs", "logprobs-content", "choice"],
)
async def test_garbage_fields_are_provider_error(make: Any, mutate: Callable[[dict[str, Any]], None]) -> None:
    body = completion_body(logprobs=LOGPROB_TOKENS)
    mutate(body)
    provider, _ = make(ok(body))
    with pytest.raises(ProviderError, match="garbage") as info:
        await provider.complete(req(logprobs=True, top_logprobs=5))
    assert not isinstance(info.value, TransientProviderError)


async def test_error_object_in_a_200_answer_is_reported_without_the_key(make: Any) -> None:
    provider, _ = make(ok({"error": {"message": f"model overloaded, key {SECRET}"}}))
    with pytest.raises(ProviderError, match=r"garbage.*model overloaded") as info:
        await provider.complete(req())
    assert SECRET not in str(info.value)


async def test_usage_and_model_fall_back(make: Any) -> None:
    body = completion_body()
    body["usage"] = None
    del body["model"]
    provider, _ = make(ok(body))
    resp = await provider.complete(req())
    assert resp.usage.prompt_tokens is None and resp.usage.completion_tokens is None
    assert resp.model == "my-model"
