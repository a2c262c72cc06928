"""OpenAICompatProvider against a real llama.cpp OpenAI-compatible server running SmolLM2 (CPU)."""

from __future__ import annotations

import math

import pytest

from madrag.providers.base import ChatRequest, Message
from madrag.providers.openai_compat import OpenAICompatProvider, RequestShape

try:
    from tests.servers import llama_cpp_server_fixture
except ImportError:  # tests/ itself on sys.path (pytest's rootdir-less import mode)
    from servers import llama_cpp_server_fixture  # type: ignore[no-redef,import-not-found,unused-ignore]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

llama_server = llama_cpp_server_fixture(scope="module")

REQUEST = ChatRequest(
    messages=[
        Message(role="system", content="You are a concise assistant."),
        Message(role="user", content="Name one colour of the sky."),
    ],
    temperature=0.0,
    max_tokens=16,
    seed=7,
    logprobs=True,
    top_logprobs=5,
)


async def test_chat_with_logprobs_is_deterministic(llama_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MADRAG_NO_KEY", raising=False)
    provider = OpenAICompatProvider(model="smollm2", base_url=llama_server, api_key_env="MADRAG_NO_KEY")
    try:
        first = await provider.complete(REQUEST)
        second = await provider.complete(REQUEST)
    finally:
        await provider.aclose()

    assert first.text.strip()
    assert first.tokens, "the server returned no tokens"
    assert 1 <= len(first.tokens) <= 16
    for tok in first.tokens:
        assert math.isfinite(tok.logprob) and tok.logprob <= 1e-6
        assert 1 <= len(tok.top) <= 5
        assert all(math.isfinite(a.logprob) and a.logprob <= 1e-6 for a in tok.top)
    # at temperature 0 the generated token is the most likely one
    first_tok = first.tokens[0]
    assert first_tok.logprob >= max(a.logprob for a in first_tok.top) - 1e-4
    assert "".join(t.token for t in first.tokens).strip() == first.text.strip()
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    assert first.finish_reason in {"stop", "length"}
    assert first.latency_s > 0
    assert first.raw["choices"][0]["logprobs"]["content"]

    assert second.text == first.text
    assert [t.token for t in second.tokens or []] == [t.token for t in first.tokens]


async def test_both_clients_give_the_same_response(llama_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lean httpx client and the openai package's client: the same text, tokens, top-5 logprobs, usage and raw
    answer (but its id and time) from the real server, at temperature 0 with a seed."""
    pytest.importorskip("openai")
    monkeypatch.delenv("MADRAG_NO_KEY", raising=False)
    answers = []
    for client in ("httpx", "openai"):
        provider = OpenAICompatProvider(
            model="smollm2", base_url=llama_server, api_key_env="MADRAG_NO_KEY", shape=RequestShape(client=client)
        )
        try:
            answers.append(await provider.complete(REQUEST))
        finally:
            await provider.aclose()
    lean, package = (a.model_dump(exclude={"latency_s", "raw"}) for a in answers)
    assert lean["tokens"] and lean == package
    volatile = {"id", "created"}
    assert {k: v for k, v in answers[0].raw.items() if k not in volatile} == {
        k: v for k, v in answers[1].raw.items() if k not in volatile
    }
