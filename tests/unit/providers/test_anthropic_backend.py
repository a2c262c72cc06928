"""The ``anthropic`` backend (one file: madrag/providers/anthropic.py) against a stub of Anthropic's Messages API
as its documentation defines it (tests/anthropic_stub.py: ``POST /v1/messages`` with the ``x-api-key`` and
``anthropic-version`` headers; ``system`` apart from ``messages``; the answer's ``content`` blocks, ``stop_reason``
and ``usage``; errors as ``{"type": "error", "error": {"type", "message"}}``, 529 when overloaded)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.anthropic_stub import KEY, Stub, messages_api

import madrag
from madrag.cli.backend_options import spec_from_options
from madrag.errors import ProviderError, TransientProviderError
from madrag.providers.anthropic import AnthropicProvider
from madrag.providers.base import ChatRequest, Message
from madrag.providers.spec import make_provider, spec_identity

RUBRIC = {"traits": [{"name": t, "min": 0, "max": 3, "levels": dict.fromkeys(range(4), "...")} for t in "AB"]}


@pytest.fixture
def stub() -> Iterator[tuple[Stub, str]]:
    found = Stub()
    with messages_api(found) as url:
        yield found, url


async def test_a_request_is_the_messages_api_and_the_answer_read(
    stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, url = stub
    monkeypatch.setenv("STUB_ANTHROPIC_KEY", KEY)
    spec = spec_from_options(provider="anthropic", model="claude-x", base_url=[url], api_key_env="STUB_ANTHROPIC_KEY")
    assert spec_identity(spec) == {"kind": "anthropic", "model": "claude-x", "base_url": url,
                                   "api_key_env": "STUB_ANTHROPIC_KEY"}  # fmt: skip
    provider = make_provider(spec)
    assert isinstance(provider, AnthropicProvider)
    messages = [Message(role="system", content="You are a rater."), Message(role="user", content="Score this.")]
    response = await provider.complete(ChatRequest(messages=messages, max_tokens=64, stop=["END"]))
    await provider.aclose()
    headers, body = server.requests[0]
    assert headers["anthropic-version"] == "2023-06-01" and headers["x-api-key"] == KEY
    assert body == {"model": "claude-x", "max_tokens": 64, "temperature": 0.0, "system": "You are a rater.",
                    "messages": [{"role": "user", "content": "Score this."}], "stop_sequences": ["END"]}  # fmt: skip
    assert response.text == server.reply and response.finish_reason == "stop" and response.model == "claude-x"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (12, 7)


async def test_refusals_are_one_line_and_overload_is_retried(
    stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, url = stub
    request = ChatRequest(messages=[Message(role="user", content="Hi")])
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    keyless = make_provider(spec_from_options(provider="anthropic", model="m", base_url=[url]))
    with pytest.raises(ProviderError, match="anthropic answered 401: invalid x-api-key") as refused:
        await keyless.complete(request)
    assert not isinstance(refused.value, TransientProviderError)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)  # the backend's own default variable
    provider = make_provider(spec_from_options(provider="anthropic", model="m", base_url=[url]))
    server.status = 529
    with pytest.raises(TransientProviderError, match="anthropic answered 529"):
        await provider.complete(request)
    with pytest.raises(ProviderError, match="gives no logprobs"):  # the API has none: refused before a call
        await provider.complete(request.model_copy(update={"logprobs": True}))
    await keyless.aclose()
    await provider.aclose()


async def test_the_python_api_scores_with_it(
    stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server, url = stub
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    result = await madrag.ascore(
        ["One essay."], RUBRIC, protocol="MA", provider=f"anthropic:claude-x@{url}", run_dir=tmp_path, progress=False
    )
    assert [s.score for s in result.trait_scores] == [2, 2] and result.stats.made == len(server.requests) == 2
    with sqlite3.connect(tmp_path / "store.sqlite") as conn:
        stored = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()[0])
    assert stored["provider"] == {"kind": "anthropic", "model": "claude-x", "base_url": url,
                                  "api_key_env": "ANTHROPIC_API_KEY"}  # fmt: skip
