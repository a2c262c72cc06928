"""The embedded model's llama.cpp runtimes: xllamacpp (prebuilt wheel) and llama-cpp-python (the default runtime,
OpenVINO GenAI, has its own tests: tests/integration/providers/test_genai_runtime.py).

Without the model: the chat template renders as llama-cpp-python's formatter renders it, the GGUF header is
read as the gguf package reads it, the runtime is part of a run's identity (a run recorded before the choice
was answered by llama-cpp-python and resumes only with it), and the errors. With the model (integration): the
same requests on both runtimes side by side."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import pytest

from madrag.cli.backend_options import spec_from_options
from madrag.errors import InputError, ProviderError
from madrag.extras import MissingExtra
from madrag.pipeline.migrations.config import ADDED_LATER, recorded_spec, upgrade_identity
from madrag.providers.base import ChatRequest, ChatResponse, Message
from madrag.providers.embedded import ChatTemplate, read_gguf_metadata, read_gguf_vocab
from madrag.providers.llamacpp import LlamaCppProvider
from madrag.providers.models import smollm2_gguf_path
from madrag.providers.spec import ProviderSpec, spec_identity
from madrag.store.run_config import differences, runtime_hint

HAS_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None
needs_llama_cpp = pytest.mark.skipif(not HAS_LLAMA_CPP, reason="llama-cpp-python is not installed")

MESSAGES = [
    [Message(role="user", content="Rate the weather today from 0 to 10.")],
    [
        Message(role="system", content="You grade essays."),
        Message(role="user", content="Essay: 'I waited.'"),
        Message(role="assistant", content="Noted."),
        Message(role="user", content="Score it from 1 to 6."),
    ],
]

# exercises what the formatter sets up: tojson (non-ASCII kept), loop controls, the ignored generation tag,
# raise_exception, bos/eos
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools') }}{% endif %}"
    "{% if loop.index > 3 %}{% break %}{% endif %}{% generation %}[{{ m.role }}]{{ m.content | tojson }}"
    "{% endgeneration %}{{ eos_token }}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"
)


def _dicts(messages: list[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


# -- without the model ---------------------------------------------------------------------------------------


@needs_llama_cpp
def test_the_chat_template_renders_as_llama_cpp_pythons_formatter() -> None:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    vocab = read_gguf_vocab(smollm2_gguf_path())
    assert (vocab.template.bos_token, vocab.template.eos_token) == ("<|im_start|>", "<|im_end|>")
    smol = read_gguf_metadata(smollm2_gguf_path(), ("tokenizer.chat_template",))["tokenizer.chat_template"]
    many = [*MESSAGES, [Message(role="user", content="Ünïcode «quotes» and {{ braces }}")]]
    for template in (smol, TEMPLATE):
        ours = ChatTemplate(template, bos_token="<s>", eos_token="</s>")
        theirs = Jinja2ChatFormatter(template=template, bos_token="<s>", eos_token="</s>")
        for messages in many:
            assert ours.render(_dicts(messages)) == theirs(messages=_dicts(messages)).prompt  # type: ignore[arg-type]
    five = [Message(role="user", content=str(i)) for i in range(5)]
    assert ChatTemplate(TEMPLATE, "<s>", "</s>").render(_dicts(five)).count("[user]") == 3  # {% break %}
    with pytest.raises(ProviderError, match="chat template refused the messages: no tools"):
        ChatTemplate(TEMPLATE, "<s>", "</s>").render([{"role": "tool", "content": "x"}])


def test_the_gguf_header_reads_as_the_gguf_package_reads_it() -> None:
    gguf = pytest.importorskip("gguf")
    keys = ("tokenizer.chat_template", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id")
    ours = read_gguf_metadata(smollm2_gguf_path(), ("tokenizer.",))
    reader = gguf.GGUFReader(str(smollm2_gguf_path()), "r")
    for key in keys:
        assert ours[key] == reader.fields[key].contents()
    tokens = reader.fields["tokenizer.ggml.tokens"]
    assert len(ours["tokenizer.ggml.tokens"]) == len(tokens.data) == read_gguf_vocab(smollm2_gguf_path()).n_vocab
    assert ours["tokenizer.ggml.tokens"][:50] == tokens.contents()[:50]


def test_a_file_that_is_no_model_is_a_provider_error(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(ProviderError, match=r"cannot read model .*not a GGUF file"):
        read_gguf_vocab(bad)
    from madrag.providers.xllama import XLlamaEngine

    cut = tmp_path / "cut.gguf"  # the metadata whole, the weights cut short
    with smollm2_gguf_path().open("rb") as whole:
        cut.write_bytes(whole.read(3_000_000))
    with pytest.raises(ProviderError, match=r"cannot load model .*cut\.gguf"):
        XLlamaEngine(cut, 512, 1, 512).generate(ChatRequest(messages=MESSAGES[0], max_tokens=1))


def test_the_runtime_is_identity_of_the_embedded_backend_only() -> None:
    default, xl, lcp = ProviderSpec(), ProviderSpec(runtime="xllamacpp"), ProviderSpec(runtime="llama-cpp-python")
    assert default.runtime == "openvino-genai" == spec_identity(default)["runtime"]
    assert spec_identity(xl)["runtime"] == "xllamacpp"
    assert spec_identity(lcp)["runtime"] == "llama-cpp-python"
    assert upgrade_identity({"kind": "llamacpp"})["runtime"] == "llama-cpp-python"  # recorded before the choice
    assert "runtime" not in spec_identity(ProviderSpec(kind="openai", model="m", base_url="http://h/v1"))
    assert "runtime" not in spec_identity(ProviderSpec(kind="fake"))


def _recorded_before_the_runtime(spec: ProviderSpec) -> dict[str, Any]:
    """The identity the previous release recorded for ``spec``: no runtime field at all (nor a field added later
    at the value of the runs before it)."""
    before = {k: v for k, v in ADDED_LATER.items() if k != "runtime"}
    return {k: v for k, v in spec_identity(spec).items() if k != "runtime" and not (k in before and before[k] == v)}


def test_a_run_recorded_before_the_runtime_resumes_only_with_llama_cpp_python() -> None:
    old = _recorded_before_the_runtime(ProviderSpec(slots=1))
    diff = differences({"provider": old}, {"provider": spec_identity(ProviderSpec())})
    assert diff == ["provider.runtime"]
    assert runtime_hint({"provider": upgrade_identity(old)}, diff) == (
        "; it was answered by the llama-cpp-python runtime: resume it with --runtime llama-cpp-python"
    )
    assert spec_identity(ProviderSpec(runtime="llama-cpp-python")) == upgrade_identity(old)
    # the backend an audit rebuilds from the stored identity is the one that answered the run
    assert recorded_spec(old).runtime == "llama-cpp-python"
    assert recorded_spec(spec_identity(ProviderSpec())).runtime == "openvino-genai"
    assert recorded_spec(spec_identity(ProviderSpec(runtime="xllamacpp"))).runtime == "xllamacpp"
    openai = _recorded_before_the_runtime(ProviderSpec(kind="openai", model="m", base_url="http://h/v1"))
    assert "token_param" not in openai and "sampling_params" not in openai
    assert (
        spec_identity(recorded_spec(openai))
        == upgrade_identity(openai)
        == spec_identity(ProviderSpec.model_validate(openai))
    )


def test_a_stored_embedded_run_from_before_the_runtime_resumes_with_llama_cpp_python(tmp_path: Path) -> None:
    """The previous release's fixture run, as if made on the embedded model: refused with the default runtime
    (with the way to resume), resumed with llama-cpp-python (its two scored essays: no model call)."""
    import shutil

    from madrag.api.scoring import run_job
    from madrag.data.essay import Essay
    from madrag.errors import ConfigError
    from madrag.pipeline.job import ScoreJob
    from madrag.pipeline.migrations import open_store

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parents[2] / "data" / "previous_release" / "run", run)
    store = open_store(run / "store.sqlite")  # an older madrag's store: migrated as a resume would
    config = store.get_meta("config")
    assert config is not None
    store.set_meta("config", {**config, "provider": _recorded_before_the_runtime(ProviderSpec())})
    store.close()
    lines = (run / "inputs" / "essays.jsonl").read_text("utf-8").splitlines()

    def job(spec: ProviderSpec) -> ScoreJob:
        return ScoreJob(
            essays=[Essay.model_validate_json(line) for line in lines],
            limit=2,  # the two essays the old run scored
            pool=[Essay.model_validate_json(x) for x in (run / "inputs" / "pool.jsonl").read_text().splitlines()],
            rubric=run / "inputs" / "rubric.json",
            run_dir=run,
            protocols=["MADRAG", "SA"],
            provider=spec,
            cache_dir=tmp_path / "cache",
            response_cache=False,
            embedder="hashing",
        )

    with pytest.raises(ConfigError, match=r"\(provider\.runtime\).*resume it with --runtime llama-cpp-python"):
        run_job(job(ProviderSpec()), progress=False)
    if not HAS_LLAMA_CPP:
        pytest.skip("refused as it should be; resuming it needs llama-cpp-python, which is not installed")
    resumed = run_job(job(ProviderSpec(runtime="llama-cpp-python")), progress=False)
    assert resumed.resumed and resumed.stats.made == 0 and resumed.stats.reused == 26
    assert all(s.score is not None for s in resumed.trait_scores)  # read back from the old run


def test_the_runtime_option_and_its_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    assert spec_from_options().runtime == "openvino-genai"
    assert spec_from_options(runtime="llama-cpp-python").runtime == "llama-cpp-python"
    one_of = "--runtime must be one of openvino-genai, xllamacpp, llama-cpp-python; got 'vllm'"
    with pytest.raises(InputError, match=one_of):
        spec_from_options(runtime="vllm")
    unknown = r"unknown embedded runtime 'vllm'; choose openvino-genai, xllamacpp or llama-cpp-python$"
    with pytest.raises(ProviderError, match=unknown):
        LlamaCppProvider(runtime="vllm")  # type: ignore[arg-type]
    with pytest.raises(ProviderError, match="model file not found"):
        LlamaCppProvider(model_path="/no/such/model.gguf")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    with pytest.raises(MissingExtra) as missing:
        LlamaCppProvider(runtime="llama-cpp-python")
    assert str(missing.value) == (
        "llama-cpp-python is not installed (the llama-cpp-python extra: the embedded model's llama-cpp-python "
        "runtime): pip install 'madrag[llama-cpp-python]'"
    )
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "xllamacpp" else real(name, *a))
    missing_runtime = r"xllamacpp is not installed \(the embedded extra: .*\): pip install 'madrag\[embedded\]'"
    with pytest.raises(MissingExtra, match=missing_runtime):
        LlamaCppProvider(runtime="xllamacpp")
    gone = {"openvino_genai", "xllamacpp"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in gone else real(name, *a))
    missing_default = r"openvino-genai is not installed \(the embedded extra: .*\): pip install 'madrag\[embedded\]'"
    with pytest.raises(MissingExtra, match=missing_default):
        LlamaCppProvider()


# -- with the model: both runtimes side by side ---------------------------------------------------------------


@pytest.fixture(scope="module")
def xl() -> LlamaCppProvider:
    return LlamaCppProvider(n_ctx=1024, runtime="xllamacpp")


@pytest.fixture(scope="module")
def lcp() -> LlamaCppProvider:
    if not HAS_LLAMA_CPP:
        pytest.skip("llama-cpp-python is not installed")
    return LlamaCppProvider(n_ctx=1024, runtime="llama-cpp-python")


async def _both(xl: LlamaCppProvider, lcp: LlamaCppProvider, request: ChatRequest) -> tuple[ChatResponse, ...]:
    return await xl.complete(request), await lcp.complete(request)


def _same_tokens(a: ChatResponse, b: ChatResponse) -> None:
    assert a.tokens is not None and b.tokens is not None
    assert [t.token for t in a.tokens] == [t.token for t in b.tokens]
    for x, y in zip(a.tokens, b.tokens, strict=True):
        assert x.logprob == pytest.approx(y.logprob, abs=1e-3)
        assert [u.token for u in x.top] == [u.token for u in y.top]
        assert [u.logprob for u in x.top] == pytest.approx([u.logprob for u in y.top], abs=1e-3)


@pytest.mark.integration
async def test_greedy_text_logprobs_and_prefill_are_the_same_on_both(
    xl: LlamaCppProvider, lcp: LlamaCppProvider
) -> None:
    free = ChatRequest(messages=MESSAGES[0], max_tokens=16, logprobs=True, top_logprobs=3)
    a, b = await _both(xl, lcp, free)
    assert a.text == b.text and a.text and a.finish_reason == b.finish_reason
    assert a.usage == b.usage
    _same_tokens(a, b)
    filled = free.model_copy(update={"prefill": "My rating is: 7 because"})
    c, d = await _both(xl, lcp, filled)
    assert c.text == d.text and c.text != a.text  # the assistant turn continues from the prefill
    assert c.usage.prompt_tokens is not None and a.usage.prompt_tokens is not None
    assert c.usage.prompt_tokens == d.usage.prompt_tokens and c.usage.prompt_tokens > a.usage.prompt_tokens
    _same_tokens(c, d)
    assert a.raw["runtime"] == "xllamacpp" and b.raw["runtime"] == "llama-cpp-python"
    assert xl.describe()["runtime"] == "xllamacpp" and xl.cache_identity()["runtime"] == "xllamacpp"
    # llama-cpp-python is described as before there was a choice: older records and cached answers stay its own
    assert "runtime" not in lcp.describe() and "runtime" not in lcp.cache_identity()


@pytest.mark.integration
async def test_choices_give_the_same_pick_and_logprobs_on_both(xl: LlamaCppProvider, lcp: LlamaCppProvider) -> None:
    # "10" is two tokens ("1", "0"): its log-probability is a sum over a forced sequence
    request = ChatRequest(
        messages=MESSAGES[0], prefill="My rating is: ", max_tokens=1, choices=["0", "3", "7", "10"], top_logprobs=4
    )
    a, b = await _both(xl, lcp, request)
    assert a.choice_logprobs is not None and b.choice_logprobs is not None
    assert a.text == b.text == max(a.choice_logprobs, key=lambda c: a.choice_logprobs[c])  # type: ignore[index]
    assert a.choice_logprobs == pytest.approx(b.choice_logprobs, abs=1e-3)
    assert all(math.isfinite(v) and v < 0 for v in a.choice_logprobs.values())
    assert a.choice_logprobs["10"] < a.choice_logprobs["0"]  # "1" then "0": below "1" alone
    _same_tokens(a, b)


@pytest.mark.integration
async def test_stop_sequences_cut_text_and_tokens_alike(xl: LlamaCppProvider, lcp: LlamaCppProvider) -> None:
    request = ChatRequest(messages=MESSAGES[0], max_tokens=16, logprobs=True, stop=[" today"])
    a, b = await _both(xl, lcp, request)
    assert a.text == b.text and " today" not in a.text and a.finish_reason == b.finish_reason == "stop"
    _same_tokens(a, b)


@pytest.mark.integration
async def test_the_same_request_gives_the_same_numbers_whatever_ran_before(xl: LlamaCppProvider) -> None:
    greedy = ChatRequest(messages=MESSAGES[1], max_tokens=8, logprobs=True, top_logprobs=2)
    sampled = ChatRequest(messages=MESSAGES[1], max_tokens=8, temperature=0.9, seed=11, logprobs=True)
    first = await xl.complete(greedy)
    one = await xl.complete(sampled)
    again = await xl.complete(greedy)  # after another request on the same context
    two = await xl.complete(sampled)
    assert first.text == again.text and first.tokens == again.tokens  # exactly, not approximately
    assert one.text == two.text and one.tokens == two.tokens  # a seed gives the same sample
    other = await xl.complete(sampled.model_copy(update={"seed": 12, "max_tokens": 16}))
    assert other.text != one.text  # the seed drives it


@pytest.mark.integration
async def test_a_prompt_past_the_context_window_is_a_provider_error(xl: LlamaCppProvider) -> None:
    long = ChatRequest(messages=[Message(role="user", content="word " * 1200)], max_tokens=8)
    with pytest.raises(ProviderError, match=r"prompt of \d+ tokens \+ max_tokens 8 exceeds the context window of 1024"):
        await xl.complete(long)
    near = ChatRequest(messages=MESSAGES[0], max_tokens=1020)
    with pytest.raises(ProviderError, match="max_tokens 1020 exceeds the context window"):
        await xl.complete(near)


@pytest.mark.integration
async def test_loading_and_generating_write_nothing_to_stdout_or_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    capfd.readouterr()
    fresh = LlamaCppProvider(n_ctx=512, runtime="xllamacpp")
    out = await fresh.complete(ChatRequest(messages=MESSAGES[0], max_tokens=2, logprobs=True))
    await fresh.aclose()
    assert out.text
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""


@pytest.mark.integration
async def test_an_aligned_prompt_prefix_is_reused_and_changes_no_number(
    xl: LlamaCppProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from madrag.providers.xllama import XLlamaEngine

    fresh = XLlamaEngine(smollm2_gguf_path(), 1024, 2, 512)
    fresh.reuse_prompt = False
    engine = xl._engines[0]
    assert isinstance(engine, XLlamaEngine) and engine.reuse_prompt
    reused: list[int] = []
    probe = engine._aligned_reuse

    def spy(ids: list[int]) -> int:
        reused.append(probe(ids))
        return reused[-1]

    monkeypatch.setattr(engine, "_aligned_reuse", spy)
    essay = "The essay tells of a long day at the fair and of waiting patiently. " * 45  # > 512 tokens
    first, second = (
        ChatRequest(messages=[Message(role="user", content=essay + ask)], max_tokens=3, logprobs=True, top_logprobs=2)
        for ask in ("Score it.", "Now score its organization, please.")
    )
    await xl.complete(first)
    after = await xl.complete(second)
    assert reused[-1] == 512  # the first 512 tokens came from the first request's cache
    assert after.usage.cached_prompt_tokens == 512  # and the response says so
    alone = fresh.generate(second)
    fresh.close()
    assert after.tokens == alone.tokens and after.text == alone.text
    assert alone.n_cached == 0  # reuse off: the whole prompt evaluated


@pytest.mark.integration
async def test_both_runtimes_report_the_prompt_tokens_they_reused(xl: LlamaCppProvider, lcp: LlamaCppProvider) -> None:
    """Two requests sharing a long prefix, then a choice request on it: each runtime reports as cached exactly the
    whole n_batch chunks it took from the context (0 for an unrelated prompt), the same on both."""
    story = "A story of a lost dog who waited at the station for his friend through every season. " * 30
    requests = [
        ChatRequest(messages=[Message(role="user", content=story + ask)], max_tokens=2, logprobs=True, top_logprobs=1)
        for ask in ("Summarise it.", "What is its main idea?")
    ]
    choose = ChatRequest(
        messages=[Message(role="user", content=story + "Score it 0-3.")], choices=["0", "1", "2", "3"], max_tokens=1
    )
    unrelated = ChatRequest(messages=[Message(role="user", content="Name a colour.")], max_tokens=2)
    seen: dict[str, list[int | None]] = {}
    for name, provider in (("xllamacpp", xl), ("llama-cpp-python", lcp)):
        await provider.complete(unrelated)
        answers = [await provider.complete(r) for r in (*requests, choose, unrelated)]
        seen[name] = [a.usage.cached_prompt_tokens for a in answers]
        prompts = [a.usage.prompt_tokens for a in answers]
        assert all(p is not None and p > 0 for p in prompts)
    assert seen["xllamacpp"] == seen["llama-cpp-python"]
    first, second, choice, other = seen["xllamacpp"]
    assert first == 0 and other == 0
    assert second is not None and second >= 512 and second % 512 == 0
    assert choice == second  # the same story prefix, reused from the request before


@pytest.mark.integration
async def test_the_engines_loopback_port_answers_only_with_its_own_key(xl: LlamaCppProvider) -> None:
    import urllib.error
    import urllib.request

    await xl.complete(ChatRequest(messages=MESSAGES[0], max_tokens=2))  # the engine is loaded
    engine = xl._engines[0]
    address = engine._server.listening_address
    assert address.startswith("http://127.0.0.1:")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    body = b'{"prompt": "Hi", "max_tokens": 2}'
    for headers in ({}, {"Authorization": "Bearer not-the-key"}):
        req = urllib.request.Request(f"{address}/completion", data=body, headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            opener.open(req, timeout=30)
        assert refused.value.code == 401
    assert engine.tokenize("Hi", special=False)  # madrag's own calls carry the key


@pytest.mark.integration
async def test_a_free_slot_that_answered_the_prompt_before_takes_its_continuation() -> None:
    """Two slots, both free: a request continuing the previous one (a Judge's score step: the same messages, the
    rationale as prefill) goes to the slot that answered it and reuses its prompt; the queue's order alone would
    hand it the other slot, which evaluates it all."""
    two = LlamaCppProvider(n_ctx=1024, slots=2, runtime="xllamacpp")
    essay = "The essay tells of a garden the class planted and of waiting for the first beans to grow. " * 30
    messages = [Message(role="user", content=essay + "Explain its score.")]
    first = await two.complete(ChatRequest(messages=messages, max_tokens=4, logprobs=True, top_logprobs=1))
    step = ChatRequest(
        messages=messages, prefill=first.text + " Final score:", choices=["0", "1", "2", "3"], max_tokens=1
    )
    then = await two.complete(step)
    other = await two.complete(ChatRequest(messages=[Message(role="user", content="Name a colour.")], max_tokens=2))
    for engine in two._engines:
        engine.close()
    assert first.usage.cached_prompt_tokens == 0
    assert then.usage.cached_prompt_tokens is not None and then.usage.cached_prompt_tokens >= 512
    assert other.usage.cached_prompt_tokens == 0
