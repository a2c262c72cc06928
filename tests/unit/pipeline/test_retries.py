"""Retries and their reasons are kept with each call (never an empty reason for a timeout) and counted in costs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.helpers import make_ctx

from madrag.agents.calls import AgentCall, debater
from madrag.errors import ProviderError, TransientProviderError
from madrag.evaluation.costs.render import render_text, report_to_dict
from madrag.evaluation.costs.tally import cost_report
from madrag.providers.base import ChatRequest, ChatResponse, Message, Provider
from madrag.providers.cache import ResponseCache
from madrag.providers.policy import ManagedProvider, RetryPolicy, failure_reason, retry_kind


class Troubled(Provider):
    """Fails as scripted (an exception, or ``"hang"`` to exceed the timeout), then answers ``ok``."""

    def __init__(self, failures: list[Exception | str]) -> None:
        self.name, self.model = "troubled", "m"
        self.failures = list(failures)

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        if self.failures:
            failure = self.failures.pop(0)
            if failure == "hang":
                await asyncio.sleep(5)
            elif isinstance(failure, Exception):
                raise failure
        return ChatResponse(text="ok")


FAILURES: list[Exception | str] = [
    TransientProviderError("http://x/v1 answered HTTP 429: slow down"),
    "hang",
    TransientProviderError("http://x/v1 unreachable: ConnectError: connection reset by peer"),
    TransientProviderError("http://x/v1 answered HTTP 503: busy"),
]


def _policy(retries: int) -> RetryPolicy:
    return RetryPolicy(retries=retries, base_delay_s=0.0, max_delay_s=0.0, timeout_s=0.05)


def test_reasons_have_kinds_and_a_timeout_says_so() -> None:
    assert failure_reason(TimeoutError(), 30.0) == "timed out after 30s (no answer)"
    kinds = [retry_kind(failure_reason(f, 0.05)) if isinstance(f, Exception) else "" for f in FAILURES]
    assert kinds == ["HTTP 429", "", "connection", "HTTP 503"]
    assert retry_kind(failure_reason(TimeoutError(), 1.0)) == "timeout"


async def test_the_answer_carries_every_retry_reason_and_the_cache_none(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "r.sqlite")
    managed = ManagedProvider(Troubled(FAILURES), _policy(4), cache=cache)
    request = ChatRequest(messages=[Message(role="user", content="hi")])
    response = await managed.complete(request)
    assert response.text == "ok" and managed.requests_sent == 5
    assert [retry_kind(r) for r in response.retries] == ["HTTP 429", "timeout", "connection", "HTTP 503"]
    assert all(response.retries)
    again = await managed.complete(request)
    assert again.cached and again.retries == []
    cache.close()


async def test_giving_up_names_every_kind() -> None:
    managed = ManagedProvider(Troubled(["hang", "hang"]), _policy(1))
    with pytest.raises(ProviderError, match=r"failed after 2 attempts \(timeout, timeout\): timed out after 0.05s"):
        await managed.complete(ChatRequest(messages=[Message(role="user", content="hi")]))


async def test_records_keep_retries_and_costs_count_them(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, Troubled(FAILURES[:2]))
    ctx.provider.policy = _policy(3)
    call = AgentCall("debate/adv_r1", "e1", "Ideas", "advocate", [Message(role="user", content="x")], 0.7, 50)
    record = await debater(ctx, call)
    assert [retry_kind(r) for r in record.retries] == ["HTTP 429", "timeout"]
    stored = ctx.store.get(call.key)
    assert stored is not None and stored.retries == record.retries
    report = cost_report([stored])
    assert report.total.retries == 2 and report.retry_kinds == {"HTTP 429": 1, "timeout": 1}
    text = render_text(report)
    assert "retries 2 over 1 calls: HTTP 429 x1, timeout x1" in text and "slow down" in text
    assert report_to_dict(report)["retried_calls"] == {call.key: record.retries}
    ctx.store.close()


async def test_a_request_retried_once_is_recorded_as_two_requests_sent_for_one_answer(tmp_path: Path) -> None:
    """Issue 48: a request retried once was recorded as ``requests=1``; the record now says what it counts: one
    answer used (``answers``), two requests sent (``attempts``). (A store of records written before reads the same
    through madrag.pipeline.migrations: tests/unit/pipeline/test_store_migrations.py.)"""
    import json

    ctx = make_ctx(tmp_path, Troubled(FAILURES[:1]))
    ctx.provider.policy = _policy(3)
    call = AgentCall("debate/adv_r1", "e1", "Ideas", "advocate", [Message(role="user", content="x")], 0.7, 50)
    await debater(ctx, call)
    stored = ctx.store.get(call.key)
    assert stored is not None and (stored.answers, stored.attempts, len(stored.retries)) == (1, 2, 1)
    as_written = json.loads(stored.model_dump_json())
    assert (as_written["answers"], as_written["attempts"]) == (1, 2) and "requests" not in as_written
    ctx.store.close()
