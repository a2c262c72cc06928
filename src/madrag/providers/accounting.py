"""What one agent call cost the backend: every request sent (failed attempts included), the answers it got and
those served from the response cache.

An agent call (:func:`madrag.agents.calls.once`) opens a :func:`tallying` scope around everything it asks; the
call policy (:class:`~madrag.providers.policy.ManagedProvider`) and a backend that sends more than one HTTP request
per attempt (an OpenAI-compatible server refusing a parameter: the request is adapted and sent again) count into
the scope's :class:`CallTally` through :func:`current_tally`. Outside a scope nothing is counted. The scope is a
context variable, so concurrent calls (each in its own task) never count into each other's tally.

The checks before a run's first call (:mod:`madrag.pipeline.preflight`) are no agent call: their HTTP requests are
counted by madrag's HTTP client (:func:`count_sent`) into a :func:`counting_checks` scope's :class:`CheckTally`,
by check, and the run keeps the sum (``madrag costs`` shows them beside the calls' requests).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypeVar

from madrag.providers.base import ChatResponse, Usage


@dataclass
class CallTally:
    """Requests one agent call sent to its backend and the answers it got."""

    attempts: int = 0  # requests sent to the backend, failed ones included (0: every answer from the cache)
    answers: int = 0  # responses received, from the backend or from the cache
    retries: list[str] = field(default_factory=list)  # why each failed attempt failed
    usage: Usage = field(default_factory=Usage.zero)  # of the answers received
    models: Counter[str] = field(default_factory=Counter)  # the model each answer names

    def answered(self, response: ChatResponse) -> None:
        """Count an answer (its usage; the model it names)."""
        self.answers += 1
        self.usage = self.usage + response.usage
        if response.model:
            self.models[response.model] += 1

    @property
    def answered_model(self) -> str | None:
        """The model the answers name (the most named), None when no answer named one."""
        return self.models.most_common(1)[0][0] if self.models else None


_CURRENT: ContextVar[CallTally | None] = ContextVar("madrag_call_tally", default=None)
T = TypeVar("T")


@contextmanager
def _scope(var: ContextVar[T | None], tally: T) -> Iterator[T]:
    """``tally`` as ``var``'s value inside the ``with`` block (in this task and the tasks it starts)."""
    token = var.set(tally)
    try:
        yield tally
    finally:
        var.reset(token)


def tallying() -> AbstractContextManager[CallTally]:
    """A fresh tally for the requests made inside the ``with`` block (in this task and the tasks it starts)."""
    return _scope(_CURRENT, CallTally())


def current_tally() -> CallTally | None:
    """The tally of the agent call being made, or None outside one."""
    return _CURRENT.get()


def count_extra_request() -> None:
    """One more HTTP request within one attempt (a backend resending an adapted request)."""
    if (tally := _CURRENT.get()) is not None:
        tally.attempts += 1


@dataclass
class CheckTally:
    """HTTP requests sent by the checks before a run's first call, by check (``reachable``, ``logprobs`` ...)."""

    by_check: dict[str, int] = field(default_factory=dict)
    step: str = "other"

    @contextmanager
    def during(self, step: str) -> Iterator[None]:
        """Count the requests sent inside the ``with`` block as ``step``'s."""
        before, self.step = self.step, step
        try:
            yield
        finally:
            self.step = before


_CHECKS: ContextVar[CheckTally | None] = ContextVar("madrag_check_tally", default=None)


def counting_checks() -> AbstractContextManager[CheckTally]:
    """A fresh tally of the HTTP requests sent inside the ``with`` block (in this task and the tasks it starts)."""
    return _scope(_CHECKS, CheckTally())


def count_sent() -> None:
    """One HTTP request sent (madrag's HTTP client calls it for each): counted inside a :func:`counting_checks`
    scope, by its current step; elsewhere an agent call's :class:`CallTally` counts its requests."""
    if (tally := _CHECKS.get()) is not None:
        tally.by_check[tally.step] = tally.by_check.get(tally.step, 0) + 1
