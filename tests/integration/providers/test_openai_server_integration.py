"""OpenAICompatProvider against a real OpenAI-compatible server: llama.cpp's C++ server (``llama-server``, from the
xllamacpp wheel) running SmolLM2 on the CPU, with both HTTP clients: logprobs and their alternatives, the JSON
schema in both request forms, seed, stop and the prompt tokens the server served from its prefix cache."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

from madrag.agents.calls import CallContext
from madrag.agents.prompts import PromptLibrary
from madrag.data import load_asap, split_by_fold
from madrag.data.shipped import find_asap_dir
from madrag.protocols import get_protocol
from madrag.providers.base import ChatRequest, ChatResponse, Message
from madrag.providers.openai_compat import OpenAICompatProvider, RequestShape
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.rubric import load_rubric
from madrag.settings import ScoringSettings
from madrag.store import RunStore

try:
    from tests.reference_clients import ClientKind, factory
    from tests.servers import SERVED_MODEL, llama_server_fixture
except ImportError:  # tests/ itself on sys.path (pytest's rootdir-less import mode)
    from reference_clients import ClientKind, factory  # type: ignore[no-redef,import-not-found,unused-ignore]
    from servers import SERVED_MODEL, llama_server_fixture  # type: ignore[no-redef,import-not-found,unused-ignore]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

llama_server = llama_server_fixture(scope="module", threads=2)
CLIENTS: tuple[ClientKind, ...] = ("httpx", "aiohttp", "openai")

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
    provider = OpenAICompatProvider(model=SERVED_MODEL, base_url=llama_server, api_key_env="MADRAG_NO_KEY")
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
    assert first.usage.prompt_tokens is not None and first.usage.completion_tokens is not None
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    assert first.finish_reason in {"stop", "length"}
    assert first.latency_s > 0
    assert first.raw["choices"][0]["logprobs"]["content"]

    assert second.text == first.text
    assert [t.token for t in second.tokens or []] == [t.token for t in first.tokens]


async def test_both_clients_give_the_same_response(llama_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lean client on httpx and on aiohttp, and the openai package's client: the same text, tokens, top-5
    logprobs, usage and raw answer (but its id, time and timings) from the real server, at temperature 0 with a
    seed. The same prompt is sent once first, so that every call finds it in the server's prefix cache alike."""
    pytest.importorskip("openai")
    monkeypatch.delenv("MADRAG_NO_KEY", raising=False)
    await complete("httpx", REQUEST, llama_server)
    answers = [await complete(client, REQUEST, llama_server) for client in CLIENTS]
    lean, *others = (a.model_dump(exclude={"latency_s", "raw"}) for a in answers)
    assert lean["tokens"] and len(others) == len(CLIENTS) - 1 and all(other == lean for other in others)
    assert lean["usage"]["cached_prompt_tokens"] is not None
    volatile = {"id", "created", "timings"}
    raws = [{k: v for k, v in a.raw.items() if k not in volatile} for a in answers]
    assert all(raw == raws[0] for raw in raws[1:])


async def complete(client: ClientKind, request: ChatRequest, base_url: str, **shape: Any) -> ChatResponse:
    """One request through a fresh provider with that client (and request shape)."""
    provider = OpenAICompatProvider(
        model=SERVED_MODEL,
        base_url=base_url,
        api_key_env="MADRAG_NO_KEY",
        shape=RequestShape(**shape),
        http=factory(client),
    )
    try:
        return await provider.complete(request)
    finally:
        await provider.aclose()


def ask(content: str, **fields: Any) -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content=content)], temperature=0.0, max_tokens=16, **fields)


@pytest.mark.parametrize("client", CLIENTS)
async def test_top_logprobs_are_as_many_as_asked_and_none_when_none_asked(
    llama_server: str, client: ClientKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C++ server gives exactly ``top_logprobs`` alternatives; asked for logprobs but no alternatives, it
    returns no logprobs at all when sent ``top_logprobs: 0``: the provider sends 1 and keeps none."""
    if client == "openai":
        pytest.importorskip("openai")
    monkeypatch.delenv("MADRAG_NO_KEY", raising=False)
    three = await complete(client, ask("Count to five.", logprobs=True, top_logprobs=3), llama_server)
    none = await complete(client, ask("Count to five.", logprobs=True, top_logprobs=0), llama_server)
    assert three.tokens and all(len(t.top) == 3 for t in three.tokens)
    assert all(t.top[0].logprob >= t.top[1].logprob >= t.top[2].logprob for t in three.tokens)
    assert none.tokens and all(t.top == [] for t in none.tokens)
    assert [t.token for t in none.tokens] == [t.token for t in three.tokens]
    for a, b in zip(none.tokens, three.tokens, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-3)  # the second call reuses the cached prompt


SCHEMA = {
    "type": "object",
    "properties": {"colour": {"type": "string", "enum": ["red", "green"]}, "score": {"type": "integer"}},
    "required": ["colour", "score"],
}


@pytest.mark.parametrize("style", ["json_schema", "json_object"])
@pytest.mark.parametrize("client", CLIENTS)
async def test_json_schema_constrains_the_answer_in_both_forms(
    llama_server: str, client: ClientKind, style: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C++ server honours both forms of the schema (``json_schema``, and llama-cpp-python's ``json_object``
    with a ``schema``): the answer is JSON of that schema, with a colour the model would not say unprompted."""
    if client == "openai":
        pytest.importorskip("openai")
    monkeypatch.delenv("MADRAG_NO_KEY", raising=False)
    request = ask("Name one colour of the sky.", json_schema=SCHEMA).model_copy(update={"max_tokens": 40})
    answer = await complete(client, request, llama_server, json_schema_style=style)
    assert answer.finish_reason == "stop"
    data = json.loads(answer.text)
    assert set(data) == {"colour", "score"}
    assert data["colour"] in {"red", "green"} and isinstance(data["score"], int)


async def test_stop_sequence_ends_the_answer_before_it(llama_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MADRAG_NO_KEY", raising=False)
    full = await complete("httpx", ask("Name one colour of the sky."), llama_server)
    words = full.text.split()
    assert len(words) >= 4, full.text
    stop = " " + words[2]
    cut = await complete("httpx", ask("Name one colour of the sky.", stop=(stop,)), llama_server)
    assert cut.text == full.text[: full.text.index(stop)]
    assert cut.finish_reason == "stop" and len(cut.text) < len(full.text)


async def test_seed_makes_sampling_repeatable(llama_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """At temperature 1 the same seed gives the same text and other seeds other texts. Every call is made after
    the prompt is in the server's prefix cache: its last token is then evaluated alone, which changes the logits
    slightly and can change a sample drawn from them (the very first call is not compared)."""
    monkeypatch.delenv("MADRAG_NO_KEY", raising=False)

    async def story(seed: int) -> str:
        request = ask("Tell me a story.", seed=seed).model_copy(update={"temperature": 1.0, "max_tokens": 12})
        return (await complete("httpx", request, llama_server)).text

    await story(7)
    first, again = await story(7), await story(7)
    others = {await story(seed) for seed in (8, 9, 10)}
    assert first == again
    assert others - {first}


async def test_cached_prompt_tokens_are_read(llama_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server reports the prompt tokens it reused from its slot's KV cache: a prompt sent again reuses all
    but its last token; a different prompt after it only their common start (the chat template's system prompt)."""
    monkeypatch.delenv("MADRAG_NO_KEY", raising=False)
    essay = "The essay is about patience. " * 8
    first = await complete("httpx", ask(essay + "Score it."), llama_server)
    again = await complete(
        "openai" if importlib.util.find_spec("openai") else "httpx", ask(essay + "Score it."), llama_server
    )
    other = await complete("httpx", ask("Something else entirely."), llama_server)
    assert first.usage.prompt_tokens and first.usage.cached_prompt_tokens is not None
    assert again.usage.prompt_tokens == first.usage.prompt_tokens
    assert again.usage.cached_prompt_tokens == first.usage.prompt_tokens - 1
    assert other.usage.cached_prompt_tokens is not None and other.usage.prompt_tokens is not None
    # the template's default system prompt is shared, the user's words are not
    assert 0 < other.usage.cached_prompt_tokens < min(again.usage.cached_prompt_tokens, other.usage.prompt_tokens - 4)


async def test_judge_records_keep_the_cached_prompt_tokens(
    llama_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two Judge calls (MA, two traits of one essay) through madrag's pipeline: each record keeps the prompt
    tokens the server served from its cache; the second starts with the first's system prompt and rubric."""
    monkeypatch.delenv("MADRAG_NO_KEY", raising=False)
    asap = find_asap_dir()
    rubric = load_rubric(asap / "rubric_set7.json")
    essay = split_by_fold(load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric), 0).eval[0]
    provider = OpenAICompatProvider(model=SERVED_MODEL, base_url=llama_server, api_key_env="MADRAG_NO_KEY")
    store = RunStore(tmp_path / "run.sqlite")
    ctx = CallContext(
        run_id="cached",
        provider=ManagedProvider(provider, RetryPolicy(retries=0)),
        store=store,
        prompts=PromptLibrary(),
        settings=ScoringSettings(judge_max_tokens=8),
    )
    protocol = get_protocol("MA")
    try:
        scores = [await protocol.score_trait(ctx, essay, trait) for trait in rubric.traits[:2]]  # type: ignore[attr-defined]
        records = [store.get(s.record_key) for s in scores]
    finally:
        await provider.aclose()
        store.close()
    usages = [r.usage for r in records if r is not None]
    assert len(usages) == 2
    for usage in usages:
        assert usage.prompt_tokens is not None and usage.cached_prompt_tokens is not None
        assert 0 <= usage.cached_prompt_tokens < usage.prompt_tokens
    assert usages[1].cached_prompt_tokens and usages[1].cached_prompt_tokens > 20
