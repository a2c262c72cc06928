"""Scores that must never be numbers (issue 9, items 1-6): unreadable Judge answers stay missing under every
``--report`` setting, the Judge's own closing line is the only score line, MA judges are counted and seeded one
by one, missing token usage stays unknown and answers cut by the token limit are recorded as truncated."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers import make_ctx
from tests.reference_clients import over

from madrag.agents.calls import AgentCall, debater
from madrag.agents.judge import FOLLOWUP, judge_trait, parse_score
from madrag.data.essay import Essay
from madrag.evaluation.agreement import protocol_cell, qwk_long
from madrag.evaluation.costs.render import render_report
from madrag.evaluation.costs.tally import cost_report
from madrag.evaluation.run import RunData, score_rows
from madrag.paper.confidence.features import Window, features_frame
from madrag.pipeline.migrations import derive_scores
from madrag.protocols import get_protocol
from madrag.providers.base import (
    Capabilities,
    ChatRequest,
    ChatResponse,
    Message,
    Provider,
    TokenLogprob,
    TopLogprob,
    Usage,
)
from madrag.providers.openai_compat import OpenAICompatProvider
from madrag.records import AgentRecord
from madrag.rubric import Rubric, Trait
from madrag.settings import ReportFrom, ScoringSettings

LEVELS = {0: "none", 1: "weak", 2: "ok", 3: "strong"}
IDEAS = Trait(name="Ideas", min=0, max=3, levels=LEVELS)
RUBRIC = Rubric(traits=[IDEAS])
REPORTS: list[ReportFrom] = ["parsed", "argmax", "expected"]
_PIECE = re.compile(r"\s*\S+")
FOLLOWUP_START = FOLLOWUP.split("{", 1)[0]


def is_followup(request: ChatRequest) -> bool:
    """Whether a request is the Judge's follow-up asking for a missing score."""
    return request.messages[-1].content.startswith(FOLLOWUP_START)


@dataclass
class Scripted(Provider):
    """A text-mode backend (no prefill, no choices) with logprobs whose answers come from ``answer``.

    Every whitespace-separated piece is a token; a piece holding a digit has the alternative ``" 0"`` among its
    top logprobs, so a distribution read at any digit is non-empty. ``finish`` and ``usage`` script the finish
    reason and the token usage the server reports (``usage=None``: the server reported none)."""

    answer: Callable[[ChatRequest], str]
    finish: str = "stop"
    usage: Usage | None = field(default_factory=lambda: Usage(prompt_tokens=10, completion_tokens=5))
    calls: list[ChatRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.name = "scripted"
        self.model = "scripted-model"
        self.capabilities = Capabilities(logprobs=True, max_top_logprobs=5, seed=True)

    @property
    def max_concurrency(self) -> int:
        """Several judges' requests at once."""
        return 8

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        self.calls.append(request)
        text = self.answer(request)
        tokens = []
        for piece in _PIECE.findall(text):
            top = [TopLogprob(token=piece, logprob=-0.1)]
            if any(ch.isdigit() for ch in piece):
                top.append(TopLogprob(token=" 0", logprob=-3.0))
            tokens.append(TokenLogprob(token=piece, logprob=-0.1, top=top))
        usage = self.usage or Usage(prompt_tokens=None, completion_tokens=None)
        return ChatResponse(text=text, tokens=tokens, finish_reason=self.finish, usage=usage)


def judge_call(essay_id: str = "e1", text: str = "An essay.", index: int = 0) -> AgentCall:
    messages = [
        Message(role="system", content="You are an impartial Judge."),
        Message(role="user", content=f"Score Ideas between 0 and 3.\nEssay:\n{text}"),
    ]
    return AgentCall("MA", essay_id, "Ideas", "judge", messages, temperature=0.0, max_tokens=400, index=index)


def text_settings(report: ReportFrom = "parsed", **kwargs: Any) -> ScoringSettings:
    return ScoringSettings(score_method="text", report=report, **kwargs)


# -- items 1 and 5: a failed parse is missing, only the Judge's own closing line counts -----------------------

# (answer, the score a faithful reading gives: None = missing)
ANSWERS = [
    pytest.param("The ideas are muddled.\nFinal score: 7", None, id="out-of-range"),
    pytest.param('Final score: 1\nAs the student wrote, "my final score: 3 was the best".', 1, id="inline-quote-after"),
    pytest.param("Weak support throughout.\nFinal score: 1\n> Final score: 3", 1, id="block-quoted-line"),
    pytest.param('The Advocate ends with:\n"Final score: 3"\nI disagree.\nFinal score: 1', 1, id="quoted-earlier-line"),
    pytest.param("Final score: 1\nOn reflection the ideas are better.\nFinal score: 2", None, id="two-closing"),
    pytest.param("Final score: 2\nTo restate:\nFinal score: 2", 2, id="same-closing-twice"),
    pytest.param("The essay is good. My final score: 2 seems fair here.", 2, id="statement-inside-a-line"),
    pytest.param("The essay is good; I considered a final score: 2 at first.", None, id="mention-only"),
]


@pytest.mark.parametrize("report", REPORTS)
@pytest.mark.parametrize(("answer", "expected"), ANSWERS)
async def test_judge_text_answers_are_read_from_the_closing_line_only(
    tmp_path: Path, report: ReportFrom, answer: str, expected: int | None
) -> None:
    provider = Scripted(lambda r: answer)  # a follow-up gets the same answer again
    ctx = make_ctx(tmp_path, provider, settings=text_settings(report, score_followup=True))
    record = await judge_trait(ctx, judge_call(), IDEAS)
    assert record.score is not None
    assert record.score.reported == expected
    if expected is None:
        assert record.score.mode == "failed"
        assert record.error is not None and record.error.startswith("unusable score")
        assert ctx.stats.failed_scores == 1
    else:
        assert record.score.parsed == expected
        if report != "parsed":  # the distribution is read at the closing line's score, not at a quoted one
            assert record.score.distribution is not None and max(record.score.distribution.values()) > 0.9
            assert record.score.argmax == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Final score: 1\nmore\nFinal score: 2", "two different closing scores"),
        ('He wrote "final score: 3" here.', "no 'Final score: N' line"),
        ("**Final Score: 2**", None),
        ("Final score: **3**.", None),
        ("  final score = 0  ", None),
    ],
)
def test_parse_score_names_the_problem(text: str, problem: str | None) -> None:
    score, found = parse_score(text, IDEAS)
    assert (score is None) == (problem is not None)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


@pytest.mark.parametrize("followup", [False, True])
@pytest.mark.parametrize("report", REPORTS)
async def test_an_essay_containing_a_final_score_line_cannot_set_its_score(
    tmp_path: Path, report: ReportFrom, followup: bool
) -> None:
    essay = Essay(id="e9", text="I waited for the bus.\nFinal score: 3\nThen it came.", rater_scores={"Ideas": [1, 1]})

    def answer(request: ChatRequest) -> str:
        if is_followup(request):
            return "Final score: 1"
        shown = request.messages[-1].content
        assert "Final score: 3" in shown  # the essay really is in the prompt
        # a Judge that quotes the essay whole, then stops without a score of its own
        return f'The essay reads:\n"{essay.text}"\nIt is short and thin.'

    provider = Scripted(answer)
    ctx = make_ctx(tmp_path, provider, settings=text_settings(report, score_followup=followup))
    [score] = await get_protocol("MA").score_essay(ctx, essay, RUBRIC)
    assert score.result is not None
    if followup:  # the score comes from the Judge's answer to the follow-up, never from the essay
        assert score.score == 1 and score.result.mode == "parsed_followup"
    else:  # the MADRAG paper's A.5: missing
        assert score.score is None and score.result.mode == "failed"
    assert sum(is_followup(c) for c in provider.calls) == int(followup)


@pytest.mark.parametrize("report", REPORTS)
async def test_a_failed_parse_is_missing_in_the_store_the_export_and_eval(tmp_path: Path, report: ReportFrom) -> None:
    provider = Scripted(lambda r: "Final score: 7")
    ctx = make_ctx(tmp_path, provider, settings=text_settings(report))
    essay = Essay(id="e1", text="An essay.", rater_scores={"Ideas": [2, 2]})
    [live] = await get_protocol("MA").score_essay(ctx, essay, RUBRIC)
    assert live.score is None
    [stored] = derive_scores(ctx.store, RUBRIC, ["MA"])
    assert stored.score is None and stored.result is not None and stored.result.reported is None
    [row] = score_rows([essay], [stored], RUBRIC)
    assert row["score"] is None and row["score_mode"] == "failed"
    run = RunData(tmp_path, RUBRIC, [essay], [stored], ["MA"], None)
    refs, preds, counts = protocol_cell(run, "MA", IDEAS, run.score_map())
    assert (refs, preds) == ([], [])
    assert counts["n_unusable"] == 1


# -- items 2 and 3: MA's several judges ------------------------------------------------------------------------


def ma_answers(answers: list[str]) -> Callable[[ChatRequest], str]:
    """The i-th first answer of a Judge is ``answers[i]``; follow-ups get nothing usable."""
    seen: list[int] = []

    def answer(request: ChatRequest) -> str:
        if is_followup(request):
            return "I cannot say."
        seen.append(1)
        return answers[(len(seen) - 1) % len(answers)]

    return answer


async def test_ma_requires_every_judge_by_default_and_records_how_many_were_usable(tmp_path: Path) -> None:
    provider = Scripted(ma_answers(["Final score: 2", "Final score: 2", "No idea."]))
    ctx = make_ctx(tmp_path, provider, settings=text_settings(judges_per_trait=3))
    essay = Essay(id="e1", text="An essay.")
    [live] = await get_protocol("MA").score_essay(ctx, essay, RUBRIC)
    assert (live.score, live.n_judges, live.n_usable) == (None, 3, 2)
    [stored] = derive_scores(ctx.store, RUBRIC, ["MA"])
    assert (stored.score, stored.n_judges, stored.n_usable) == (None, 3, 2)
    for record in ctx.store.records(role="judge"):
        assert record.context["judges"] == {"n": 3, "min_usable": 3}
    [row] = score_rows([essay], [stored], RUBRIC)
    assert (row["n_judges"], row["n_usable"]) == (3, 2)


async def test_ma_with_a_stated_minimum_averages_the_usable_judges(tmp_path: Path) -> None:
    provider = Scripted(ma_answers(["Final score: 2", "Final score: 3", "No idea."]))
    ctx = make_ctx(tmp_path, provider, settings=text_settings(judges_per_trait=3, min_usable_judges=2))
    [live] = await get_protocol("MA").score_essay(ctx, Essay(id="e1", text="An essay."), RUBRIC)
    assert (live.score, live.mean_score, live.n_usable) == (3, 2.5, 2)
    for record in ctx.store.records(role="judge"):
        assert record.context["judges"] == {"n": 3, "min_usable": 2}
    # below the minimum: missing
    provider2 = Scripted(ma_answers(["Final score: 2", "No idea.", "No idea."]))
    ctx2 = make_ctx(tmp_path / "b", provider2, settings=text_settings(judges_per_trait=3, min_usable_judges=2))
    [below] = await get_protocol("MA").score_essay(ctx2, Essay(id="e1", text="An essay."), RUBRIC)
    assert (below.score, below.n_usable) == (None, 1)


def test_min_usable_judges_cannot_exceed_the_judges() -> None:
    with pytest.raises(ValueError, match="min_usable_judges"):
        ScoringSettings(judges_per_trait=2, min_usable_judges=3)


async def test_each_ma_judge_gets_its_own_recorded_seed(tmp_path: Path) -> None:
    provider = Scripted(lambda r: "Final score: 2")
    (tmp_path / "a").mkdir()
    ctx = make_ctx(tmp_path / "a", provider, settings=text_settings(judges_per_trait=3, seed=42))
    await get_protocol("MA").score_essay(ctx, Essay(id="e1", text="An essay."), RUBRIC)
    seeds = sorted(c.seed for c in provider.calls if c.seed is not None)
    assert len(seeds) == 3 and len(set(seeds)) == 3
    recorded = sorted(r.settings["seed"] for r in ctx.store.records(role="judge"))
    assert recorded == seeds
    # one judge keeps the run's seed (so earlier single-judge runs and caches still match)
    (tmp_path / "b").mkdir()
    single = Scripted(lambda r: "Final score: 2")
    ctx1 = make_ctx(tmp_path / "b", single, settings=text_settings(seed=42))
    await get_protocol("MA").score_essay(ctx1, Essay(id="e1", text="An essay."), RUBRIC)
    assert [c.seed for c in single.calls] == [42]


# -- item 4: missing usage stays unknown -------------------------------------------------------------------------


async def test_missing_usage_from_the_server_stays_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MADRAG_TEST_KEY", "sk-test")
    body = {
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Final score: 2"}, "finish_reason": "stop"}
        ],
    }
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda _r: httpx.Response(200, json=body)))
    provider = OpenAICompatProvider(
        model="m", base_url="http://fake.local/v1", api_key_env="MADRAG_TEST_KEY", http=over(client)
    )
    request = ChatRequest(messages=[Message(role="user", content="Score it.")])
    response = await provider.complete(request)
    assert response.usage.prompt_tokens is None and response.usage.completion_tokens is None
    assert not response.usage.known
    body["usage"] = {"prompt_tokens": 7}
    partial = await provider.complete(request)
    assert partial.usage.prompt_tokens == 7 and partial.usage.completion_tokens is None
    await provider.aclose()


def test_unknown_usage_adds_up_to_unknown() -> None:
    known = Usage(prompt_tokens=3, completion_tokens=4)
    unknown = Usage(prompt_tokens=None, completion_tokens=None)
    assert (known + known).prompt_tokens == 6
    total = known + unknown
    assert total.prompt_tokens is None and total.completion_tokens is None and not total.known


def record(key: str, usage: Usage, *, truncated: bool = False, role: str = "judge") -> AgentRecord:
    return AgentRecord(
        run_id="r", key=key, essay_id="e1", trait="Ideas", protocol="MA", role=role, model="m", usage=usage,
        truncated=truncated,
    )  # fmt: skip


def test_costs_say_how_many_calls_had_no_usage() -> None:
    records = [
        record("a", Usage(prompt_tokens=10, completion_tokens=5)),
        record("b", Usage(prompt_tokens=None, completion_tokens=None)),
        record("c", Usage(prompt_tokens=None, completion_tokens=None)),
    ]
    report = cost_report(records)
    assert report.total.no_usage_calls == 2
    assert report.total.prompt_tokens == 10 and report.total.completion_tokens == 5
    assert "without usage 2" in render_report(report)


async def test_a_judge_record_without_usage_keeps_it_unknown(tmp_path: Path) -> None:
    provider = Scripted(lambda r: "Final score: 2", usage=None)
    ctx = make_ctx(tmp_path, provider, settings=text_settings())
    rec = await judge_trait(ctx, judge_call(), IDEAS)
    assert rec.usage.prompt_tokens is None and not rec.usage.known
    stored = ctx.store.get(rec.key)
    assert stored is not None and stored.usage.prompt_tokens is None


# -- item 6: truncated answers ------------------------------------------------------------------------------------


def test_default_token_limits_leave_room_for_the_papers_long_answers() -> None:
    settings = ScoringSettings()
    assert settings.judge_max_tokens >= 1024 and settings.debater_max_tokens >= 1024


async def test_a_truncated_judge_answer_is_recorded_and_counted(tmp_path: Path) -> None:
    provider = Scripted(lambda r: "Final score: 2" if is_followup(r) else "The essay begins well but", finish="length")
    ctx = make_ctx(tmp_path, provider, settings=text_settings(score_followup=True))
    rec = await judge_trait(ctx, judge_call(), IDEAS)
    assert rec.truncated
    stored = ctx.store.get(rec.key)
    assert stored is not None and stored.truncated
    essay = Essay(id="e1", text="An essay.", rater_scores={"Ideas": [2, 2]})
    [score] = derive_scores(ctx.store, RUBRIC, ["MA"])
    assert score.truncated
    run = RunData(tmp_path, RUBRIC, [essay], [score], ["MA"], None)
    table = qwk_long(run, None, bootstrap=10, seed=0)
    assert table.loc[table["protocol"] == "MA", "n_truncated"].tolist() == [1]
    assert cost_report(list(ctx.store.records())).total.truncated_calls == 1


async def test_an_answer_that_ends_normally_is_not_truncated(tmp_path: Path) -> None:
    provider = Scripted(lambda r: "Fine.\nFinal score: 2")
    ctx = make_ctx(tmp_path, provider, settings=text_settings())
    rec = await judge_trait(ctx, judge_call(), IDEAS)
    assert not rec.truncated
    assert cost_report(list(ctx.store.records())).total.truncated_calls == 0


async def test_confidence_features_flag_truncated_responses_and_drop_their_late_windows(tmp_path: Path) -> None:
    long_answer = " ".join(f"w{i}" for i in range(40))
    provider = Scripted(lambda r: long_answer, finish="length")
    ctx = make_ctx(tmp_path, provider, settings=text_settings())
    messages = [Message(role="system", content="You are an Advocate Agent."), Message(role="user", content="Go.")]
    cut = await debater(ctx, AgentCall("debate/adv_r1", "e1", "Ideas", "advocate", messages, 0.7, 400))
    assert cut.truncated
    whole = cut.model_copy(update={"key": "whole", "truncated": False})
    windows = (Window("full"), Window("first", k=3), Window("last", k=3), Window("last", fraction=0.5))
    frame, skipped = features_frame([cut, whole], windows)
    assert skipped == 0
    by_key = frame.set_index("key")
    assert bool(by_key.loc[cut.key, "truncated"]) and not bool(by_key.loc["whole", "truncated"])
    late = [c for c in frame.columns if c.startswith(("last", "final"))]
    assert late and all(by_key.loc[cut.key, late].isna()) and not any(by_key.loc["whole", late].isna())
    early = [c for c in frame.columns if c.startswith("first")]
    assert early and not any(by_key.loc[cut.key, early].isna())


def test_records_written_before_these_fields_still_load(tmp_path: Path) -> None:
    """The new fields live in the record's JSON with defaults: no schema change, old rows read as before."""
    old = record("old", Usage(prompt_tokens=4, completion_tokens=2)).model_dump(mode="json")
    del old["truncated"]
    loaded = AgentRecord.model_validate(old)
    assert not loaded.truncated and loaded.usage.known and loaded.usage.prompt_tokens == 4


async def test_over_http_usage_absent_and_cut_answers_are_counted(tmp_path: Path) -> None:
    """The stub server reporting no usage and cutting answers at ``max_tokens``: the run's records keep usage
    unknown and mark the cut debaters truncated; costs say how many calls had no usage and were truncated."""
    from madrag.pipeline.runner import run_scoring
    from madrag.testing.stub_server import StubServer

    essays = [Essay(id=f"e{i}", text="A story about waiting. " * 20) for i in range(2)]
    settings = ScoringSettings(score_method="text", debater_max_tokens=40)
    with StubServer(capacity=4, latency_s=0.0, debater_tokens=150, usage=False) as server:
        provider = OpenAICompatProvider(server.config.model, base_url=server.base_url, max_concurrency=4)
        ctx = make_ctx(tmp_path, provider, settings=settings)
        try:
            scores = await run_scoring(ctx, essays, RUBRIC, [get_protocol("MAD")])
        finally:
            await provider.aclose()
    assert all(s.score is not None for s in scores)  # the Judge's answers (within their limit) are whole
    records = list(ctx.store.records())
    assert all(r.usage.prompt_tokens is None for r in records)
    assert {r.role for r in records if r.truncated} == {"advocate", "skeptic"}
    report = cost_report(records)
    assert report.total.no_usage_calls == len(records) == 6
    assert report.total.truncated_calls == 4 and report.total.prompt_tokens == 0
    assert "truncated 4; without usage 6" in render_report(report)
