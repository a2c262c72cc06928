"""The response cache is per backend: the endpoint, the model and what the server says of itself are in its key,
so a run never gets another server's answers, and a cache hit is recorded (and counted) as one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers import stored_records
from tests.reference_clients import over
from tests.servers import free_port

from madrag.data import Essay
from madrag.errors import ProviderError
from madrag.evaluation.costs.render import render_text
from madrag.evaluation.costs.tally import cost_report
from madrag.pipeline.job import JobResult, ScoreJob, execute
from madrag.providers.base import ChatRequest, Message
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.providers.pool import EndpointPool
from madrag.providers.spec import ProviderSpec
from madrag.records import AgentRecord
from madrag.store import RunStore
from madrag.testing.stub_server import StubServer

MODEL = "stub-model"  # both stubs answer under this one name


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RetryPolicy, "delay", lambda self, attempt: 0.0)


def _job(asap: Path, essays: list[Essay], run_dir: Path, cache: Path, base_url: str, retries: int = 1) -> ScoreJob:
    return ScoreJob(
        essays=essays,
        rubric=asap / "rubric_set7.json",
        run_dir=run_dir,
        eval_fold=None,
        protocols=["MAD"],
        provider=ProviderSpec(kind="openai", model=MODEL, base_url=base_url, retries=retries, timeout_s=10),
        cache_dir=cache,
    )


async def _run(job: ScoreJob) -> tuple[JobResult, list[AgentRecord]]:
    result = await execute(job)
    return result, stored_records(job.run_dir)


async def test_two_servers_under_one_model_name_never_share_answers(
    tmp_path: Path, asap: Path, essays7: list[Essay]
) -> None:
    essays, cache = essays7[:1], tmp_path / "cache"
    with (
        StubServer(latency_s=0.0, answer_prefix="[A] ", fingerprint="weights-a") as a,
        StubServer(latency_s=0.0, answer_prefix="[B] ", fingerprint="weights-b") as b,
    ):
        _, on_a = await _run(_job(asap, essays, tmp_path / "a", cache, a.base_url))
        _, on_b = await _run(_job(asap, essays, tmp_path / "b", cache, b.base_url))
        b_requests = b.stats().requests
        _, again = await _run(_job(asap, essays, tmp_path / "a2", cache, a.base_url))
        a_requests = a.stats().requests
    assert len(on_a) == len(on_b) == len(again) == 12  # 4 traits x (Advocate, Skeptic, Judge)
    assert all(r.text.startswith("[A] ") and not r.cached and r.attempts == 1 for r in on_a)
    # the second server answered every call itself: none of the first server's answers
    assert all(r.text.startswith("[B] ") and not r.cached and r.attempts == 1 for r in on_b)
    assert b_requests == 12 + 1  # and the run's logprobs check before its first call
    # the first server again: every answer from the cache, recorded as such, no request sent but the check's
    assert a_requests == 12 + 2
    assert all(r.text.startswith("[A] ") and r.cached and r.attempts == 0 for r in again)
    store = RunStore(tmp_path / "a2" / "store.sqlite")
    try:
        report = cost_report(store)
    finally:
        store.close()
    assert report.total.cached_calls == 12 and report.total.attempts == 0
    assert "cache hits 12 calls" in render_text(report)


async def test_a_dead_server_gets_no_cached_answers(tmp_path: Path, asap: Path, essays7: list[Essay]) -> None:
    """The run of the issue: --base-url http://127.0.0.1:9/v1 --retries 1 took every answer from another server's
    cache entries and finished as if it had scored."""
    essays, cache = essays7[:1], tmp_path / "cache"
    with StubServer(latency_s=0.0) as live:
        await _run(_job(asap, essays, tmp_path / "live", cache, live.base_url))
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: the run stops before any call
    with pytest.raises(ProviderError, match="cannot reach the openai-compatible server"):
        await _run(_job(asap, essays, tmp_path / "dead", cache, dead))
    with StubServer(latency_s=0.0, fault_rate=1.0) as failing:  # up, but refuses every call
        result, records = await _run(_job(asap, essays, tmp_path / "failing", cache, failing.base_url))
    assert result.scores == [] and result.stats.failed_calls == 4  # each trait's first call (the Advocate)
    assert len(records) == 4 and all(r.failed and r.text == "" and not r.cached for r in records)
    assert all(r.attempts == 2 and r.role == "advocate" for r in records)  # 1 + --retries 1, both refused


async def test_a_restarted_server_with_other_weights_at_the_same_url_is_another_backend(
    tmp_path: Path, asap: Path, essays7: list[Essay]
) -> None:
    """Same URL, same model name, other weights (what the server reports at /v1/models): not the same backend."""
    essays, cache = essays7[:1], tmp_path / "cache"
    port = free_port()
    with StubServer(latency_s=0.0, port=port, answer_prefix="[old] ", fingerprint="weights-1") as old:
        _, before = await _run(_job(asap, essays, tmp_path / "old", cache, old.base_url))
        url = old.base_url
    with StubServer(latency_s=0.0, port=port, answer_prefix="[new] ", fingerprint="weights-2") as new:
        assert new.base_url == url
        _, after = await _run(_job(asap, essays, tmp_path / "new", cache, new.base_url))
        assert new.stats().requests == 12 + 1  # and the logprobs check
    assert all(r.text.startswith("[old] ") for r in before)
    assert all(r.text.startswith("[new] ") and not r.cached for r in after)


def _provider(models: httpx.Response | Exception, model: str = MODEL, url: str = "http://h:1/v1") -> Any:
    from madrag.providers.openai_compat import OpenAICompatProvider

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/models")
        if isinstance(models, Exception):
            raise models
        return models

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAICompatProvider(model, base_url=url, api_key_env="MADRAG_TEST_UNSET_KEY", http=over(client))


def _models(*entries: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, json={"object": "list", "data": list(entries)})


async def test_the_identity_is_the_endpoint_the_model_and_what_the_server_lists() -> None:
    vllm = {"id": MODEL, "created": 123, "owned_by": "vllm", "root": "/models/a", "permission": [{"id": "x"}]}
    cases = {
        "listed": _models(vllm, {"id": "other"}),
        "listed_again": _models({**vllm, "created": 456, "permission": [{"id": "y"}]}),  # same weights
        "other_weights": _models({**vllm, "root": "/models/b"}),
        "one_model_any_name": _models({"id": "/models/a.gguf"}),
        "no_models_endpoint": httpx.Response(404, json={"error": {"message": "not found"}}),
        "down": httpx.ConnectError("refused"),
    }
    identities = {}
    for name, answer in cases.items():
        managed = ManagedProvider(_provider(answer), RetryPolicy(retries=1, base_delay_s=0.0, max_delay_s=0.0))
        identities[name] = await managed.backend_identity()
        await managed.aclose()
    assert identities["listed"]["server"] == {"model": {"id": MODEL, "owned_by": "vllm", "root": "/models/a"}}
    assert identities["listed"] == identities["listed_again"]  # the request's time and ids are left out
    assert identities["other_weights"] != identities["listed"]
    assert identities["one_model_any_name"]["server"] == {"models": ["/models/a.gguf"]}
    assert identities["no_models_endpoint"]["server"] is None and identities["down"]["server"] is None
    assert identities["listed"]["base_url"] == "http://h:1/v1" and identities["listed"]["model"] == MODEL
    request = ChatRequest(messages=[Message(role="user", content="hi")])
    keys = {request.cache_key(identity) for identity in identities.values()}
    assert len(keys) == len(identities) - 2  # listed == listed_again, no_models_endpoint == down
    other_url = ManagedProvider(_provider(cases["listed"], url="http://h:2/v1"))
    assert request.cache_key(await other_url.backend_identity()) not in keys
    await other_url.aclose()
    pool = ManagedProvider(EndpointPool([_provider(cases["listed"]), _provider(cases["down"], url="http://h:2/v1")]))
    both = await pool.backend_identity()
    assert [e["base_url"] for e in both["endpoints"]] == ["http://h:1/v1", "http://h:2/v1"]
    assert both["server"] == [identities["listed"]["server"], None]
    await pool.aclose()
