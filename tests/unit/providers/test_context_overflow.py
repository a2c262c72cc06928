"""A server's 400 that says the prompt does not fit its context (llama.cpp's, vLLM's, OpenAI's words) is a
:class:`ContextOverflow`, which a run records as its essay-trait's failed call (no retry can help); any other 400
stays the error that stops the run."""

from __future__ import annotations

import pytest

from madrag.errors import ContextOverflow, ProviderError
from madrag.providers.openai_compat import OpenAICompatProvider
from madrag.providers.openai_http import StatusFailure


@pytest.mark.parametrize(
    "detail",
    [
        "the request exceeds the available context size, try increasing it",  # llama.cpp's server
        "This model's maximum context length is 2048 tokens. However, you requested 3000 tokens (2900 in the "
        "messages, 100 in the completion). Please reduce the length of the messages or completion.",  # vLLM
        "context_length_exceeded: Your input exceeds the context window of this model.",  # OpenAI
    ],
)
async def test_a_servers_context_refusal_is_an_overflow(detail: str) -> None:
    provider = OpenAICompatProvider("m", base_url="http://127.0.0.1:9/v1", api_key_env="MADRAG_NO_KEY")
    try:
        error = provider._map_error(StatusFailure(400, detail))
    finally:
        await provider.aclose()
    assert isinstance(error, ContextOverflow) and detail[:30] in str(error)


async def test_another_400_is_not() -> None:
    provider = OpenAICompatProvider("m", base_url="http://127.0.0.1:9/v1", api_key_env="MADRAG_NO_KEY")
    try:
        error = provider._map_error(StatusFailure(400, "'messages' must be a non-empty list"))
    finally:
        await provider.aclose()
    assert isinstance(error, ProviderError) and not isinstance(error, ContextOverflow)
