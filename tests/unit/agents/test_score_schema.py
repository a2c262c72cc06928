"""Constrained Judge scoring on OpenAI-compatible servers (issue 32, item 1): with ``--score-method constrained``
a backend that takes a JSON schema but has no prefill / choices gets the rationale, then the score asked for under
a schema limited to the trait's valid integers; each record says which reading it used; ``auto`` (the default)
still reads the text (the MADRAG paper's A.5); the run checks before its first call that the server honours a
schema, and a
server that ignores it is refused in one line. The summary names why scores were unusable."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers import make_ctx
from tests.reference_clients import over
from tests.unit.agents.test_faithful_scores import IDEAS, judge_call

from madrag.agents.judge import judge_all_traits, judge_trait
from madrag.errors import ConfigError, ProviderError
from madrag.pipeline.preflight import preflight
from madrag.pipeline.unusable import repeats_itself, unusable_by_protocol
from madrag.protocols.scores import TraitScore
from madrag.providers.base import Capabilities, ChatRequest
from madrag.providers.fake import FakeProvider, FakeReply
from madrag.providers.openai_compat import OpenAICompatProvider
from madrag.records import AgentRecord, ScoreResult
from madrag.rubric import Rubric, Trait
from madrag.settings import ScoringSettings

SCHEMA_ONLY = Capabilities(json_schema=True, seed=True)
"""An OpenAI-compatible server: JSON schema, no prefill, no choices."""
STYLE = Trait(name="Style", min=1, max=4, levels={1: "weak", 2: "fair", 3: "good", 4: "strong"})


def _schema_script(score: str) -> Any:
    def script(request: ChatRequest) -> FakeReply:
        if request.json_schema is not None:
            return FakeReply(score)
        return FakeReply("The ideas are clear and the details general, repeated " * 3, finish_reason="length")

    return script


async def test_constrained_on_a_schema_server_reads_the_score_under_the_schema(tmp_path: Path) -> None:
    fake = FakeProvider(script=_schema_script('{"score": 2}'), caps=SCHEMA_ONLY)
    ctx = make_ctx(tmp_path, fake, settings=ScoringSettings(score_method="constrained"))
    record = await judge_trait(ctx, judge_call(), IDEAS)
    first, second = fake.calls
    assert first.json_schema is None and "Final score" in first.stop
    assert second.json_schema is not None
    assert second.json_schema["properties"]["score"]["enum"] == [0, 1, 2, 3]
    assert second.messages[-2].role == "assistant" and second.messages[-2].content == record.rationale
    assert record.score is not None and record.score.reported == 2 and record.score.mode == "constrained_schema"
    assert record.settings["score_reading"] == "schema" and record.answers == 2
    assert record.truncated  # the rationale was cut, and the score was still read


@pytest.mark.parametrize("answer", ['{"score": 9}', "Final score: 2", '{"score": "2"}', '{"score": true}'])
async def test_a_score_outside_the_schema_is_missing_never_a_number(tmp_path: Path, answer: str) -> None:
    fake = FakeProvider(script=_schema_script(answer), caps=SCHEMA_ONLY)
    ctx = make_ctx(tmp_path, fake, settings=ScoringSettings(score_method="constrained"))
    record = await judge_trait(ctx, judge_call(), IDEAS)
    assert record.score is not None and record.score.reported is None and record.score.mode == "failed"
    assert record.error is not None and "score step gave" in record.error
    assert record.settings["score_reading"] == "schema"


async def test_the_default_still_reads_the_text_on_a_schema_server(tmp_path: Path) -> None:
    fake = FakeProvider(script=["Clear ideas.\nFinal score: 3"], caps=SCHEMA_ONLY)
    ctx = make_ctx(tmp_path, fake, settings=ScoringSettings())  # score_method auto
    record = await judge_trait(ctx, judge_call(), IDEAS)
    assert len(fake.calls) == 1 and fake.calls[0].json_schema is None
    assert record.score is not None and record.score.mode == "parsed_text"
    assert record.settings["score_reading"] == "text"


async def test_all_traits_under_one_schema(tmp_path: Path) -> None:
    rubric = Rubric(traits=[IDEAS, STYLE])
    fake = FakeProvider(script=_schema_script('{"Ideas": 1, "Style": 7}'), caps=SCHEMA_ONLY)
    ctx = make_ctx(tmp_path, fake, settings=ScoringSettings(score_method="constrained"))
    call = judge_call()
    call.trait = "*"
    record = await judge_all_traits(ctx, call, rubric)
    schema = fake.calls[1].json_schema
    assert schema is not None and schema["required"] == ["Ideas", "Style"]
    assert schema["properties"]["Style"]["enum"] == [1, 2, 3, 4]
    assert record.trait_scores is not None
    assert record.trait_scores["Ideas"].reported == 1 and record.trait_scores["Ideas"].mode == "constrained_schema"
    assert record.trait_scores["Style"].reported is None  # 7 is not a valid Style score
    assert record.error is not None and "Style" in record.error


async def test_constrained_on_a_backend_with_neither_is_one_line(tmp_path: Path) -> None:
    fake = FakeProvider(script=["Final score: 2"], caps=Capabilities())
    ctx = make_ctx(tmp_path, fake, settings=ScoringSettings(score_method="constrained"))
    with pytest.raises(ConfigError, match="has neither"):
        await judge_trait(ctx, judge_call(), IDEAS)


def _server(answer: str, seen: list[dict[str, Any]]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        if request.url.path.endswith(("/props", "/tokenize")):  # not llama.cpp's server: none of its own routes
            return httpx.Response(404)
        seen.append(json.loads(request.content))
        body = {"choices": [{"message": {"content": answer}, "finish_reason": "stop"}], "model": "m"}
        return httpx.Response(200, json=body)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def _openai(client: httpx.AsyncClient, logprobs: bool = False) -> OpenAICompatProvider:
    return OpenAICompatProvider(
        model="m",
        base_url="http://server.test/v1",
        http=over(client),
        supports_logprobs=logprobs,
    )


async def test_preflight_refuses_a_server_that_ignores_the_schema(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    provider = _openai(_server("OK", seen))
    ctx = make_ctx(tmp_path, provider, settings=ScoringSettings(score_method="constrained"))
    with pytest.raises(ConfigError, match=r"ignored a JSON schema.*--score-method text with a new --run-dir$"):
        await preflight(ctx)  # a run that has records: the option changes what they mean
    assert seen[0]["response_format"]["type"] == "json_schema"
    with pytest.raises(ConfigError, match=r"ignored a JSON schema.*use --score-method text$"):
        await preflight(ctx, started=False)  # a run with no record yet takes it in the same folder


async def test_preflight_accepts_a_server_that_honours_the_schema(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    provider = _openai(_server('{"madrag_probe": 7}', seen))
    ctx = make_ctx(tmp_path, provider, settings=ScoringSettings(score_method="constrained"))
    found = await preflight(ctx)
    # the requests of the checks are counted by madrag's HTTP client (these tests give an httpx one): none here
    honoured = {"reachable": True, "score_reading": "schema", "json_schema_probe": "honoured", "requests": {}}
    assert found["*"] == honoured | _FIT


async def test_preflight_asks_nothing_of_the_default_reading(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    ctx = make_ctx(tmp_path, _openai(_server("OK", seen)), settings=ScoringSettings())
    assert (await preflight(ctx))["*"]["score_reading"] == "text"
    assert seen == []


async def test_preflight_refuses_a_server_that_drops_the_logprobs_it_was_asked_for(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    ctx = make_ctx(tmp_path, _openai(_server("OK", seen), logprobs=True), settings=ScoringSettings())
    with pytest.raises(ProviderError, match=r"returned no logprobs.*rerun with --no-logprobs"):
        await preflight(ctx)
    assert len(seen) == 1 and seen[0]["logprobs"] is True and seen[0]["max_tokens"] <= 8


_FIT = {
    "backend": "openai (m)",
    "concurrency": {"given": None, "default": 8, "slots": None, "resolved": 8},  # a server saying no slots
}
"""What the start-up check records of a backend whose server says nothing of itself: its default concurrency."""


async def test_preflight_accepts_a_server_that_gives_logprobs(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        token = {"token": "OK", "logprob": -0.1, "top_logprobs": [{"token": "OK", "logprob": -0.1}]}
        choice = {"message": {"content": "OK"}, "finish_reason": "stop", "logprobs": {"content": [token]}}
        return httpx.Response(200, json={"choices": [choice], "model": "m"})

    provider = _openai(httpx.AsyncClient(transport=httpx.MockTransport(handler)), logprobs=True)
    ctx = make_ctx(tmp_path, provider, settings=ScoringSettings())
    found = (await preflight(ctx))["*"]
    assert found == {"reachable": True, "score_reading": "text", "logprobs": "checked", "requests": {}} | _FIT


async def test_an_unreachable_server_is_one_line_before_any_call(tmp_path: Path) -> None:
    from tests.servers import free_port

    provider = OpenAICompatProvider(model="m", base_url=f"http://127.0.0.1:{free_port()}/v1", timeout_s=5)
    ctx = make_ctx(tmp_path, provider)
    with pytest.raises(ProviderError, match="cannot reach the openai-compatible server"):
        await preflight(ctx)
    await provider.aclose()


# -- why scores were unusable ---------------------------------------------------------------------------------


def _judge(
    key: str, text: str, reported: int | None, truncated: bool = False, problem: str | None = None
) -> AgentRecord:
    mode = "parsed_text" if reported is not None else "failed"
    score = ScoreResult(parsed=reported, reported=reported, mode=mode, invalid_raw=problem)
    return AgentRecord(
        run_id="r",
        key=key,
        essay_id="e1",
        trait="Ideas",
        protocol="MA",
        role="judge",
        provider="fake",
        model="m",
        prompt_hash="x",
        messages=[],
        text=text,
        score=score,
        truncated=truncated,
        settings={"max_tokens": 64},
        error=None if reported is not None else f"unusable score: {problem}",
    )


def test_the_summary_names_each_cause() -> None:
    loop = "and the ideas are clear " * 40
    records = [
        _judge("a", loop, None, truncated=True, problem="no 'Final score: N' line"),
        _judge("b", "short answer cut", None, truncated=True, problem="no 'Final score: N' line"),
        _judge("c", "Fine.", None, problem="no 'Final score: N' line"),
        _judge("d", "Fine. Final score: 2", 2),
    ]
    scores = [TraitScore(essay_id="e1", trait="Ideas", protocol="MA", score=None)]
    found = unusable_by_protocol(records, scores, ["e1"], ["Ideas", "Style"], ["MA"])["MA"]
    line = found.line()
    assert "3 of 4 judge scores unusable" in line
    assert "1 cut off at the token limit (--judge-max-tokens 64, repeating itself)" in line
    assert "1 cut off at the token limit (--judge-max-tokens 64)" in line
    assert "1 no 'Final score: N' line" in line
    assert "2 of 2 essay-trait scores missing" in line  # one scored None, one without a row at all
    assert repeats_itself(loop) and not repeats_itself("A short, varied answer about the essay's ideas.")


def _schema_server_with_logprobs(seen: list[dict[str, Any]]) -> httpx.AsyncClient:
    """An OpenAI-compatible server that gives logprobs: the rationale in text, the score step's JSON answer
    ``{"score": 2}`` in llama.cpp's tokens, 2 at 0.6 and 3 at 0.3 (and a brace among the alternatives)."""

    def token(text: str, top: dict[str, float]) -> dict[str, Any]:
        alts = [{"token": t, "logprob": math.log(p)} for t, p in top.items()]
        return {"token": text, "logprob": alts[0]["logprob"], "top_logprobs": alts}

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        if body.get("response_format") is None:
            content = [token("Clear", {"Clear": 0.9}), token(" ideas.", {" ideas.": 0.9})]
            text = "Clear ideas."
        else:
            pieces = [('{"', {'{"': 1.0}), ("score", {"score": 1.0}), ('":', {'":': 1.0}), (" ", {" ": 1.0})]
            pieces += [("2", {"2": 0.6, "3": 0.3, "}": 0.1}), ("}", {"}": 1.0})]
            content = [token(t, top) for t, top in pieces]
            text = '{"score": 2}'
        choice = {"message": {"content": text}, "finish_reason": "stop", "logprobs": {"content": content}}
        return httpx.Response(200, json={"choices": [choice], "model": "m"})

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def test_a_schema_score_on_a_server_with_logprobs_has_its_distribution(tmp_path: Path) -> None:
    """The score step under a JSON schema keeps the run's logprobs: the distribution is read at the score's token
    of the JSON answer (the other valid scores among its alternatives), so G-Eval's expectation is read on such a
    server instead of 'no score distribution'."""
    from madrag.protocols.geval import expected_result

    seen: list[dict[str, Any]] = []
    provider = _openai(_schema_server_with_logprobs(seen), logprobs=True)
    ctx = make_ctx(tmp_path, provider, settings=ScoringSettings(score_method="constrained"))
    record = await judge_trait(ctx, judge_call(), IDEAS)
    assert seen[1]["logprobs"] is True and seen[1]["top_logprobs"] == 5 and "response_format" in seen[1]
    score = record.score
    assert score is not None and score.parsed == 2 and score.reported == 2 and score.mode == "constrained_schema"
    assert score.distribution == pytest.approx({2: 2 / 3, 3: 1 / 3})
    assert score.expected == pytest.approx(2 + 1 / 3)
    geval = expected_result(record, IDEAS)
    assert geval.reported == 2 and geval.reported_from == "expected"


def test_the_json_value_offset_finds_each_traits_score() -> None:
    from madrag.agents.scores import json_value_offset

    text = '{"Ideas": 3, "Word \\"Choice\\"": 1, "score":-1}'
    assert text[json_value_offset(text, "Ideas")] == "3"
    assert text[json_value_offset(text, 'Word "Choice"')] == "1"
    assert text[json_value_offset(text, "score") :].startswith("-1")
    assert json_value_offset(text, "Style") == -1
    assert json_value_offset('{"Élan": 2}', "Élan") == 9  # the name as a model writes it, not as \u00c9lan
