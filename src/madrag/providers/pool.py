"""Several endpoints serving the same model as one provider: balanced, each within its own limit, with failover.

``madrag score --base-url URL1 --base-url URL2 ...`` (e.g. one vLLM server per GPU node) builds an
:class:`EndpointPool` of OpenAI-compatible providers, each with ``--concurrency`` slots of its own. A call goes
to the endpoint with the lowest load (requests in flight or waiting there, over its slots), so a fast endpoint
takes more of the work and a slow one fewer. An endpoint that fails a call with a transient error (unreachable,
5xx, timeout) is taken out for a cool-down that doubles with each failure in a row (``cooldown_s`` up to
``max_cooldown_s``) and the call is tried at once on another endpoint; a taken-out endpoint gets calls again
when its cool-down ends, and a success brings it fully back. Only when every endpoint has failed the call does
the pool raise the transient error, which the call policy (:class:`~madrag.providers.policy.ManagedProvider`)
retries after its back-off; a permanent error (a refused request) is raised at once, as from one endpoint.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from madrag.errors import ConfigError, TransientProviderError
from madrag.providers.base import ChatRequest, ChatResponse, Provider

log = logging.getLogger(__name__)


@dataclass
class Endpoint:
    """One endpoint of a pool and what the pool knows of it."""

    provider: Provider
    in_flight: int = 0
    calls: int = 0
    failures: int = 0  # outages in a row (failed calls sent while it was taking calls)
    down_until: float = 0.0
    failed_at: float = float("-inf")

    @property
    def load(self) -> float:
        """Requests in flight (or waiting) here per slot."""
        return self.in_flight / max(1, self.provider.max_concurrency)

    def up(self, now: float) -> bool:
        """Whether the endpoint takes calls (not cooling down after a failure)."""
        return now >= self.down_until


class EndpointPool(Provider):
    """Endpoints of one model as one provider (see the module docstring)."""

    def __init__(self, endpoints: Sequence[Provider], cooldown_s: float = 2.0, max_cooldown_s: float = 60.0) -> None:
        if not endpoints:
            raise ConfigError("an endpoint pool needs at least one endpoint")
        first = endpoints[0]
        if any(e.model != first.model or e.capabilities != first.capabilities for e in endpoints):
            raise ConfigError("the endpoints of a pool must serve the same model with the same capabilities")
        self.name = first.name
        self.model = first.model
        self.capabilities = first.capabilities
        self.endpoints = [Endpoint(e) for e in endpoints]
        self.cooldown_s = cooldown_s
        self.max_cooldown_s = max_cooldown_s

    @property
    def max_concurrency(self) -> int:
        """Every endpoint's slots together."""
        return sum(e.provider.max_concurrency for e in self.endpoints)

    def pick(self, tried: set[int]) -> int | None:
        """The endpoint a call goes to next: the least loaded of those up, else (all cooling down) the one back
        soonest; never one this call has already failed on. None when every endpoint has been tried."""
        now = time.monotonic()
        candidates = [i for i in range(len(self.endpoints)) if i not in tried]
        if not candidates:
            return None
        up = [i for i in candidates if self.endpoints[i].up(now)]
        if up:
            return min(up, key=lambda i: (self.endpoints[i].load, self.endpoints[i].calls))
        return min(candidates, key=lambda i: self.endpoints[i].down_until)

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        tried: set[int] = set()
        last: TransientProviderError | None = None
        while (index := self.pick(tried)) is not None:
            endpoint = self.endpoints[index]
            endpoint.in_flight += 1
            endpoint.calls += 1
            sent = time.monotonic()
            try:
                response = await endpoint.provider.complete(request)
            except TransientProviderError as exc:
                self._taken_out(endpoint, exc, sent)
                tried.add(index)
                last = exc
                continue
            finally:
                endpoint.in_flight -= 1
            endpoint.failures = 0
            endpoint.down_until = 0.0
            return response
        assert last is not None
        raise TransientProviderError(f"every endpoint of the pool failed; last: {last}") from last

    def _taken_out(self, endpoint: Endpoint, exc: TransientProviderError, sent: float) -> None:
        """Take the endpoint out after a failed call; calls that were already in flight when an earlier one
        failed belong to the same outage and do not lengthen the cool-down."""
        if endpoint.failed_at >= sent:
            return
        now = time.monotonic()
        endpoint.failures += 1
        endpoint.failed_at = now
        pause = min(self.max_cooldown_s, self.cooldown_s * 2 ** (endpoint.failures - 1))
        endpoint.down_until = now + pause
        log.warning("endpoint taken out for %.1fs after a failure (%s)", pause, exc)

    def describe(self) -> dict[str, Any]:
        """The first endpoint's description, with every endpoint's."""
        info = self.endpoints[0].provider.describe()
        info["endpoints"] = [e.provider.describe() for e in self.endpoints]
        info["max_concurrency"] = self.max_concurrency
        return info

    def cache_identity(self) -> dict[str, Any]:
        """Every endpoint's identity (a call may be answered by any of them)."""
        return {**super().cache_identity(), "endpoints": [e.provider.cache_identity() for e in self.endpoints]}

    async def server_identity(self) -> list[Any]:
        """Each endpoint's report of itself (None for one that could not say)."""
        reports = await asyncio.gather(*(e.provider.server_identity() for e in self.endpoints), return_exceptions=True)
        return [None if isinstance(r, BaseException) else r for r in reports]

    def stats(self) -> list[dict[str, Any]]:
        """Per endpoint: calls sent, failures in a row, whether it is taking calls now."""
        now = time.monotonic()
        return [{"calls": e.calls, "failures": e.failures, "up": e.up(now)} for e in self.endpoints]

    async def aclose(self) -> None:
        """Close every endpoint."""
        for endpoint in self.endpoints:
            await endpoint.provider.aclose()
