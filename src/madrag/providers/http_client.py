"""madrag's one HTTP client for model servers: every request of the OpenAI-compatible provider (chat, ``/models``,
``/props``, ``/tokenize``, ``/embeddings``) and of the Anthropic provider goes through :class:`AiohttpClient`.

JSON bodies by ``orjson``; a failure is a :class:`~madrag.providers.openai_http.ClientFailure` (timeout, no answer)
or a :class:`~madrag.providers.openai_http.StatusFailure` with the message the error answer's body gives, which
each provider maps to madrag's errors. aiohttp was kept over httpx (and the ``openai`` package's client) because
it does the least per request: in one run of ``bench/orchestration.py`` (200 essays x 4 traits, 32 in flight)
1.66 vs 3.23 ms of client CPU per ``complete`` alone against httpx, 4.02 vs 6.22 ms of the run's whole CPU per
call. httpx and the ``openai`` package remain only as the references the tests and the bench compare it with
(``tests/reference_clients.py``).

As httpx does: each of the connect, read and pool waits is limited to the timeout (not the whole request),
idle connections are kept 5 s, ``$HTTP(S)_PROXY`` / ``$ALL_PROXY`` / ``$NO_PROXY`` are honoured (read once, not
per request) and HTTPS is verified against ``$SSL_CERT_FILE``, else certifi's bundle (where installed).
The session is opened in the event loop of the first request (a provider can be built outside one) and
anew if a later request runs in another loop.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import ssl
import urllib.request
from typing import Any

import aiohttp
import orjson
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

from madrag.providers.accounting import count_sent
from madrag.providers.address_guard import AddressGuard, current_guard
from madrag.providers.openai_http import (
    ClientFailure,
    StatusFailure,
    _answer_body,
    _base_url,
    error_message,
    openai_headers,
)

KEEPALIVE_S = 5.0
"""How long an idle connection is kept (httpx's default keep-alive expiry)."""


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``$<SCHEME>_PROXY``, else ``$ALL_PROXY``), None when none is
    set or ``$NO_PROXY`` excludes its host."""
    parts = URL(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    # proxy_bypass_environment: CPython's reading of $NO_PROXY (not in typeshed's stubs)
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if not proxy or bypass(parts.host or "", proxies):
        return None
    return proxy


def _ssl_context() -> ssl.SSLContext:
    """Verification against ``$SSL_CERT_FILE``, else certifi's bundle (as httpx does), else the system's."""
    cafile = os.environ.get("SSL_CERT_FILE")
    if not cafile:
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:
            cafile = None
    return ssl.create_default_context(cafile=cafile)


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver, with the addresses of ``target`` (the model server's host) put to an
    :data:`~madrag.providers.address_guard.AddressGuard` before a connection is made to one (an ``OSError`` with
    its reason when it refuses them); other hosts (a proxy's) are resolved as they are."""

    def __init__(self, guard: AddressGuard, target: str) -> None:
        self._inner = DefaultResolver()
        self._guard = guard
        self._target = target.lower()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        if host.lower().rstrip(".") == self._target and (why := self._guard(host, port, [r["host"] for r in found])):
            raise OSError(errno.EACCES, why)  # aiohttp's connection error shows its strerror
        return found

    async def close(self) -> None:
        await self._inner.close()


class AiohttpClient:
    """The client on one ``aiohttp.ClientSession`` sized to the provider's concurrency; JSON by orjson. The
    headers of every request are OpenAI's (:func:`~madrag.providers.openai_http.openai_headers`) unless given."""

    def __init__(
        self,
        base_url: str | None,
        api_key: str,
        timeout_s: float,
        max_connections: int,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.api_key = api_key
        self._base = _base_url(base_url)
        self._headers = openai_headers(api_key) if headers is None else headers  # OpenAI's unless given
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout_s, sock_connect=timeout_s, sock_read=timeout_s
        )
        self._limit = max_connections + 4  # the chat slots and a few more (GET /models)
        self._proxy = env_proxy(self._base)
        self._urls: dict[str, URL] = {}
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    def _open(self) -> aiohttp.ClientSession:
        """The session of the running loop (opened on first use, and again in a new loop)."""
        if self._closed:
            raise RuntimeError("the HTTP client is closed")
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            ssl_arg: ssl.SSLContext | bool = _ssl_context() if self._base.startswith("https:") else True
            guard, host = current_guard(), URL(self._base).host
            resolver = GuardedResolver(guard, host) if guard is not None and host else None
            connector = aiohttp.TCPConnector(
                limit=self._limit, keepalive_timeout=KEEPALIVE_S, ssl=ssl_arg, resolver=resolver
            )
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, timeout=self._timeout, trust_env=False
            )
            self._loop = loop
        return self._session

    def _url(self, path: str) -> URL:
        """The URL of ``path`` under the base, parsed once."""
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = URL(self._base + path)
        return url

    async def post(self, path: str, body: dict[str, Any]) -> bytes:
        """POST ``body`` (serialised by orjson) to ``path``; the answer's bytes."""
        return await self._send("POST", path, orjson.dumps(body))

    async def get(self, path: str) -> bytes:
        """GET ``path``; the answer's bytes."""
        return await self._send("GET", path, None)

    async def _send(self, method: str, path: str, content: bytes | None) -> bytes:
        session = self._session if self._loop is asyncio.get_running_loop() and not self._closed else self._open()
        assert session is not None
        count_sent()  # a check's request, counted (madrag.providers.accounting)
        try:
            async with session.request(method, self._url(path), data=content, proxy=self._proxy) as answer:
                body = await answer.read()
                status = answer.status
                if status >= 400:
                    text = body.decode(answer.charset or "utf-8", errors="replace")
                    raise StatusFailure(status, error_message(_answer_body(text), answer.reason or "", status))
                return body
        except TimeoutError as exc:  # aiohttp's timeouts are TimeoutErrors
            raise ClientFailure("timeout", str(exc) or type(exc).__name__) from None
        except aiohttp.ClientError as exc:
            raise ClientFailure("connection", f"{type(exc).__name__}: {exc}") from None

    async def aclose(self) -> None:
        """Close the connections."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closed
