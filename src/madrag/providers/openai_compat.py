"""A provider for any OpenAI-compatible chat endpoint: OpenAI, OpenRouter, vLLM, llama.cpp server, Ollama.

Requests go out through madrag's one HTTP client (:mod:`madrag.providers.http_client`, on aiohttp, JSON by
``orjson``), sending what the ``openai`` package sends (the tests check the two side by side). No client
retries: madrag's middleware retries
:class:`TransientProviderError` (429, 5xx, timeouts, dropped connections). Everything else is a
:class:`ProviderError` with a one-line message. The API key is read from an environment variable and never appears
in :meth:`describe`, in ``repr`` or in an error message.

The answer's JSON is parsed and checked by :mod:`madrag.providers.openai_answer` (anything madrag cannot use is
"server answered garbage").
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import SecretStr

from madrag.errors import ContextOverflow, ProviderError, TransientProviderError
from madrag.providers.accounting import count_extra_request
from madrag.providers.adapt import MAX_ADAPTATIONS, RequestAdapter, SamplingParams, TokenParam
from madrag.providers.base import (
    Capabilities,
    ChatRequest,
    ChatResponse,
    Message,
    Provider,
)
from madrag.providers.identity import models_identity
from madrag.providers.openai_answer import AnswerReader, parse_json
from madrag.providers.openai_http import ClientFailure, HttpClient, HttpClientFactory, StatusFailure
from madrag.providers.server_props import ServerProps, listed_models, other_models, read_props, tokenize

NO_KEY = "sk-no-key"
"""Placeholder key sent to local servers that need none (the client refuses an empty key)."""
LOGPROBS_PROBE = ChatRequest(
    messages=[Message(role="user", content="Reply with the single word OK.")],
    max_tokens=4,
    logprobs=True,
    top_logprobs=1,
)
"""The request of :meth:`OpenAICompatProvider.check_logprobs`: a few tokens, logprobs asked for."""

_TRANSIENT_STATUS = frozenset({408, 409, 429})
CONTEXT_OVERFLOW = re.compile(
    r"exceeds? the available context size|exceed_context_size|context[_ ]length[_ ]exceeded|maximum context length"
    r"|context (?:window|size) (?:of|is)|prompt is too long|too many tokens",
    re.IGNORECASE,
)
"""A 400's message that says the prompt does not fit the server's context: llama.cpp's ("the request exceeds the
available context size", ``exceed_context_size_error``), vLLM's and OpenAI's ("maximum context length",
``context_length_exceeded``)."""
_MAX_DETAIL = 200
_KEYLIKE = re.compile(r"\b(sk|key|rk|pk)-[A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)

JsonSchemaStyle = Literal["json_schema", "json_object"]
"""How a request's JSON schema is sent (see :class:`OpenAICompatProvider`)."""


@dataclass(frozen=True)
class RequestShape:
    """How this server wants its requests: the JSON schema's form, how the token limit is sent and whether the
    sampling parameters are (see :class:`OpenAICompatProvider`); the defaults suit OpenAI and adapt once."""

    json_schema_style: JsonSchemaStyle = "json_schema"
    token_param: TokenParam = "auto"
    sampling_params: SamplingParams = "auto"


def make_client(base_url: str | None, api_key: str, timeout_s: float, max_connections: int) -> HttpClient:
    """madrag's HTTP client (:class:`~madrag.providers.http_client.AiohttpClient`, aiohttp imported when used)."""
    from madrag.providers.http_client import AiohttpClient

    return AiohttpClient(base_url, api_key, timeout_s, max_connections)


def _safe_url(url: str | None) -> str | None:
    """The URL without user info, query or fragment (where a key could hide)."""
    if url is None:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class OpenAICompatProvider(Provider):
    """Chat completions over the OpenAI HTTP API.

    ``shape`` (:class:`RequestShape`) says how requests are sent. Its ``json_schema_style`` picks how a
    request's ``json_schema`` is sent: ``"json_schema"`` (OpenAI, vLLM, llama.cpp's C++ server, Ollama) or
    ``"json_object"`` with a ``schema`` key (llama-cpp-python's server, which ignores the ``json_schema`` form).

    Its ``token_param`` and ``sampling_params`` say how the token limit is sent and whether ``temperature`` and
    ``top_p`` are (see :mod:`madrag.providers.adapt`): by default as asked until the server refuses them, as
    OpenAI's reasoning models do, then adapted once for the rest of the run. Each response's ``sent`` holds
    the parameters its request was actually sent with.

    ``http`` makes the HTTP client instead of madrag's own (:func:`make_client`): the tests give reference
    clients over httpx's mock transport, which send the same requests.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 120.0,
        max_concurrency: int = 8,
        supports_logprobs: bool = True,
        http: HttpClientFactory | None = None,
        shape: RequestShape | None = None,
        api_key: SecretStr | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ProviderError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if timeout_s <= 0:
            raise ProviderError(f"timeout_s must be > 0, got {timeout_s}")
        self.name = "openai"
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self._max_concurrency = max_concurrency
        self.shape = shape = shape or RequestShape()
        self.json_schema_style: JsonSchemaStyle = shape.json_schema_style
        self.adapter = RequestAdapter(shape.token_param, shape.sampling_params)
        self.capabilities = Capabilities(
            logprobs=supports_logprobs,
            max_top_logprobs=20 if supports_logprobs else 0,
            seed=True,
            json_schema=True,
            prefill=False,
            choices=False,
            grammar=False,
        )
        # a key given here (the web server's, typed in and held in memory) is used as it is; else the variable's
        key = api_key.get_secret_value().strip() if api_key is not None else os.environ.get(api_key_env, "").strip()
        self._key_set = bool(key)
        self._client = (http or make_client)(base_url, key or NO_KEY, timeout_s, max_concurrency)
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._models: bytes | None = None  # the server's GET /models answer, once the start-up check read it

    def __repr__(self) -> str:
        return (
            f"OpenAICompatProvider(model={self.model!r}, base_url={_safe_url(self.base_url)!r}, "
            f"api_key_env={self.api_key_env!r})"
        )

    @property
    def max_concurrency(self) -> int:
        """Requests in flight at once (the client holds the rest back)."""
        return self._max_concurrency

    def describe(self) -> dict[str, Any]:
        """The base description plus the endpoint, key variable (never the key), timeout and concurrency."""
        info = super().describe()
        info.update(
            base_url=_safe_url(self.base_url),
            api_key_env=self.api_key_env,
            api_key_set=self._key_set,
            timeout_s=self.timeout_s,
            max_concurrency=self.max_concurrency,
        )
        return info | asdict(self.shape)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()

    def cache_identity(self) -> dict[str, Any]:
        """The model at this endpoint (its URL without user info or query), sent as this provider sends it."""
        return {
            **super().cache_identity(),
            "base_url": (_safe_url(self.base_url) or "https://api.openai.com/v1").rstrip("/"),
            **asdict(self.shape),
        }

    async def server_identity(self) -> dict[str, Any] | None:
        """What ``GET /models`` says of this model (:func:`~madrag.providers.identity.models_identity`)."""
        try:
            answer = await self._client.get("/models")
        except (ClientFailure, StatusFailure) as exc:
            raise self._map_error(exc) from None
        try:
            return models_identity(parse_json(answer)[0], self.model)
        except ValueError:  # not JSON
            return None

    async def served_models(self) -> list[str]:
        """The model names the server's ``GET /models`` lists (none: it lists none or cannot be asked)."""
        try:
            answer = await self._client.get("/models")
        except (ClientFailure, StatusFailure):
            return []
        return [str(e["id"]) for e in listed_models(answer)]

    async def server_props(self) -> ServerProps | None:
        """What a llama.cpp server says of its slots and context (``/props``), or vLLM of its model's context
        (``/v1/models``); None elsewhere (server_props.py)."""
        return await read_props(self._client, self.base_url, self.model, self._models)

    async def count_tokens(self, text: str) -> int | None:
        """The server's token count of ``text`` (``/tokenize``); None without that endpoint."""
        return await tokenize(self._client, self.base_url, text)

    async def check_reachable(self) -> None:
        """A one-line :class:`ProviderError` when no HTTP answer comes from the server (nothing listening, a
        wrong host, no answer within the timeout), or when its model list names models but not this one (a server
        that would answer every call 404; llama.cpp's serves its one model under any name and is not refused);
        any other HTTP answer to ``GET /models``, an error status included, means the server is there."""
        try:
            listed = self._models = await self._client.get("/models")
        except StatusFailure:
            return
        except ClientFailure as exc:
            reason = f"no answer within {self.timeout_s:g}s" if exc.kind == "timeout" else self._scrub(exc.detail)
            raise ProviderError(
                f"cannot reach the {self._where()} ({reason}): is it running, and is --base-url right?"
            ) from None
        if (served := other_models(listed, self.model)) is not None:
            shown = ", ".join(served[:5]) + (f" and {len(served) - 5} more" if len(served) > 5 else "")
            raise ProviderError(
                f"the {self._where()} does not serve model {self.model!r} (it serves {shown}): check --model"
            )

    async def check_logprobs(self) -> None:
        """One short request with logprobs asked for: the :data:`~madrag.providers.openai_answer.NO_LOGPROBS`
        :class:`ProviderError` (naming ``--no-logprobs``) when the server answers without them."""
        if self.capabilities.logprobs:
            await self.complete(LOGPROBS_PROBE)

    # -- request -------------------------------------------------------------------------------------------

    def request_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments for ``chat.completions.create`` (public so tests and logs can see them)."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "top_p": request.top_p,
        }
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.logprobs:
            # always send top_logprobs, and at least 1: without it llama-cpp-python returns no logprobs at all,
            # and with 0 llama.cpp's C++ server neither; the alternatives beyond those asked for are cut on reading
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = max(1, request.top_logprobs)
        if request.json_schema is not None:
            if self.json_schema_style == "json_object":
                kwargs["response_format"] = {"type": "json_object", "schema": request.json_schema}
            else:
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "response", "schema": request.json_schema},
                }
        return kwargs

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        kwargs = self.request_kwargs(request)
        async with self._semaphore:
            for tries in range(MAX_ADAPTATIONS):
                if tries:  # the request adapted and sent again: one more HTTP request of this attempt
                    count_extra_request()
                body = self.adapter.body(kwargs)
                start = time.monotonic()
                try:
                    answer = await self._post(body)
                    break
                except StatusFailure as exc:  # only a 400 gets here
                    # a parameter the model refuses (e.g. max_tokens of a reasoning model): adapt and resend
                    if not self.adapter.adapt(exc.detail, body):
                        raise self._map_error(exc) from None
            else:
                sent = ", ".join(sorted(k for k in body if k != "messages"))
                raise ProviderError(f"{self._where()} kept refusing the request's parameters (sent: {sent})")
            latency = time.monotonic() - start
        response = self._to_response(request, answer, latency)
        return response.model_copy(update={"sent": self.adapter.sent(body)})

    async def _post(self, body: dict[str, Any]) -> bytes:
        """POST one chat completion body; every failure but a 400 is mapped to a :class:`ProviderError`."""
        try:
            return await self._client.post("/chat/completions", body)
        except StatusFailure as exc:
            if exc.status == 400:
                raise
            raise self._map_error(exc) from None
        except ClientFailure as exc:
            raise self._map_error(exc) from None

    # -- response ------------------------------------------------------------------------------------------

    def _to_response(self, request: ChatRequest, body: bytes, latency: float) -> ChatResponse:
        """A :class:`ChatResponse` from the body of a chat completion (:mod:`madrag.providers.openai_answer`)."""
        return AnswerReader(self.model, self._where(), self._scrub).response(request, body, latency)

    # -- errors --------------------------------------------------------------------------------------------

    def _where(self) -> str:
        return f"openai-compatible server {_safe_url(self.base_url) or 'api.openai.com'}"

    def _scrub(self, text: str) -> str:
        key = self._client.api_key  # the only place the key is kept
        if key and key != NO_KEY:
            text = text.replace(key, "***")
        text = _KEYLIKE.sub("***", text)
        text = " ".join(text.split())
        return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."

    def _map_error(self, exc: ClientFailure | StatusFailure) -> ProviderError:
        where = self._where()
        if isinstance(exc, ClientFailure):
            if exc.kind == "timeout":
                return TransientProviderError(f"{where} timed out after {self.timeout_s:g}s")
            return TransientProviderError(f"{where} unreachable: {self._scrub(exc.detail)}")
        status = exc.status
        detail = self._scrub(exc.detail)
        if status >= 500 or status in _TRANSIENT_STATUS:
            return TransientProviderError(f"{where} answered HTTP {status}: {detail}")
        if status == 400 and CONTEXT_OVERFLOW.search(detail):
            return ContextOverflow(f"{where} answered HTTP 400: {detail}")
        if status in (401, 403):
            hint = f" (check ${self.api_key_env})" if self.api_key_env else ""
            hint = hint or ("" if self._key_set else " (no API key was sent)")
        else:
            hint = self.adapter.hint(detail)
        return ProviderError(f"{where} answered HTTP {status}{hint}: {detail}")
