"""The stub OpenAI-compatible server: real HTTP on 127.0.0.1, fixed capacity, role-aware answers, logprobs."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
from tests.helpers import make_ctx

from madrag.agents.judge import distribution_from_tokens
from madrag.data import Essay
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.providers.base import ChatRequest, Message
from madrag.providers.openai_compat import OpenAICompatProvider
from madrag.rubric import Rubric, Trait
from madrag.testing.stub_answers import classify, score_range
from madrag.testing.stub_server import StubServer


def test_roles_and_ranges_are_read_from_the_prompt() -> None:
    judge = [
        {"role": "system", "content": "You are the Synthesizer-Judge"},
        {"role": "user", "content": "between 1 and 6."},
    ]
    assert classify(judge) == "judge" and score_range(judge) == (1, 6)
    assert classify([{"role": "system", "content": "You are an Advocate Agent"}]) == "advocate"
    follow = [*judge, {"role": "user", "content": "State your final score now, N between 2 and 4."}]
    assert classify(follow) == "followup" and score_range(follow) == (2, 4)


async def test_capacity_latency_scores_and_logprobs() -> None:
    trait = Trait(name="Ideas", min=1, max=6, levels={s: f"level {s}" for s in range(1, 7)})
    request = ChatRequest(
        messages=[
            Message(role="system", content="You are the Synthesizer-Judge"),
            Message(role="user", content="End with 'Final score: N' where N is an integer between 1 and 6."),
        ],
        logprobs=True,
        top_logprobs=5,
    )
    with StubServer(capacity=2, latency_s=0.1) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        models = httpx.get(f"{server.base_url}/models").json()
        assert models["data"][0]["id"] == server.config.model
        provider = OpenAICompatProvider(server.config.model, base_url=server.base_url, max_concurrency=6)
        start = time.monotonic()
        try:
            responses = await asyncio.gather(*(provider.complete(request) for _ in range(6)))
        finally:
            await provider.aclose()
        elapsed = time.monotonic() - start
        stats = server.stats()
    assert elapsed >= 0.3  # 6 requests, 2 at a time, 0.1 s each
    assert stats.requests == 6 and stats.max_in_flight == 2 and stats.max_waiting >= 3
    assert stats.by_role == {"judge": 6}
    for response in responses:
        assert response.text.splitlines()[-1].startswith("Final score: ")
        assert 1 <= int(response.text.split()[-1]) <= 6 and response.tokens is not None
        dist = distribution_from_tokens(response.text, response.tokens, trait)
        assert dist is not None and max(dist, key=lambda s: dist[s]) == int(response.text.split()[-1])


async def test_pipeline_over_http(tmp_path: Path) -> None:
    rubric = Rubric(traits=[Trait(name="Ideas", min=0, max=3, levels={s: f"level {s}" for s in range(4)})])
    essays = [Essay(id=f"e{i}", text="A story about waiting. " * 20) for i in range(3)]
    with StubServer(capacity=4, latency_s=0.01) as server:
        provider = OpenAICompatProvider(server.config.model, base_url=server.base_url, max_concurrency=4)
        ctx = make_ctx(tmp_path, provider)
        try:
            scores = await run_scoring(ctx, essays, rubric, [get_protocol("MAD")])
        finally:
            await provider.aclose()
        stats = server.stats()
    assert stats.requests == 9 and stats.by_role == {"advocate": 3, "skeptic": 3, "judge": 3}
    assert all(s.score is not None and 0 <= s.score <= 3 for s in scores)
    judge = ctx.store.get(scores[0].record_key)
    assert judge is not None and judge.score is not None and judge.score.distribution is not None
