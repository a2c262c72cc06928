"""The embedded model on OpenVINO GenAI's pipeline (``runtime="openvino-genai"``) beside the default (xllamacpp),
on the same GGUF: the Judge's score step reads the same scores, a record has the fields madrag reads, and where
the runtime's numbers may move (its prefix cache, batching) they move by about 1e-3 only.

GenAI runs an F16 copy of the shipped Q4_1 model (exact for its weights), llama.cpp the Q4_1 file itself with its
own quantised arithmetic: a token's log-probability differs by about a tenth, so a greedy rationale can take
another word at a near-tie (docs/results/openvino-embedded.md). The score step is therefore compared on the same
prompt and prefill: the Judge's own requests, recorded on xllamacpp, replayed on GenAI."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import make_ctx

from madrag.data import Essay
from madrag.protocols import get_protocol
from madrag.providers.base import ChatRequest, ChatResponse, Message
from madrag.providers.genai import TOP_AT
from madrag.providers.llamacpp import LlamaCppProvider
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(importlib.util.find_spec("openvino_genai") is None, reason="openvino-genai is not installed"),
]


@pytest.fixture(scope="module")
def genai() -> LlamaCppProvider:
    return LlamaCppProvider(n_ctx=4096, runtime="openvino-genai", slots=2)


def _tvd(a: dict[str, float], b: dict[str, float]) -> float:
    pa, pb = (np.exp(np.array([d[c] for c in sorted(a)])) for d in (a, b))
    return 0.5 * float(np.abs(pa / pa.sum() - pb / pb.sum()).sum())


async def test_the_judges_score_step_reads_the_same_scores_as_xllamacpp(
    tmp_path: Path, genai: LlamaCppProvider, rubric7: Rubric, essays7: list[Essay]
) -> None:
    xl = LlamaCppProvider(n_ctx=4096, slots=1)
    asked: list[tuple[ChatRequest, ChatResponse]] = []
    answer = xl._complete

    async def recording(request: ChatRequest) -> ChatResponse:
        response = await answer(request)
        if request.choices is not None:
            asked.append((request, response))
        return response

    xl._complete = recording  # type: ignore[method-assign]
    ctx = make_ctx(tmp_path, xl, settings=ScoringSettings(judge_max_tokens=32))
    trait = rubric7.trait("Ideas")
    for essay in [e for e in essays7 if e.fold == 0][:3]:
        await get_protocol("MA").score_trait(ctx, essay, trait)  # type: ignore[attr-defined]
    await xl.aclose()
    assert len(asked) == 3
    for request, theirs in asked:
        assert request.temperature == 0.0 and request.prefill and request.prefill.endswith("Final score: ")
        ours = await genai.complete(request)
        assert ours.text == theirs.text  # the same score
        assert ours.choice_logprobs is not None and theirs.choice_logprobs is not None
        assert set(ours.choice_logprobs) == set(theirs.choice_logprobs) == {str(s) for s in trait.scores}
        assert _tvd(ours.choice_logprobs, theirs.choice_logprobs) < 0.06  # Q4_1's arithmetic beside F16's
        assert ours.usage.prompt_tokens == theirs.usage.prompt_tokens  # the same tokens read
        assert ours.raw["choices_missing"] == 0 and ours.raw["backend"] == "OpenVINO GenAI"


async def test_a_debate_on_genai_has_the_fields_madrag_reads(
    tmp_path: Path, genai: LlamaCppProvider, rubric7: Rubric, essays7: list[Essay]
) -> None:
    settings = ScoringSettings(debater_max_tokens=24, judge_max_tokens=24)
    ctx = make_ctx(tmp_path, genai, settings=settings)
    essay, trait = next(e for e in essays7 if e.fold == 0), rubric7.trait("Organization")
    result = await get_protocol("MAD").score_trait(ctx, essay, trait)  # type: ignore[attr-defined]
    judge = ctx.store.get(result.record_key)
    assert judge is not None and judge.score is not None and judge.score.mode == "constrained_distribution"
    dist = judge.score.distribution
    assert dist is not None and set(dist) == set(trait.scores) and sum(dist.values()) == pytest.approx(1.0)
    assert result.score == judge.score.argmax and judge.text.endswith(f"Final score: {result.score}")
    debaters = [r for r in ctx.store.records() if r.role in ("advocate", "skeptic")]
    assert debaters
    for rec in [*debaters, judge]:
        assert rec.tokens and all(t.logprob <= 0 and math.isfinite(t.logprob) for t in rec.tokens)
        first = rec.tokens[0]
        assert len(first.top) == settings.top_logprobs  # the first token's alternatives, most probable first
        assert [a.logprob for a in first.top] == sorted((a.logprob for a in first.top), reverse=True)
        assert first.logprob <= first.top[0].logprob + 2e-3
        assert rec.usage.prompt_tokens > 100 and rec.usage.completion_tokens > 0
        assert rec.usage.cached_prompt_tokens is None  # GenAI does not say how much of a prompt its cache held
    for rec in debaters:  # the confidence features read a message's first token
        assert rec.confidence == pytest.approx(math.exp(rec.tokens[0].logprob))  # type: ignore[index]
        assert rec.confidence_source == "first_token_logprob"
    assert genai.describe()["runtime"] == "openvino-genai" == genai.cache_identity()["runtime"]
    # the description a run stores of its backend says what these records hold differently from llama.cpp's
    assert genai.describe()["records"]["top_logprobs_at"] == TOP_AT


async def test_alternatives_where_scores_are_read_and_numbers_that_stay_within_1e3(genai: LlamaCppProvider) -> None:
    essay = "The bus was late, and I waited in the rain without a word of complaint. " * 40
    long = [Message(role="system", content="You grade essays."), Message(role="user", content=essay)]
    scored = ChatRequest(
        messages=long, prefill="Score out of 10: 7. Reason:", max_tokens=12, logprobs=True, top_logprobs=3
    )
    first = await genai.complete(scored)
    again = await genai.complete(scored)  # its prompt now in the pipeline's cache
    assert first.raw["top_logprobs_at"] == TOP_AT and first.tokens and again.tokens
    assert first.text == again.text
    assert max(abs(a.logprob - b.logprob) for a, b in zip(first.tokens, again.tokens, strict=True)) < 2e-3
    for i, token in enumerate(first.tokens):  # alternatives at the first token and at every number, nowhere else
        assert len(token.top) == (3 if i == 0 or token.token.strip().isdigit() else 0)
    sampled = ChatRequest(messages=long, max_tokens=16, temperature=0.9, seed=11, logprobs=True)
    one, two = await genai.complete(sampled), await genai.complete(sampled)
    assert one.text == two.text and one.text  # a seed gives the same sample
    other = await genai.complete(sampled.model_copy(update={"seed": 12, "max_tokens": 24}))
    assert other.text != one.text  # the seed drives it
    choose = scored.model_copy(update={"prefill": "Score: ", "choices": ["1", "2", "10", "Z"], "max_tokens": 1})
    chosen = await genai.complete(choose)
    repeated = await genai.complete(choose)  # the same choices again, over a prompt now cached
    assert chosen.choice_logprobs is not None and repeated.choice_logprobs is not None
    assert chosen.raw["choices_missing"] == repeated.raw["choices_missing"] == 0
    assert chosen.choice_logprobs["Z"] < chosen.choice_logprobs["10"] < chosen.choice_logprobs["1"]
    assert repeated.choice_logprobs == pytest.approx(chosen.choice_logprobs, abs=2e-3)
    # a single-token choice's log-probability is the free distribution's: the same prompt's alternatives agree
    free_step = await genai.complete(choose.model_copy(update={"choices": None, "top_logprobs": 20}))
    assert free_step.tokens
    free = {alt.token: alt.logprob for alt in free_step.tokens[0].top}
    digits = {c: v for c, v in chosen.choice_logprobs.items() if c in free}
    assert digits and digits == pytest.approx({c: free[c] for c in digits}, abs=2e-3)


async def test_two_slots_on_one_pipeline_give_the_answers_each_gives_alone(genai: LlamaCppProvider) -> None:
    import asyncio

    assert genai.max_concurrency == 2
    reqs = [
        ChatRequest(
            messages=[Message(role="user", content=f"Name {k} colours.")], temperature=0.7, seed=k, max_tokens=12
        )
        for k in (2, 3)
    ]
    together = await asyncio.gather(*(genai.complete(r) for r in reqs))  # batched into the same steps
    apart = [await genai.complete(r) for r in reversed(reqs)]
    assert [r.text for r in together] == [r.text for r in reversed(apart)]
