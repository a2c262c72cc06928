"""Call policy around any provider: bounded concurrency, a per-request timeout, retries with backoff on
transient failures (429, 5xx, timeouts, dropped connections) and the opt-out response cache.

Every retry's reason travels with the answer (:attr:`ChatResponse.retries`), so each agent record keeps the
attempts its call needed and ``madrag costs`` counts them by kind (:func:`retry_kind`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from dataclasses import dataclass, field

from madrag.errors import ProviderError, TransientProviderError
from madrag.providers.base import Capabilities, ChatRequest, ChatResponse, Provider
from madrag.providers.cache import ResponseCache

log = logging.getLogger(__name__)
_HTTP_STATUS = re.compile(r"\bHTTP (\d{3})\b")


def retry_kind(reason: str) -> str:
    """The kind of a retry's reason, for counting: ``HTTP 429``, ``HTTP 500`` ..., ``timeout``, ``connection`` or
    ``other``."""
    if m := _HTTP_STATUS.search(reason):
        return f"HTTP {m.group(1)}"
    lowered = reason.lower()
    if "timed out" in lowered or "timeout" in lowered:
        return "timeout"
    if any(word in lowered for word in ("unreachable", "connection", "disconnected", "reset")):
        return "connection"
    return "other"


def failure_reason(exc: BaseException, timeout_s: float) -> str:
    """Why an attempt failed, never empty: a timeout (whose message is empty) says after how long."""
    if isinstance(exc, TimeoutError):
        return f"timed out after {timeout_s:g}s (no answer)"
    return str(exc) or type(exc).__name__


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
        self.cache.put(key, response.model_copy(update={"retries": []}))
        return response

    async def _with_retries(self, request: ChatRequest) -> ChatResponse:
        """The answer, with the reasons of the attempts that failed before it; ProviderError (naming every
        reason) when all ``retries + 1`` attempts failed."""
        reasons: list[str] = []
        for attempt in range(self.policy.retries + 1):
            try:
                self.requests_sent += 1
                response = await asyncio.wait_for(self.provider.complete(request), self.policy.timeout_s)
                return response.model_copy(update={"retries": reasons}) if reasons else response
            except (TransientProviderError, TimeoutError) as exc:
                reasons.append(failure_reason(exc, self.policy.timeout_s))
                if attempt == self.policy.retries:
                    break
                wait = self.policy.delay(attempt)
                log.warning("transient provider failure (%s); retry %d in %.1fs", reasons[-1], attempt + 1, wait)
                await asyncio.sleep(wait)
        kinds = ", ".join(retry_kind(r) for r in reasons)
        raise ProviderError(
            f"{self.provider.name} ({self.provider.model}) failed after {self.policy.retries + 1} attempts "
            f"({kinds}): {reasons[-1]}"
        )

    async def aclose(self) -> None:
        """Close the backend and the cache."""
        await self.provider.aclose()
        if self.cache is not None:
            self.cache.close()
