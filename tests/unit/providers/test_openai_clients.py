"""madrag's HTTP client (aiohttp) and the reference clients (httpx's, the openai package's) record the same run
against the stub server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.helpers import StubBank, make_ctx
from tests.reference_clients import ClientKind, factory

from madrag.data import Essay
from madrag.errors import TransientProviderError
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.providers.base import ChatRequest, Message
from madrag.providers.openai_compat import OpenAICompatProvider
from madrag.rubric import Rubric, Trait
from madrag.testing.stub_answers import StubConfig
from madrag.testing.stub_server import StubServer

TIMING = {"latency_s", "wall_s", "created_at"}
"""What differs between two runs of the same calls: how long they took and when."""

TRAITS = [Trait(name=n, min=1, max=4, levels={s: f"{n} level {s}" for s in range(1, 5)}) for n in ("Ideas", "Style")]
ESSAYS = [
    Essay(id=f"e{i}", text=f"Essay {i}: a story about waiting. " * 15, scores={"Ideas": 1 + i % 4}) for i in range(3)
]
POOL = [Essay(id=f"p{s}", text=f"Pool essay scored {s}. " * 10, scores={"Ideas": s, "Style": s}) for s in range(1, 5)]

SCENARIOS = {
    # transient 503s (retried: the records keep why), logprobs top-5, usage reported
    "faults": StubConfig(capacity=4, latency_s=0.0, debater_tokens=40, judge_tokens=20, fault_rate=0.3),
    # refuses max_tokens, temperature and logprobs as a reasoning model does (adapted once: the records keep what
    # was sent; run without logprobs), reports no usage (None, never 0)
    "reasoning": StubConfig(
        capacity=4, latency_s=0.0, debater_tokens=40, judge_tokens=20, reasoning_model=True, usage=False
    ),
}


async def record_run(
    tmp_path: Path, config: StubConfig, client: ClientKind, port: int
) -> tuple[list[dict[str, Any]], int]:
    """Every record of a MADRAG run over a fresh stub at ``port`` (0: any; its faults fall on the same requests as
    another fresh stub's), by key; and the port."""
    folder = tmp_path / client
    folder.mkdir()
    with StubServer(config, port=port) as server:
        port = server.port
        provider = OpenAICompatProvider(
            config.model,
            base_url=server.base_url,
            max_concurrency=4,
            http=factory(client),
            supports_logprobs=not config.reasoning_model,
        )
        ctx = make_ctx(folder, provider, bank=StubBank(POOL), retries=6)
        try:
            await run_scoring(ctx, ESSAYS, Rubric(traits=TRAITS), [get_protocol("MADRAG")])
        finally:
            await provider.aclose()
    records = sorted(ctx.store.records(), key=lambda r: r.key)
    ctx.store.close()
    return [r.model_dump(mode="json", exclude=TIMING) for r in records], port


@pytest.mark.parametrize("other", ["aiohttp", "openai"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_each_client_records_the_same_run(tmp_path: Path, scenario: str, other: ClientKind) -> None:
    if other == "openai":
        pytest.importorskip("openai")
    config = SCENARIOS[scenario]
    lean, port = await record_run(tmp_path, config, "httpx", 0)
    package, _ = await record_run(tmp_path, config, other, port)  # the same URL: in the records' messages
    assert len(lean) == len(package) == len(ESSAYS) * len(TRAITS) * 3  # Advocate, Skeptic, Judge per trait
    for ours, theirs in zip(lean, package, strict=True):
        assert ours == theirs
    judges = [r for r in lean if r["role"] == "judge"]
    assert all(r["score"]["reported"] is not None for r in judges)
    if scenario == "faults":
        assert all(r["tokens"] and len(r["tokens"][0]["top"]) == 5 for r in judges)  # top-5 logprobs recorded
        assert all(r["score"]["distribution"] for r in judges)
        assert any(r["retries"] for r in lean), "no fault fell on any request: the scenario tests nothing"
        assert all(r["usage"]["prompt_tokens"] is not None for r in lean)
    else:
        assert all(set(r["usage"].values()) == {None} for r in lean)  # the stub reports no usage: all unknown
        assert all("max_completion_tokens" in r["settings"]["sent"] for r in lean)


async def test_both_httpx_clients_fail_the_same_way_on_a_closed_port() -> None:
    """A refused connection: the same transient 'unreachable' error from the two reference clients (madrag's own
    names aiohttp's exception: tests/unit/providers/test_http_client.py)."""
    pytest.importorskip("openai")
    request = ChatRequest(messages=[Message(role="user", content="Score it.")])
    errors = []
    for client in ("httpx", "openai"):
        provider = OpenAICompatProvider("m", base_url="http://127.0.0.1:9/v1", http=factory(client), timeout_s=10.0)
        with pytest.raises(TransientProviderError) as info:
            await provider.complete(request)
        await provider.aclose()
        errors.append(str(info.value))
    assert "unreachable" in errors[0] and errors[0] == errors[1]
