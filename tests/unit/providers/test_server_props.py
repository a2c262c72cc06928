"""What the server says about itself (llama.cpp's ``/props``: slots, context): the default concurrency never
exceeds its slots, a prompt that cannot fit its context is refused before any call, and a server without
``/props`` (vLLM, OpenAI) changes nothing. Against the project's stub server, answering as llama.cpp's does."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers import ProviderSpec
from madrag.providers.server_props import estimate_tokens, parse_props, root_path
from madrag.store import RunStore
from madrag.testing.stub_server import StubServer

MODEL = "stub-model"


def _job(
    asap: Path, essays: list[Essay], run_dir: Path, base_url: str, concurrency: int | None = None, **options: object
) -> ScoreJob:
    spec = ProviderSpec(kind="openai", model=MODEL, base_url=base_url, timeout_s=20, concurrency=concurrency, **options)
    return ScoreJob(
        essays=essays,
        rubric=asap / "rubric_set7.json",
        run_dir=run_dir,
        eval_fold=None,
        protocols=["MAD"],
        provider=spec,
        cache_dir=run_dir.parent / "cache",
        response_cache=False,
    )


def _preflight(run_dir: Path) -> dict[str, object]:
    store = RunStore(run_dir / "store.sqlite", read_only=True)
    try:
        found = store.get_meta("preflight")
    finally:
        store.close()
    assert isinstance(found, dict)
    return found


async def test_one_slot_server_gets_one_request_at_a_time(tmp_path: Path, asap: Path, essays7: list[Essay]) -> None:
    with StubServer(capacity=1, latency_s=0.02, props=True, n_ctx=8192) as server:
        result = await execute(_job(asap, essays7[:3], tmp_path / "run", server.base_url, logprobs=False))
        stats = server.stats()
    assert len(result.scores) == 3 * 4
    # the stub counts a request as waiting until it takes the slot: 1 is a request alone, nothing queued behind it
    assert stats.max_waiting == 1 and stats.max_in_flight == 1
    found = _preflight(tmp_path / "run")["*"]
    assert found["server"] == {  # type: ignore[index]
        "total_slots": 1,
        "n_ctx": 8192,
        "model": "stub-model.gguf",
        "build": "b0000-stub",
    }
    assert found["concurrency"] == {"given": None, "default": 8, "slots": 1, "resolved": 1}  # type: ignore[index]
    # issue 48: run.log names the value resolved (not "auto"), the server's model and build, --no-logprobs
    log = (tmp_path / "run" / "run.log").read_text(encoding="utf-8")
    assert "options {'base_url': " in log and "'logprobs': False}" in log.split("\n")[0]
    assert "concurrency not given" in log and "concurrency auto" not in log
    assert (
        "INFO madrag.run: backend: openai (stub-model): concurrency 1 (the server's 1 slot; the default 8 would wait "
        "in its queue); the server says: 1 slot, 8192 tokens of context per slot, model stub-model.gguf, "
        "build b0000-stub"
    ) in log


async def test_a_given_concurrency_is_kept_with_a_warning(
    tmp_path: Path, asap: Path, essays7: list[Essay], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), StubServer(capacity=1, latency_s=0.02, props=True) as server:
        await execute(_job(asap, essays7[:3], tmp_path / "run", server.base_url, concurrency=4))
        stats = server.stats()
    assert stats.max_waiting > 1  # as asked
    said = "openai (stub-model) has 1 slot; --concurrency 4 keeps 3 requests waiting in its queue, where their timeout"
    assert said in caplog.text and caplog.text.count(said) == 1
    log = (tmp_path / "run" / "run.log").read_text(encoding="utf-8")  # the warning the docs promise, in the log too
    assert f"WARNING madrag.run: {said}" in log and "concurrency 4 (--concurrency 4; the server's 1 slot)" in log


async def test_a_prompt_over_the_context_is_refused_before_any_call(
    tmp_path: Path, asap: Path, essays7: list[Essay]
) -> None:
    run_dir = tmp_path / "run"
    with StubServer(capacity=1, latency_s=0.0, props=True, n_ctx=300) as server:
        with pytest.raises(ConfigError) as refused:
            await execute(_job(asap, essays7[:3], run_dir, server.base_url))
        stats = server.stats()
    message = str(refused.value)
    assert "prompt tokens (counted by the server's /tokenize, with the chat template)" in message, message
    assert "context of 300 tokens per slot" in message
    assert "--ctx-size" in message
    assert stats.requests == 0 and not run_dir.exists()  # no chat call made, no run folder left


async def test_a_server_without_props_changes_nothing(tmp_path: Path, asap: Path, essays7: list[Essay]) -> None:
    with StubServer(capacity=1, latency_s=0.02) as server:
        await execute(_job(asap, essays7[:3], tmp_path / "run", server.base_url))
        stats = server.stats()
    assert stats.max_waiting > 1  # the default concurrency, unchanged: the server does not say its slots
    assert "server" not in _preflight(tmp_path / "run")["*"]  # type: ignore[operator]


def test_reading_props_and_estimates() -> None:
    assert root_path("http://h:8080/v1", "props") == "/../props"
    assert root_path("http://h:8080/", "props") == "/props"
    assert root_path(None, "props") is None  # OpenAI's own API: not asked
    props = parse_props(b'{"total_slots": 2, "default_generation_settings": {"n_ctx": 4096}}')
    assert props is not None and (props.slots, props.n_ctx) == (2, 4096)
    assert parse_props(b'{"object": "list"}') is None and parse_props(b"<html>") is None
    assert parse_props(b'{"total_slots": 0, "default_generation_settings": {"n_ctx": true}}') is None
    assert estimate_tokens("x" * 10) == 4


async def test_vllms_model_context_refuses_a_prompt_that_cannot_fit(
    tmp_path: Path, asap: Path, essays7: list[Essay]
) -> None:
    """vLLM has no /props but says its model's context in /v1/models (max_model_len): a prompt over it is refused
    before any call, in vLLM's words; the concurrency is left as it was (vLLM says no slots)."""
    run_dir = tmp_path / "run"
    with StubServer(capacity=1, latency_s=0.0, max_model_len=300) as server:
        with pytest.raises(ConfigError) as refused:
            await execute(_job(asap, essays7[:3], run_dir, server.base_url))
        stats = server.stats()
    message = str(refused.value)
    assert "estimated at 3 characters a token" in message  # vLLM's /tokenize is not llama.cpp's: estimated
    assert "the model's context of 300 tokens (vLLM's max_model_len)" in message and "--max-model-len" in message
    assert stats.requests == 0 and not run_dir.exists()
    with StubServer(capacity=1, latency_s=0.0, max_model_len=32768) as server:
        await execute(_job(asap, essays7[:1], run_dir, server.base_url))
    assert _preflight(run_dir)["*"]["server"] == {"max_model_len": 32768, "model": MODEL}  # type: ignore[index]


async def test_a_model_the_server_does_not_serve_is_refused_before_anything_is_written(
    tmp_path: Path, asap: Path, essays7: list[Essay]
) -> None:
    """A server whose model list names other models would answer every call 404: the start-up check says so,
    naming what it serves, before any chat call or run folder."""
    from madrag.errors import ProviderError

    run_dir = tmp_path / "run"
    with StubServer(capacity=1, latency_s=0.0, owned_by="vllm") as server:
        job = _job(asap, essays7[:1], run_dir, server.base_url)
        wrong = job.model_copy(update={"provider": job.provider.model_copy(update={"model": "gpt-4o"})})
        with pytest.raises(
            ProviderError, match=r"does not serve model 'gpt-4o' \(it serves stub-model\): check --model"
        ):
            await execute(wrong)
        assert server.stats().requests == 0 and not run_dir.exists()


def test_which_model_lists_refuse_a_model() -> None:
    from madrag.providers.server_props import other_models

    vllm = b'{"data": [{"id": "Qwen/Qwen2.5-7B", "owned_by": "vllm", "max_model_len": 32768}]}'
    assert other_models(vllm, "qwen") == ["Qwen/Qwen2.5-7B"] and other_models(vllm, "Qwen/Qwen2.5-7B") is None
    llama = b'{"data": [{"id": "smollm2", "owned_by": "llamacpp"}]}'  # llama.cpp answers under any model name
    assert other_models(llama, "anything") is None
    hosted = b'{"data": [{"id": "gpt-4o", "owned_by": "system"}, {"id": "x", "owned_by": "acme"}]}'
    assert other_models(hosted, "my-deployment") is None  # a list that cannot tell: not judged
    assert other_models(b'{"data": []}', "m") is None and other_models(b"<html>", "m") is None


async def test_the_model_the_answers_name_is_the_one_recorded(tmp_path: Path, asap: Path, essays7: list[Essay]) -> None:
    """Issue 48: llama.cpp's server answers any model name as the model it runs; a run asking for gpt-4o-mini
    records, and runs list shows, the model every answer named, with the one asked for beside it."""
    import io
    from unittest.mock import patch

    from rich.console import Console

    from madrag.cli import runs

    with StubServer(capacity=2, latency_s=0.0, props=True, model="smollm2") as server:
        job = _job(asap, essays7[:1], tmp_path / "runs" / "run", server.base_url)
        job = job.model_copy(update={"provider": job.provider.model_copy(update={"model": "gpt-4o-mini"})})
        await execute(job)
    store = RunStore(job.run_dir / "store.sqlite", read_only=True)
    try:
        records = list(store.records())
    finally:
        store.close()
    assert records and {(r.model, r.requested_model) for r in records} == {("smollm2", "gpt-4o-mini")}
    buffer = io.StringIO()
    with patch.object(runs, "console", Console(file=buffer, width=2000)):
        runs.runs_list(tmp_path / "runs")
    assert "smollm2 (asked for gpt-4o-mini)" in buffer.getvalue()


def test_the_model_and_build_a_server_says_and_the_concurrency_fitted() -> None:
    """Issue 48: /props names the model (its --alias, else its file) and the build; vLLM's model list its weights
    (root); a fit says the concurrency resolved and why, and warns of a given one above the slots."""
    from madrag.providers.server_props import fit_concurrency, parse_model_context

    props = parse_props(
        b'{"total_slots": 4, "default_generation_settings": {"n_ctx": 2048}, "build_info": "b5000-1a2b3c4d",'
        b' "model_path": "/models/SmolLM2-135M-Instruct-Q8_0.gguf"}'
    )
    assert props is not None and (props.model, props.build) == ("SmolLM2-135M-Instruct-Q8_0.gguf", "b5000-1a2b3c4d")
    aliased = parse_props(b'{"total_slots": 1, "model_alias": "smollm2", "model_path": "/m/x.gguf"}')
    assert aliased is not None and aliased.model == "smollm2" and aliased.build is None
    vllm = parse_model_context(b'{"data": [{"id": "q", "root": "Qwen/Qwen2.5-7B", "max_model_len": 8}]}', "q")
    assert vllm is not None and vllm.model == "Qwen/Qwen2.5-7B"
    default = fit_concurrency(None, 8, props)
    assert default.resolved == 4 and default.warning("s") is None
    assert default.words() == "concurrency 4 (the server's 4 slots; the default 8 would wait in its queue)"
    given = fit_concurrency(8, 8, props)
    assert given.resolved == 8 and given.queued == 4
    assert given.warning("s") == (
        "s has 4 slots; --concurrency 8 keeps 4 requests waiting in its queue, where their timeout runs"
    )
    unknown = fit_concurrency(None, 8, None)
    assert unknown.resolved == 8 and unknown.words() == "concurrency 8 (the backend's default)"
