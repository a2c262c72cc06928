"""The ``anthropic`` backend: Anthropic's Messages API (``POST {base_url}/v1/messages``) over madrag's HTTP client
(:mod:`madrag.providers.http_client`), registered in this file alone (its options model, traits and factory:
:mod:`madrag.providers.backends`).

The Messages API returns no token logprobs, so the debaters' confidence is self-reported (as an OpenAI-compatible
server with ``--no-logprobs``), and a score is read from the answer's text. The system messages go in ``system``;
a rate limit (429), an overloaded server (529) or a server error (5xx) is transient (the call policy retries it),
any other refusal is one line naming the status and the server's message.
"""

from __future__ import annotations

import os
import time
from typing import Any

import orjson
from pydantic import SecretStr

import madrag.providers.builtin  # noqa: F401 - madrag's first three are listed first, however this is imported
from madrag.errors import ConfigError, ProviderError, TransientProviderError
from madrag.providers.backends import BackendOptions, BackendTraits, CallLimits, option, register_backend
from madrag.providers.base import Capabilities, ChatRequest, ChatResponse, Provider, Usage
from madrag.providers.openai_http import ClientFailure, HttpClient, HttpClientFactory, StatusFailure

DEFAULT_URL = "https://api.anthropic.com"
"""The API's address when none is given."""
API_VERSION = "2023-06-01"
"""The ``anthropic-version`` header the requests are written for."""
TRANSIENT = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


class AnthropicOptions(BackendOptions):
    """Anthropic's Messages API."""

    base_url: str | None = option(None, "The API's address (default: https://api.anthropic.com).")
    api_key_env: str = option("ANTHROPIC_API_KEY", "Environment variable holding the API key.")


class AnthropicProvider(Provider):
    """One model behind the Messages API."""

    name = "anthropic"
    capabilities = Capabilities(seed=False)

    def __init__(
        self,
        model: str,
        base_url: str,
        key: SecretStr | None,
        timeout_s: float,
        concurrency: int | None,
        http: HttpClientFactory | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._key = key
        self._concurrency = concurrency or 8
        self._client = (http or _client)(
            self.base_url, key.get_secret_value() if key else "", timeout_s, self._concurrency
        )

    @property
    def max_concurrency(self) -> int:
        return self._concurrency

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The request as the Messages API takes it."""
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        turns = [{"role": m.role, "content": m.content} for m in request.messages if m.role != "system"]
        body: dict[str, Any] = {"model": self.model, "max_tokens": request.max_tokens, "messages": turns}
        body["temperature"] = min(request.temperature, 1.0)  # the API's range is 0..1
        if system:
            body["system"] = system
        if request.top_p < 1.0:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop_sequences"] = request.stop
        return body

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        start = time.monotonic()
        try:
            answer = await self._client.post("/v1/messages", self.body(request))
        except ClientFailure as exc:
            if exc.kind == "timeout":
                raise TransientProviderError(f"anthropic: no answer in time ({exc.detail})") from None
            raise TransientProviderError(f"anthropic: could not reach {self.base_url}: {exc.detail}") from None
        except StatusFailure as exc:
            error = TransientProviderError if exc.status in TRANSIENT else ProviderError
            raise error(f"anthropic answered {exc.status}: {exc.detail[:200]}") from None
        return _response(orjson.loads(answer), time.monotonic() - start)

    def cache_identity(self) -> dict[str, Any]:
        return {**super().cache_identity(), "base_url": self.base_url}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "base_url": self.base_url}

    async def aclose(self) -> None:
        await self._client.aclose()


def _client(base_url: str, key: str, timeout_s: float, concurrency: int) -> HttpClient:
    """madrag's HTTP client with the Messages API's headers (the key, when there is one, as ``x-api-key``)."""
    from madrag.providers.http_client import AiohttpClient  # aiohttp imported when used

    headers = {"anthropic-version": API_VERSION, "content-type": "application/json", "accept": "application/json"}
    if key:
        headers["x-api-key"] = key
    return AiohttpClient(base_url, key, timeout_s, concurrency, headers=headers)


def _response(data: dict[str, Any], latency_s: float) -> ChatResponse:
    text = "".join(part.get("text", "") for part in data.get("content") or [] if part.get("type") == "text")
    usage = data.get("usage") or {}
    return ChatResponse(
        text=text,
        finish_reason={"max_tokens": "length", "end_turn": "stop"}.get(data.get("stop_reason") or "", "stop"),
        usage=Usage(prompt_tokens=usage.get("input_tokens"), completion_tokens=usage.get("output_tokens")),
        latency_s=latency_s,
        model=str(data.get("model") or ""),
        raw=data,
    )


def build(model: str | None, options: AnthropicOptions, limits: CallLimits, key: SecretStr | None) -> Provider:
    if not model:
        raise ConfigError("the anthropic provider needs --model (e.g. claude-3-5-haiku-latest)")
    if key is None and (value := os.environ.get(options.api_key_env)):
        key = SecretStr(value)
    url = options.base_url or DEFAULT_URL
    return AnthropicProvider(model, url, key, limits.timeout_s, limits.concurrency)


def _role_fields(role: str, model: str, url: str) -> dict[str, object]:
    if not model:
        raise ConfigError(f"--role-provider {role}: an anthropic backend needs a model name (anthropic:MODEL)")
    return {"model": model, **({"base_url": url} if url else {})}


register_backend(
    "anthropic",
    AnthropicOptions,
    build,
    BackendTraits(
        label="Anthropic's Messages API", remote=True, needs_key=True, needs_model=True, default_url=DEFAULT_URL
    ),
    _role_fields,
)
