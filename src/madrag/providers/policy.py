"""Call policy around any provider: bounded concurrency, a per-request timeout, retries with backoff on
transient failures (429, 5xx, timeouts, dropped connections) and the opt-out response cache."""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field

from madrag.errors import ProviderError, TransientProviderError
from madrag.providers.base import Capabilities, ChatRequest, ChatResponse, Provider
from madrag.providers.cache import ResponseCache

log = logging.getLogger(__name__)


@dataclass
class RetryPolicy:
    """How often and how patiently a call is retried: ``retries`` after the first attempt, each attempt cut off
    after ``timeout_s``, backoff from ``base_delay_s`` doubling up to ``max_delay_s``."""

    retries: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    timeout_s: float = 300.0

    def delay(self, attempt: int) -> float:
        """Exponential backoff with full jitter."""
        cap = min(self.max_delay_s, self.base_delay_s * (2**attempt))
        return random.uniform(cap / 2, cap)


@dataclass
class ManagedProvider:
    """What the pipeline calls: one provider plus its concurrency limit, retries and cache.

    ``concurrency`` caps the requests in flight (None: the backend's own :attr:`Provider.max_concurrency`).
    """

    provider: Provider
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    cache: ResponseCache | None = None
    concurrency: int | None = None
    requests_sent: int = 0
    _sem: asyncio.Semaphore | None = field(default=None, repr=False)

    @property
    def capabilities(self) -> Capabilities:
        """The backend's capabilities."""
        return self.provider.capabilities

    @property
    def max_concurrency(self) -> int:
        """Requests in flight at once: the configured limit, else the backend's."""
        return self.concurrency or self.provider.max_concurrency

    def _semaphore(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.max_concurrency)
        return self._sem

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """The response to ``request``: from the cache, else from the backend (within the concurrency limit,
        retried on transient failures); :class:`ProviderError` once the retries are spent."""
        self.provider.check(request)
        if self.cache is None:
            async with self._semaphore():
                return await self._with_retries(request)
        key = request.cache_key(self.provider.name, self.provider.model)
        if (hit := self.cache.get(key)) is not None:
            return hit
        async with self._semaphore():
            response = await self._with_retries(request)
        self.cache.put(key, response)
        return response

    async def _with_retries(self, request: ChatRequest) -> ChatResponse:
        last: Exception | None = None
        for attempt in range(self.policy.retries + 1):
            try:
                self.requests_sent += 1
                return await asyncio.wait_for(self.provider.complete(request), self.policy.timeout_s)
            except (TransientProviderError, TimeoutError) as exc:
                last = exc
                if attempt == self.policy.retries:
                    break
                wait = self.policy.delay(attempt)
                log.warning("transient provider failure (%s); retry %d in %.1fs", exc, attempt + 1, wait)
                await asyncio.sleep(wait)
        what = "timed out" if isinstance(last, TimeoutError) else str(last)
        raise ProviderError(
            f"{self.provider.name} ({self.provider.model}) failed after {self.policy.retries + 1} attempts: {what}"
        )

    async def aclose(self) -> None:
        """Close the backend and the cache."""
        await self.provider.aclose()
        if self.cache is not None:
            self.cache.close()
