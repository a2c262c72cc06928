"""The embedded model on the OpenVINO runtime beside the default (xllamacpp), on the same GGUF: the Judge's score
step reads the same scores, a record has every field, and the numbers do not depend on what ran before.

OpenVINO runs an F16 copy of the shipped Q4_1 model (exact for its weights), llama.cpp the Q4_1 file itself with
its own quantised arithmetic (activations rounded to 8 bits in each product): the two differ by about a tenth in a
token's log-probability, so a greedy rationale can take another word at a near-tie (docs/results/
openvino-embedded.md). The score step is therefore compared on the same prompt and prefill: the Judge's own
requests, recorded on xllamacpp, replayed on OpenVINO."""

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
from madrag.providers.llamacpp import LlamaCppProvider
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(importlib.util.find_spec("openvino_genai") is None, reason="openvino-genai is not installed"),
]


@pytest.fixture(scope="module")
def ov() -> LlamaCppProvider:
    return LlamaCppProvider(n_ctx=4096, runtime="openvino")


def _tvd(a: dict[str, float], b: dict[str, float]) -> float:
    pa, pb = (np.exp(np.array([d[c] for c in sorted(a)])) for d in (a, b))
    return 0.5 * float(np.abs(pa / pa.sum() - pb / pb.sum()).sum())


async def test_the_judges_score_step_reads_the_same_scores_as_xllamacpp(
    tmp_path: Path, ov: LlamaCppProvider, rubric7: Rubric, essays7: list[Essay]
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
        ours = await ov.complete(request)
        assert ours.text == theirs.text  # the same score
        assert ours.choice_logprobs is not None and theirs.choice_logprobs is not None
        assert set(ours.choice_logprobs) == set(theirs.choice_logprobs) == {str(s) for s in trait.scores}
        assert _tvd(ours.choice_logprobs, theirs.choice_logprobs) < 0.06  # Q4_1's arithmetic beside F16's
        assert ours.usage.prompt_tokens == theirs.usage.prompt_tokens  # the same tokens read


async def test_a_judge_record_on_openvino_has_every_field(
    tmp_path: Path, ov: LlamaCppProvider, rubric7: Rubric, essays7: list[Essay]
) -> None:
    settings = ScoringSettings(debater_max_tokens=24, judge_max_tokens=24)
    ctx = make_ctx(tmp_path, ov, settings=settings)
    essay, trait = next(e for e in essays7 if e.fold == 0), rubric7.trait("Organization")
    result = await get_protocol("MAD").score_trait(ctx, essay, trait)  # type: ignore[attr-defined]
    judge = ctx.store.get(result.record_key)
    assert judge is not None and judge.score is not None and judge.score.mode == "constrained_distribution"
    dist = judge.score.distribution
    assert dist is not None and set(dist) == set(trait.scores) and sum(dist.values()) == pytest.approx(1.0)
    assert result.score == judge.score.argmax and judge.text.endswith(f"Final score: {result.score}")
    records = list(ctx.store.records())
    debaters = [r for r in records if r.role in ("advocate", "skeptic")]
    assert debaters
    for rec in [*debaters, judge]:
        assert rec.tokens and all(t.logprob <= 0 and math.isfinite(t.logprob) for t in rec.tokens)
        assert len(rec.tokens[0].top) == settings.top_logprobs
        assert rec.usage.prompt_tokens > 100 and rec.usage.completion_tokens > 0
        assert rec.usage.cached_prompt_tokens is not None
    for rec in debaters:  # the confidence features read a message's first token
        assert rec.confidence == pytest.approx(math.exp(rec.tokens[0].logprob))  # type: ignore[index]
        assert rec.confidence_source == "first_token_logprob"
    assert ov.describe()["runtime"] == "openvino" and ov.cache_identity()["runtime"] == "openvino"


async def test_the_same_request_gives_the_same_numbers_whatever_ran_before(ov: LlamaCppProvider) -> None:
    essay = "The bus was late, and I waited in the rain without a word of complaint. " * 60  # > 2 chunks of 512
    long = [Message(role="system", content="You grade essays."), Message(role="user", content=essay)]
    greedy = ChatRequest(messages=long, max_tokens=8, logprobs=True, top_logprobs=3)
    sampled = ChatRequest(messages=long, max_tokens=8, temperature=0.9, seed=11, logprobs=True)
    first = await ov.complete(greedy)
    one = await ov.complete(sampled)
    again = await ov.complete(greedy)
    two = await ov.complete(sampled)
    assert first.usage.prompt_tokens is not None and first.usage.prompt_tokens > 1024
    # the whole 512-token chunks of the prompt but its last position: evaluated as from scratch
    assert first.usage.cached_prompt_tokens == 0
    assert again.usage.cached_prompt_tokens == (first.usage.prompt_tokens - 1) // 512 * 512
    assert first.text == again.text and first.tokens == again.tokens  # exactly, not approximately
    assert one.text == two.text and one.tokens == two.tokens  # a seed gives the same sample
    other = await ov.complete(sampled.model_copy(update={"seed": 12, "max_tokens": 16}))
    assert other.text != one.text  # the seed drives it
    chosen = await ov.complete(greedy.model_copy(update={"prefill": "Score: ", "choices": ["1", "2", "10"]}))
    assert chosen.choice_logprobs is not None and chosen.choice_logprobs["10"] < chosen.choice_logprobs["1"]
    assert (await ov.complete(greedy)).tokens == first.tokens  # a longer choice's tokens are cut from the state
