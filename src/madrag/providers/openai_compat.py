"""A provider for any OpenAI-compatible chat endpoint: OpenAI, OpenRouter, vLLM, llama.cpp server, Ollama.

Built on ``openai.AsyncOpenAI`` with the client's own retries switched off: madrag's middleware retries
:class:`TransientProviderError` (429, 5xx, timeouts, dropped connections). Everything else is a
:class:`ProviderError` with a one-line message. The API key is read from an environment variable and never
appears in :meth:`describe`, in ``repr`` or in an error message.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import time
from typing import Any, Literal, cast
from urllib.parse import urlsplit, urlunsplit

import httpx
import openai
import pydantic
from openai.types.chat import ChatCompletion

from madrag.errors import ProviderError, TransientProviderError
from madrag.providers.base import (
    Capabilities,
    ChatRequest,
    ChatResponse,
    Provider,
    TokenLogprob,
    TopLogprob,
    Usage,
)

NO_KEY = "sk-no-key"
"""Placeholder key sent to local servers that need none (the client refuses an empty key)."""

_TRANSIENT_STATUS = frozenset({408, 409, 429})
_MAX_DETAIL = 200
_KEYLIKE = re.compile(r"\b(sk|key|rk|pk)-[A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)

JsonSchemaStyle = Literal["json_schema", "json_object"]


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

    ``json_schema_style`` picks how a request's ``json_schema`` is sent: ``"json_schema"`` (OpenAI, vLLM,
    llama.cpp's C++ server, Ollama) or ``"json_object"`` with a ``schema`` key (llama-cpp-python's server,
    which ignores the ``json_schema`` form).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 120.0,
        max_concurrency: int = 8,
        supports_logprobs: bool = True,
        http_client: httpx.AsyncClient | None = None,
        json_schema_style: JsonSchemaStyle = "json_schema",
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
        self.max_concurrency = max_concurrency
        self.json_schema_style: JsonSchemaStyle = json_schema_style
        self.capabilities = Capabilities(
            logprobs=supports_logprobs,
            max_top_logprobs=20 if supports_logprobs else 0,
            seed=True,
            json_schema=True,
            prefill=False,
            choices=False,
            grammar=False,
        )
        key = os.environ.get(api_key_env, "").strip()
        self._key_set = bool(key)
        self._client = openai.AsyncOpenAI(
            api_key=key or NO_KEY,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,
            # openai>=3 types this as httpx2.AsyncClient but accepts an httpx.AsyncClient too
            http_client=cast(Any, http_client),
        )
        self._semaphore = asyncio.Semaphore(max_concurrency)

    def __repr__(self) -> str:
        return (
            f"OpenAICompatProvider(model={self.model!r}, base_url={_safe_url(self.base_url)!r}, "
            f"api_key_env={self.api_key_env!r})"
        )

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info.update(
            base_url=_safe_url(self.base_url),
            api_key_env=self.api_key_env,
            api_key_set=self._key_set,
            timeout_s=self.timeout_s,
            max_concurrency=self.max_concurrency,
            json_schema_style=self.json_schema_style,
        )
        return info

    async def aclose(self) -> None:
        await self._client.close()

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
            # always send top_logprobs: llama-cpp-python returns no logprobs at all without it
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = request.top_logprobs
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
            start = time.monotonic()
            try:
                completion: Any = await self._client.chat.completions.create(**kwargs)
            except openai.APIError as exc:
                raise self._map_error(exc) from None
            except (ValueError, pydantic.ValidationError) as exc:  # e.g. a body that is not JSON
                raise ProviderError(self._garbage(f"{type(exc).__name__}: {exc}")) from None
            latency = time.monotonic() - start
        return self._to_response(request, completion, latency)

    # -- response ------------------------------------------------------------------------------------------

    def _garbage(self, detail: str) -> str:
        return f"server answered garbage ({self._where()}): {self._scrub(detail)}"

    def _to_response(self, request: ChatRequest, completion: Any, latency: float) -> ChatResponse:
        if not isinstance(completion, ChatCompletion):
            raise ProviderError(self._garbage(f"not a chat completion: {str(completion)[:80]!r}"))
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise ProviderError(self._garbage("no choices in the response"))
        choice = choices[0]
        message = getattr(choice, "message", None)
        if message is None:
            raise ProviderError(self._garbage("the first choice has no message"))
        text = getattr(message, "content", None) or ""
        if not isinstance(text, str):
            raise ProviderError(self._garbage("message content is not text"))
        tokens = self._tokens(request, choice, text) if request.logprobs else None
        usage = getattr(completion, "usage", None)
        try:
            raw = completion.model_dump(mode="json")
        except Exception:  # a partially constructed model
            raw = {}
        return ChatResponse(
            text=text,
            tokens=tokens,
            finish_reason=getattr(choice, "finish_reason", None),
            usage=Usage(
                prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            ),
            latency_s=latency,
            model=getattr(completion, "model", None) or self.model,
            raw=raw,
        )

    def _tokens(self, request: ChatRequest, choice: Any, text: str) -> list[TokenLogprob]:
        logprobs = getattr(choice, "logprobs", None)
        content = getattr(logprobs, "content", None) if logprobs is not None else None
        if content is None:
            if text == "":
                return []
            raise ProviderError(
                f"{self._where()} returned no logprobs although they were requested "
                f"(model {self.model!r}); use supports_logprobs=False for a backend without them"
            )
        tokens: list[TokenLogprob] = []
        for item in content:
            logprob = self._logprob(getattr(item, "logprob", None))
            top = [
                TopLogprob(token=str(alt.token), logprob=self._logprob(alt.logprob))
                for alt in (getattr(item, "top_logprobs", None) or [])[: request.top_logprobs]
            ]
            tokens.append(TokenLogprob(token=str(getattr(item, "token", "")), logprob=logprob, top=top))
        return tokens

    def _logprob(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise ProviderError(self._garbage(f"a logprob is not a number: {value!r}"))
        return float(value)

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

    def _map_error(self, exc: openai.APIError) -> ProviderError:
        where = self._where()
        if isinstance(exc, openai.APITimeoutError):
            return TransientProviderError(f"{where} timed out after {self.timeout_s:g}s")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
            return TransientProviderError(f"{where} unreachable: {self._scrub(detail)}")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = self._scrub(self._status_detail(exc))
            if status >= 500 or status in _TRANSIENT_STATUS:
                return TransientProviderError(f"{where} answered HTTP {status}: {detail}")
            hint = f" (check ${self.api_key_env})" if status in (401, 403) else ""
            return ProviderError(f"{where} answered HTTP {status}{hint}: {detail}")
        if isinstance(exc, openai.APIResponseValidationError):
            return ProviderError(self._garbage(exc.message))
        return ProviderError(f"{where} failed: {self._scrub(f'{type(exc).__name__}: {exc.message}')}")

    @staticmethod
    def _status_detail(exc: openai.APIStatusError) -> str:
        body = exc.body
        if isinstance(body, dict):
            err = body.get("error", body)
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                return str(err["message"])
            if isinstance(err, str):
                return err
            if isinstance(body.get("detail"), str):
                return str(body["detail"])
        if isinstance(body, str) and body.strip():
            return body
        return exc.response.reason_phrase or type(exc).__name__
