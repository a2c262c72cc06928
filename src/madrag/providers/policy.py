"""Call policy around any provider: bounded concurrency, a per-request timeout, retries with backoff on
transient failures (429, 5xx, timeouts, dropped connections) and the opt-out response cache.

A provider computed in this process (:attr:`Provider.in_process`: the embedded model) gets no timeout: on a
loaded machine its calls are slow, not lost, and cutting one off would throw its work away and start it again
from nothing (its thread would even keep computing the abandoned answer). A remote call keeps its timeout.
A provider that queues its own requests (:attr:`Provider.queues_requests`: the embedded model, which gives a
freed slot to the request continuing that slot's last prompt) is not held back by the concurrency limit unless
one was configured: a first-come queue here would hand the slot to another call first.

Every retry's reason travels with the answer (:attr:`ChatResponse.retries`), so each agent record keeps the
attempts its call needed and ``madrag costs`` counts them by kind (:func:`retry_kind`). Every request sent is
counted into the agent call's tally (:mod:`madrag.providers.accounting`), failed ones included; a request whose
attempts all failed raises :class:`~madrag.errors.RetriesExhausted` with their number and reasons.

The response cache is keyed by the request and the backend's identity (:meth:`ManagedProvider.backend_identity`):
what the backend says of itself (kind, model, endpoint URL, model file) and what its server reports (the models it
lists), asked once per run. Answers of another server, or of other weights served under the same name at the same
URL, are never taken for this one's.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from dataclasses import dataclass, field
from typing import Any

from madrag.errors import ConfigError, ProviderError, RetriesExhausted, TransientProviderError
from madrag.providers.accounting import CallTally, current_tally
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

    def __post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ConfigError(f"retries must be a whole number >= 0 (got {self.retries!r})")
        if not self.timeout_s > 0:
            raise ConfigError(f"the timeout must be more than 0 seconds (got {self.timeout_s!r})")

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
    _fitted: bool = field(default=False, repr=False)
    _sem: asyncio.Semaphore | None = field(default=None, repr=False)
    _identity: dict[str, Any] | None = field(default=None, repr=False)
    _identity_lock: asyncio.Lock | None = field(default=None, repr=False)

    @property
    def capabilities(self) -> Capabilities:
        """The backend's capabilities."""
        return self.provider.capabilities

    @property
    def max_concurrency(self) -> int:
        """Requests in flight at once: the configured limit, else the backend's."""
        return self.concurrency or self.provider.max_concurrency

    @property
    def timeout_s(self) -> float | None:
        """How long one attempt may take: the policy's timeout, None (no limit) for an in-process provider."""
        return None if self.provider.in_process else self.policy.timeout_s

    @property
    def given_concurrency(self) -> int | None:
        """The concurrency the caller gave (None: not given, or only fitted to the server's slots)."""
        return None if self._fitted else self.concurrency

    def limit_concurrency(self, limit: int) -> None:
        """Send at most ``limit`` requests at once from now on (the server said it has that many slots)."""
        self.concurrency = limit
        self._fitted = True
        self._sem = None

    def _semaphore(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.max_concurrency)
        return self._sem

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """The response to ``request``: from the cache, else from the backend (within the concurrency limit,
        retried on transient failures); :class:`RetriesExhausted` once the retries are spent. Requests sent and
        answers received are counted into the current call's tally."""
        self.provider.check(request)
        tally = current_tally()
        key = None
        if self.cache is not None:
            key = request.cache_key(await self.backend_identity())
            if (hit := self.cache.get(key)) is not None:
                if tally is not None:
                    tally.answered(hit)
                return hit
        if self.provider.queues_requests and self.concurrency is None:
            response = await self._with_retries(request, tally)  # the provider's own queue holds it
        else:
            async with self._semaphore():
                response = await self._with_retries(request, tally)
        if tally is not None:
            tally.answered(response)
        if self.cache is not None and key is not None:
            self.cache.put(key, response.model_copy(update={"retries": []}))
        return response

    async def backend_identity(self) -> dict[str, Any]:
        """What the response cache keys this backend's answers by: :meth:`Provider.cache_identity` plus what its
        server reports of itself (:meth:`Provider.server_identity`; None where it reports nothing or could not
        be asked, with the policy's retries). Asked once, on first use."""
        if self._identity is None:
            if self._identity_lock is None:
                self._identity_lock = asyncio.Lock()
            async with self._identity_lock:
                if self._identity is None:
                    self._identity = {**self.provider.cache_identity(), "server": await self._server_report()}
        return self._identity

    async def _server_report(self) -> Any:
        """The server's report of itself, retried as a request is; None when it cannot give one."""
        for attempt in range(self.policy.retries + 1):
            try:
                return await asyncio.wait_for(self.provider.server_identity(), self.policy.timeout_s)
            except (TransientProviderError, TimeoutError) as exc:
                if attempt == self.policy.retries:
                    log.warning(
                        "the server did not say what it serves (%s)", failure_reason(exc, self.policy.timeout_s)
                    )
                    return None
                await asyncio.sleep(self.policy.delay(attempt))
            except ProviderError:  # it has no such report (e.g. no /models): the endpoint and model alone
                return None
        return None

    async def _with_retries(self, request: ChatRequest, tally: CallTally | None = None) -> ChatResponse:
        """The answer, with the reasons of the attempts that failed before it; :class:`RetriesExhausted` (naming
        every reason) when all ``retries + 1`` attempts failed. Each attempt is counted into ``tally``."""
        reasons: list[str] = []
        for attempt in range(self.policy.retries + 1):
            try:
                self.requests_sent += 1
                if tally is not None:
                    tally.attempts += 1
                response = await asyncio.wait_for(self.provider.complete(request), self.timeout_s)
                return response.model_copy(update={"retries": reasons}) if reasons else response
            except (TransientProviderError, TimeoutError) as exc:
                reasons.append(failure_reason(exc, self.policy.timeout_s))
                if tally is not None:
                    tally.retries.append(reasons[-1])
                if attempt == self.policy.retries:
                    break
                wait = self.policy.delay(attempt)
                log.warning("transient provider failure (%s); retry %d in %.1fs", reasons[-1], attempt + 1, wait)
                await asyncio.sleep(wait)
        kinds = ", ".join(retry_kind(r) for r in reasons)
        raise RetriesExhausted(
            f"{self.provider.name} ({self.provider.model}) failed after {self.policy.retries + 1} attempts "
            f"({kinds}): {reasons[-1]}",
            attempts=len(reasons),
            reasons=reasons,
        )

    async def aclose(self) -> None:
        """Close the backend and the cache."""
        await self.provider.aclose()
        if self.cache is not None:
            self.cache.close()
