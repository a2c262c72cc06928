"""OpenAI reasoning models: the stub refuses max_tokens, temperature and logprobs as they do; a run adapts once,
says so, and records with each call what was sent."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import make_ctx

from madrag.data import Essay
from madrag.errors import ProviderError
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.providers.adapt import RequestAdapter, refused_parameter
from madrag.providers.base import ChatRequest, Message
from madrag.providers.openai_compat import OpenAICompatProvider, RequestShape
from madrag.providers.spec import ProviderSpec, spec_identity
from madrag.rubric import Rubric, Trait
from madrag.store import RunStore
from madrag.testing.reasoning import refusal
from madrag.testing.stub_server import StubServer

JUDGE = [
    Message(role="system", content="You are the Synthesizer-Judge"),
    Message(role="user", content="End with 'Final score: N' where N is an integer between 0 and 3."),
]
ADAPTER_LOG = "madrag.providers.adapt"


def test_the_stub_refuses_what_openai_reasoning_models_refuse() -> None:
    base = {"model": "o3", "messages": [{"role": "user", "content": "hi"}]}
    too_many = refusal({**base, "max_tokens": 10})
    assert too_many is not None and too_many["error"]["param"] == "max_tokens"
    assert "Use 'max_completion_tokens' instead" in too_many["error"]["message"]
    hot = refusal({**base, "max_completion_tokens": 10, "temperature": 0.7})
    assert hot is not None and "Only the default (1) value is supported" in hot["error"]["message"]
    assert refusal({**base, "max_completion_tokens": 10, "logprobs": True}) is not None
    assert refusal({**base, "max_completion_tokens": 10, "temperature": 1, "top_p": 1.0}) is None


def test_the_adapter_renames_and_omits_only_what_it_may() -> None:
    kwargs = {"model": "m", "messages": [], "max_tokens": 50, "temperature": 0.0, "top_p": 1.0}
    auto = RequestAdapter()
    assert auto.body(kwargs) == kwargs
    message = "Unsupported parameter: 'max_tokens' is not supported with this model."
    assert refused_parameter(message) == "max_tokens" and auto.adapt(message, auto.body(kwargs))
    refused_temp = "Unsupported value: 'temperature' does not support 0.0 with this model."
    assert auto.adapt(refused_temp, auto.body(kwargs))
    body = auto.body(kwargs)
    assert body == {"model": "m", "messages": [], "max_completion_tokens": 50, "top_p": 1.0}
    assert RequestAdapter.sent(body) == {"max_completion_tokens": 50, "top_p": 1.0, "omitted": ["temperature"]}
    assert len(auto.adaptations) == 2
    forced = RequestAdapter(token_param="max_tokens", sampling_params="send")
    assert not forced.adapt(message, kwargs) and not forced.adapt(refused_temp, kwargs)
    assert "--token-param" in forced.hint(message) and "--sampling-params" in forced.hint(refused_temp)
    assert not auto.adapt("Unsupported parameter: 'seed'", {**kwargs, "seed": 1})
    assert RequestAdapter("max_completion_tokens", "omit").body(kwargs) == {
        "model": "m",
        "messages": [],
        "max_completion_tokens": 50,
    }


async def test_a_run_adapts_once_says_so_and_records_what_was_sent(caplog: pytest.LogCaptureFixture) -> None:
    request = ChatRequest(messages=JUDGE, temperature=0.7, max_tokens=64)
    with StubServer(capacity=4, latency_s=0.01, reasoning_model=True) as server:
        provider = OpenAICompatProvider(server.config.model, base_url=server.base_url, supports_logprobs=False)
        with caplog.at_level(logging.WARNING, logger=ADAPTER_LOG):
            try:  # five first calls at once: each is refused, adapts and is sent again; said once per change
                first = await asyncio.gather(*(provider.complete(request) for _ in range(5)))
                server.reset_stats()
                later = await provider.complete(request)
            finally:
                await provider.aclose()
        stats = server.stats()
    said = [r.getMessage() for r in caplog.records if r.name == ADAPTER_LOG]
    assert len(said) == 2 and "max_completion_tokens" in said[0] and "temperature" in said[1]
    for response in [*first, later]:
        assert response.text.splitlines()[-1].startswith("Final score: ")
        assert response.sent == {"max_completion_tokens": 64, "top_p": 1.0, "omitted": ["temperature"]}
    assert stats.requests == 1 and stats.refused == 0  # once adapted, nothing more is refused


async def test_refusals_it_may_not_adapt_to_are_errors_with_the_fix() -> None:
    request = ChatRequest(messages=JUDGE, max_tokens=64)
    with StubServer(capacity=2, latency_s=0.0, reasoning_model=True) as server:
        forced = OpenAICompatProvider(
            "o3", base_url=server.base_url, supports_logprobs=False, shape=RequestShape(token_param="max_tokens")
        )
        with_logprobs = OpenAICompatProvider("o3", base_url=server.base_url)
        try:
            with pytest.raises(ProviderError, match=r"HTTP 400.*--token-param auto"):
                await forced.complete(request)
            with pytest.raises(ProviderError, match=r"HTTP 400.*--no-logprobs"):
                await with_logprobs.complete(request.model_copy(update={"logprobs": True, "top_logprobs": 2}))
        finally:
            await forced.aclose()
            await with_logprobs.aclose()


async def test_a_debate_on_a_reasoning_model_records_sent_settings_and_self_reported_confidence(
    tmp_path: Path,
) -> None:
    rubric = Rubric(traits=[Trait(name="Ideas", min=0, max=3, levels={s: f"level {s}" for s in range(4)})])
    essays = [Essay(id=f"e{i}", text="A story about waiting. " * 20) for i in range(2)]
    hashes = {}
    for reasoning in (False, True):
        with StubServer(capacity=4, latency_s=0.0, reasoning_model=reasoning) as server:
            provider = OpenAICompatProvider("o3", base_url=server.base_url, supports_logprobs=False)
            ctx = make_ctx(tmp_path / str(reasoning), provider)
            try:
                scores = await run_scoring(ctx, essays, rubric, [get_protocol("MAD")])
            finally:
                await provider.aclose()
        records = list(ctx.store.records())
        hashes[reasoning] = sorted((r.key, r.prompt_hash) for r in records)
        assert all(s.score is not None for s in scores)
        debaters = [r for r in records if r.role in ("advocate", "skeptic")]
        assert debaters and all(r.confidence_source == "self_reported" for r in debaters)
        for record in records:
            sent = record.settings["sent"]
            assert ("max_completion_tokens" in sent) == reasoning and ("max_tokens" in sent) != reasoning
            assert ("temperature" in sent.get("omitted", [])) == (reasoning and record.settings["temperature"] != 1)
    assert hashes[True] == hashes[False]  # what was sent is recorded beside the prompt, never in its hash


def test_spec_identity_of_older_runs_is_unchanged_by_the_new_settings() -> None:
    from madrag.pipeline.migrations import upgrade_identity

    plain = ProviderSpec(kind="openai", model="o3")
    assert spec_identity(plain)["token_param"] == "auto" and spec_identity(plain)["sampling_params"] == "auto"
    before = {k: v for k, v in spec_identity(plain).items() if k not in {"token_param", "sampling_params"}}
    assert upgrade_identity(before) == spec_identity(plain)  # recorded before them: read with their values
    forced = ProviderSpec(kind="openai", model="o3", token_param="max_completion_tokens", sampling_params="omit")
    assert spec_identity(forced)["token_param"] == "max_completion_tokens"
    assert spec_identity(forced)["sampling_params"] == "omit"


def test_score_against_a_reasoning_model_from_the_command_line(tmp_path: Path) -> None:
    data = tmp_path / "essays.jsonl"
    data.write_text('{"id": "a", "text": "A story about waiting.", "Ideas": 2}\n', encoding="utf-8")
    rubric = tmp_path / "rubric.json"
    rubric.write_text(
        Rubric(traits=[Trait(name="Ideas", min=0, max=3, levels={s: f"l{s}" for s in range(4)})]).model_dump_json()
    )
    with StubServer(capacity=4, latency_s=0.0, reasoning_model=True, model="o3") as server:
        args = [
            "score", "--data", str(data), "--rubric", str(rubric), "--run-dir", str(tmp_path / "run"),
            "--fold", "all", "--protocol", "MAD", "--provider", "openai", "--model", "o3",
            "--base-url", server.base_url, "--no-logprobs", "--no-cache",
        ]  # fmt: skip
        cmd = [sys.executable, "-m", "madrag.cli", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "refused 'max_tokens'" in proc.stderr and "max_completion_tokens" in proc.stderr
    store = RunStore(tmp_path / "run" / "store.sqlite")
    try:
        assert all("max_completion_tokens" in r.settings["sent"] for r in store.records())
    finally:
        store.close()
