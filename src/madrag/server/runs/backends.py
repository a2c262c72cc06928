"""One backend per model for the whole server: runs on the same backend share its instance, and every request
to one model server passes one limit on requests in flight (:class:`Limiter`), so several runs at once do not
overload it (and the embedded model is loaded once).

The limit is the server's, not a backend instance's: two runs whose settings differ (and so get two instances)
but that send to the same base URL share it, and the connection test a new run sends before its first call
(:mod:`madrag.server.runs.probe`) passes it too (:meth:`BackendPool.limiter_for`). Each run still has its own
retries, timeout and response cache (the library's managed provider around the shared instance); the shared
limit sits under them. Backends and limiters live on the scoring thread's event loop and are closed when the
server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

from pydantic import SecretStr

from madrag.providers import ChatRequest, ChatResponse, Provider, ProviderSpec
from madrag.providers.spec import spec_fields
from madrag.server import library


class Limiter:
    """The limit on requests in flight to one model server: ``limit`` slots, counted (``in_flight``, ``peak``).
    Used on the scoring thread's event loop only (its semaphore is made there, on first use)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0
        self.peak = 0
        self._sem: asyncio.Semaphore | None = None

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot while the request is in flight (waiting for one while all are held)."""
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.limit)
        async with self._sem:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                yield
            finally:
                self.in_flight -= 1


def server_address(kind: str, base_url: str | None) -> str:
    """Which model server a remote backend sends to: its base URL (without a trailing slash), else its kind's
    default server."""
    return base_url.strip().rstrip("/") if base_url and base_url.strip() else f"{kind}:default"


class SharedBackend(Provider):
    """A provider shared by several runs: every request passes its server's :class:`Limiter` (a new one of
    ``limit`` slots when none is given)."""

    def __init__(self, inner: Provider, limit: int, limiter: Limiter | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.capabilities = inner.capabilities
        self.in_process = inner.in_process
        self.limiter = limiter if limiter is not None else Limiter(limit)

    @property
    def in_flight(self) -> int:
        return self.limiter.in_flight

    @property
    def peak(self) -> int:
        return self.limiter.peak

    @property
    def max_concurrency(self) -> int:
        """The shared limit: what every run on this backend's server keeps in flight together."""
        return self.limiter.limit

    def check(self, request: ChatRequest) -> None:
        self.inner.check(request)

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        async with self.limiter.slot():
            return await self.inner.complete(request)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    async def aclose(self) -> None:
        """Runs do not close a shared backend; :meth:`BackendPool.aclose` does."""


class BackendPool:
    """The server's shared backends, by what they answer (kind, model, URL, key variable, model file) and, for a
    key typed in, which version of it they were built with."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._backends: dict[str, SharedBackend] = {}
        self._limiters: dict[str, Limiter] = {}
        self._lock = threading.Lock()

    def limiter_for(self, kind: str, base_url: str | None) -> Limiter:
        """The limiter of the model server a remote backend of ``kind`` at ``base_url`` sends to (made on first
        use, with the server's ``backend_concurrency``): what a connection test passes too."""
        with self._lock:
            return self._limiter(server_address(kind, base_url), self.limit)

    def _limiter(self, key: str, limit: int) -> Limiter:
        found = self._limiters.get(key)
        if found is None:
            found = self._limiters[key] = Limiter(limit)
        return found

    def get(self, spec: ProviderSpec, api_key: SecretStr | None = None, key_version: int = 0) -> SharedBackend:
        """The shared backend for ``spec``, made on first use (with ``api_key``, a key held in memory, instead of
        the variable ``spec.api_key_env``). Its limit: the embedded model's slots, else the server's
        ``backend_concurrency``."""
        identity = {**library.backend_identity(spec), "key_version": key_version if api_key is not None else None}
        key = json.dumps(identity, sort_keys=True)
        with self._lock:
            found = self._backends.get(key)
            if found is None:
                inner = library.make_backend(spec) if api_key is None else library.make_backend(spec, api_key)
                if spec.options.own_capacity():  # the model runs here: its own slots, its own limit
                    limiter = self._limiter(f"own:{key}", inner.max_concurrency)
                else:
                    base_url = spec_fields(spec).get("base_url")
                    address = server_address(spec.kind, base_url if isinstance(base_url, str) else None)
                    limiter = self._limiter(address, self.limit)
                found = SharedBackend(inner, limiter.limit, limiter)
                self._backends[key] = found
            return found

    def all(self) -> list[SharedBackend]:
        with self._lock:
            return list(self._backends.values())

    async def aclose(self) -> None:
        """Close every backend (at shutdown, on the scoring loop)."""
        for backend in self.all():
            await backend.inner.aclose()
