"""The HTTP clients madrag's own (:class:`~madrag.providers.http_client.AiohttpClient`) is checked against.

madrag sends every request to a model server through one client on aiohttp. These two send the same requests
another way, and the tests and ``bench/orchestration.py`` compare it with them: :class:`HttpxClient` on httpx
(``httpx2`` when installed, whose connection pool stays cheaper under many concurrent requests; any
``httpx.AsyncClient`` given to it, such as one over ``httpx.MockTransport``), and :class:`OpenAIPackageClient`, the
``openai`` package's own client used through its generic ``post`` / ``get`` with its retries off. Each is an
:data:`~madrag.providers.openai_http.HttpClientFactory`: give it as ``http=`` to a provider (:func:`over`,
:func:`factory`).
"""

from __future__ import annotations

import functools
from typing import Any, Literal, cast

import httpx
import orjson

from madrag.providers.http_client import AiohttpClient
from madrag.providers.openai_http import (
    ClientFailure,
    HttpClientFactory,
    StatusFailure,
    _answer_body,
    _base_url,
    error_detail,
    error_message,
    openai_headers,
)

ClientKind = Literal["httpx", "aiohttp", "openai"]
"""madrag's client (``aiohttp``) and the two references."""


def factory(kind: ClientKind) -> HttpClientFactory:
    """The client of ``kind``, as a provider's ``http=`` takes it."""
    return {"aiohttp": AiohttpClient, "httpx": HttpxClient, "openai": OpenAIPackageClient}[kind]


def over(client: httpx.AsyncClient, kind: Literal["httpx", "openai"] = "httpx") -> HttpClientFactory:
    """A reference client of ``kind`` sending through ``client`` (say, one over ``httpx.MockTransport``)."""
    return functools.partial(HttpxClient if kind == "httpx" else OpenAIPackageClient, http_client=client)


class HttpxClient:
    """The reference on httpx: one ``httpx.AsyncClient`` (httpx2's where installed), JSON by ``orjson``."""

    def __init__(
        self,
        base_url: str | None,
        api_key: str,
        timeout_s: float,
        max_connections: int,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.api_key = api_key
        self._base = _base_url(base_url)
        self._headers = openai_headers(api_key)
        # httpx2 (httpx's API, a faster connection pool under many concurrent requests) when installed
        lib: Any = httpx
        if http_client is None:
            try:
                import httpx2

                lib = httpx2
            except ImportError:
                pass
        self._timeouts = (httpx.TimeoutException, lib.TimeoutException)
        self._transport_errors = (httpx.TransportError, lib.TransportError)
        limits = lib.Limits(max_connections=max_connections + 4, max_keepalive_connections=max_connections)
        self._client: Any = http_client or lib.AsyncClient(timeout=lib.Timeout(timeout_s), limits=limits)

    async def post(self, path: str, body: dict[str, Any]) -> bytes:
        """POST ``body`` (serialised by orjson) to ``path``; the answer's bytes."""
        return await self._send("POST", path, orjson.dumps(body))

    async def get(self, path: str) -> bytes:
        """GET ``path``; the answer's bytes."""
        return await self._send("GET", path, None)

    async def _send(self, method: str, path: str, content: bytes | None) -> bytes:
        try:
            answer = await self._client.request(method, self._base + path, content=content, headers=self._headers)
        except self._timeouts as exc:
            raise ClientFailure("timeout", str(exc)) from None
        except self._transport_errors as exc:
            raise ClientFailure("connection", f"{type(exc).__name__}: {exc}") from None
        if answer.status_code >= 400:
            detail = error_message(_answer_body(answer.text), answer.reason_phrase, answer.status_code)
            raise StatusFailure(answer.status_code, detail)
        return bytes(answer.content)

    async def aclose(self) -> None:
        """Close the connections."""
        await self._client.aclose()


class OpenAIPackageClient:
    """The ``openai`` package's client (``AsyncOpenAI`` with its retries off), used through its generic calls."""

    def __init__(
        self,
        base_url: str | None,
        api_key: str,
        timeout_s: float,
        max_connections: int,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        try:
            import openai
        except ImportError:
            raise ImportError("client='openai' needs the openai package (pip install openai)") from None
        self.api_key = api_key
        self._openai = openai
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,
            # openai>=3 types this as httpx2.AsyncClient but accepts an httpx.AsyncClient too
            http_client=cast(Any, http_client),
        )

    async def post(self, path: str, body: dict[str, Any]) -> bytes:
        """The package's generic POST (the same request and headers as ``chat.completions.create``)."""
        return await self._call(self._client.post(path, body=body, cast_to=httpx.Response))

    async def get(self, path: str) -> bytes:
        """The package's generic GET."""
        return await self._call(self._client.get(path, cast_to=httpx.Response))

    async def _call(self, call: Any) -> bytes:
        openai = self._openai
        try:
            answer = await call
        except openai.APITimeoutError as exc:
            raise ClientFailure("timeout", exc.message) from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__
            detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
            raise ClientFailure("connection", detail) from None
        except openai.APIStatusError as exc:
            reason = exc.response.reason_phrase or type(exc).__name__
            raise StatusFailure(exc.status_code, error_detail(exc.body, reason, exc.status_code)) from None
        return bytes(answer.content)

    async def aclose(self) -> None:
        """Close the package's client (and the HTTP client given to it)."""
        await self._client.close()
