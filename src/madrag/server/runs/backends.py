"""One backend per model for the whole server: runs on the same backend share its instance and one limit on
requests in flight, so several runs at once do not overload it (and the embedded model is loaded once).

Each run still has its own retries, timeout and response cache (the library's managed provider around the
shared instance); the shared limit sits under them. Backends live on the scoring thread's event loop and are
closed when the server stops.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from pydantic import SecretStr

from madrag.providers import ChatRequest, ChatResponse, Provider, ProviderSpec
from madrag.server import library


class SharedBackend(Provider):
    """A provider shared by several runs: every request passes one semaphore of ``limit`` slots."""

    def __init__(self, inner: Provider, limit: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.capabilities = inner.capabilities
        self.in_process = inner.in_process
        self.limit = limit
        self.in_flight = 0
        self.peak = 0
        self._sem: asyncio.Semaphore | None = None

    @property
    def max_concurrency(self) -> int:
        """The shared limit: what every run on this backend keeps in flight together."""
        return self.limit

    def check(self, request: ChatRequest) -> None:
        self.inner.check(request)

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.limit)
        async with self._sem:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                return await self.inner.complete(request)
            finally:
                self.in_flight -= 1

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
        self._lock = threading.Lock()

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
                limit = inner.max_concurrency if spec.options.own_capacity() else self.limit
                found = SharedBackend(inner, limit)
                self._backends[key] = found
            return found

    def all(self) -> list[SharedBackend]:
        with self._lock:
            return list(self._backends.values())

    async def aclose(self) -> None:
        """Close every backend (at shutdown, on the scoring loop)."""
        for backend in self.all():
            await backend.inner.aclose()
