"""Tokens per score: anchor exemplars, prefix-cached prompt tokens in the cost report, adaptive debate."""

from __future__ import annotations

import asyncio
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import typer
from tests.helpers import make_ctx
from typer.testing import CliRunner

from madrag.cli.costs import costs_command
from madrag.data import Essay
from madrag.evaluation.costs.render import render_report, report_to_dict
from madrag.evaluation.costs.tally import cost_report
from madrag.evaluation.run import load_run
from madrag.pipeline.job import ScoreJob, execute
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.protocols.adaptive import adaptive_summary
from madrag.providers.base import Capabilities, ChatRequest, Message, Usage
from madrag.providers.fake import FakeProvider, FakeReply, default_script, request_role
from madrag.providers.spec import ProviderSpec
from madrag.records import AgentRecord
from madrag.retrieval.bank import ExemplarBank, LevelExemplar, score_key
from madrag.retrieval.embedder import HashingEmbedder
from madrag.retrieval.memory import ArrayCollection
from madrag.rubric import Rubric, Trait
from madrag.settings import JudgeExemplars, ScoringSettings
from madrag.store import RunStore

LEVELS = {0: "none", 1: "some", 2: "good", 3: "great"}
IDEAS = Trait(name="Ideas", min=0, max=3, levels=LEVELS)
RUBRIC = Rubric(traits=[IDEAS])
ANCHORS = ScoringSettings(judge_exemplars="anchors")
TEXT_ONLY = Capabilities(logprobs=True, max_top_logprobs=20, seed=True)

# (id, Ideas score, 2-d direction in degrees): level 1's medoid is p2 (the middle of three), level 2 has one
# essay, level 3 two at the same distance (a tie: the smaller id wins), level 0 none
POOL = [("p1", 1, 0.0), ("p2", 1, 40.0), ("p3", 1, 70.0), ("p4", 2, 10.0), ("p6", 3, 90.0), ("p5", 3, 30.0)]


def anchor_bank(order: list[int] | None = None) -> ExemplarBank:
    """A bank over the POOL's vectors (unit vectors at the given angles), in ``order``."""
    rows = [POOL[i] for i in (order or range(len(POOL)))]
    vectors = np.array([[math.cos(math.radians(a)), math.sin(math.radians(a))] for _, _, a in rows], np.float32)
    collection = ArrayCollection(
        [eid for eid, _, _ in rows],
        [f"Pool essay {eid} about patience." for eid, _, _ in rows],
        [{"essay_id": eid, "essay_set": 7, score_key("Ideas"): s} for eid, s, _ in rows],
        vectors,
    )
    return ExemplarBank(collection, HashingEmbedder(2), RUBRIC, "test", built_now=False)


def level_ids(levels: list[LevelExemplar]) -> list[str | None]:
    return [lvl.exemplar.essay_id if lvl.exemplar else None for lvl in levels]


def test_anchors_are_each_levels_medoid_whatever_the_pool_order() -> None:
    essay = Essay(id="q1", text="An essay to score.")
    expected = {"Ideas": {"0": None, "1": "p2", "2": "p4", "3": "p5"}}
    for order in (None, [5, 4, 3, 2, 1, 0], [2, 0, 4, 1, 5, 3]):
        bank = anchor_bank(order)
        assert bank.anchor_ids() == expected
        assert level_ids(bank.anchors(essay, IDEAS)) == [None, "p2", "p4", "p5"]
    # brute force: level 1's medoid minimises the summed cosine distance to its level
    angles = {eid: a for eid, s, a in POOL if s == 1}
    summed = {e: sum(1 - math.cos(math.radians(a - b)) for b in angles.values()) for e, a in angles.items()}
    assert min(summed, key=lambda e: summed[e]) == "p2"


def test_an_anchor_never_scores_itself_its_runner_up_stands_in() -> None:
    bank = anchor_bank()
    assert level_ids(bank.anchors(Essay(id="p2", text="x"), IDEAS)) == [None, "p3", "p4", "p5"]
    # a level whose only essay is the one scored has no anchor for it
    assert level_ids(bank.anchors(Essay(id="p4", text="x"), IDEAS)) == [None, "p2", None, "p5"]


def judge_prompts(fake: FakeProvider) -> dict[str, list[Message]]:
    """The first (rationale) request of each essay's Judge, by the essay text it shows."""
    out: dict[str, list[Message]] = {}
    for request in fake.calls:
        if request_role(request) == "judge" and request.choices is None:
            essay = next(e for e in ("first essay", "second essay") if e in request.messages[-1].content)
            out.setdefault(essay, request.messages)
    return out


def common_prefix(a: list[Message], b: list[Message]) -> str:
    one = "".join(f"<{m.role}>{m.content}" for m in a)
    two = "".join(f"<{m.role}>{m.content}" for m in b)
    return os.path.commonprefix([one, two])  # noqa: RUF071


@pytest.mark.parametrize("protocol", ["MARAG", "MADRAG"])
async def test_anchor_judges_of_two_essays_share_the_exemplar_block_as_prefix(tmp_path: Path, protocol: str) -> None:
    essays = [Essay(id="e1", text="The first essay waits."), Essay(id="e2", text="The second essay rushes.")]
    prompts = {}
    choices: tuple[JudgeExemplars, ...] = ("nearest", "anchors")
    for choice in choices:
        fake = FakeProvider()
        ctx = make_ctx(tmp_path / choice, fake, settings=ScoringSettings(judge_exemplars=choice))
        ctx.bank = anchor_bank()
        scores = await run_scoring(ctx, essays, RUBRIC, [get_protocol(protocol)])
        assert all(s.score is not None for s in scores)
        prompts[choice] = judge_prompts(fake)
    anchors = prompts["anchors"]
    shared = common_prefix(anchors["first essay"], anchors["second essay"])
    # the prompts agree up to the essay's first word that differs, all anchors included
    assert shared.endswith("Essay:\n<<<\nThe ")
    assert all(f"Pool essay {eid} about patience." in shared for eid in ("p2", "p4", "p5"))
    assert anchors["first essay"][-1].content.index("Pool essay p5") < anchors["first essay"][-1].content.index(
        "The first essay waits."
    )
    nearest = prompts["nearest"]
    paper = common_prefix(nearest["first essay"], nearest["second essay"])
    assert paper.endswith("Essay:\n<<<\nThe ") and "Scored example essays" not in paper  # exemplars after it
    assert len(shared) > len(paper) + len("Pool essay p2 about patience.") * 3


def test_an_anchor_run_records_the_chosen_essays(tmp_path: Path, asap: Path) -> None:
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=asap / "rubric_set7.json",
        run_dir=tmp_path / "run",
        limit=2,
        protocols=["MARAG"],
        provider=ProviderSpec(kind="fake"),
        embedder="hashing",
        cache_dir=tmp_path / "cache",
        response_cache=False,
        settings=ANCHORS,
    )
    result = asyncio.run(execute(job))
    chosen = result.bank_info["anchors"]
    assert set(chosen) == {"Ideas", "Organization", "Style", "Conventions"}
    again = asyncio.run(execute(job.model_copy(update={"run_dir": tmp_path / "again"})))
    assert again.bank_info["anchors"] == chosen  # chosen once, from the pool alone: the same every time
    from tests.helpers import stored_records

    judges = [r for r in stored_records(job.run_dir) if r.role == "judge"]
    assert len(judges) == 8
    for record in judges:
        shown = {str(lvl["score"]): lvl["exemplar"]["essay_id"] for lvl in record.context["exemplars"]}
        assert shown == {s: eid for s, eid in chosen[record.trait].items() if eid is not None}


def record(key: str, usage: Usage) -> AgentRecord:
    return AgentRecord(
        key=key, run_id="r", protocol="MARAG", essay_id=key, trait="Ideas", role="judge", provider="x", model="m",
        usage=usage,
    )  # fmt: skip


def test_cost_report_counts_cached_prompt_tokens_and_calls_that_did_not_say() -> None:
    records = [
        record("a", Usage(prompt_tokens=1000, completion_tokens=10, cached_prompt_tokens=800)),
        record("b", Usage(prompt_tokens=1000, completion_tokens=10, cached_prompt_tokens=0)),
        record("c", Usage(prompt_tokens=500, completion_tokens=10)),  # the server did not say: unknown
        record("d", Usage(prompt_tokens=None, completion_tokens=None)),
    ]
    total = cost_report(records).total
    assert total.cached_prompt_tokens == 800 and total.cache_reported_prompt_tokens == 2000
    assert total.uncached_prompt_tokens == 1200
    assert total.cache_unreported_calls == 1 and total.no_usage_calls == 1
    text = render_report(cost_report(records))
    assert "prefix-cached prompt tokens 800 (40.0%), uncached 1,200, over 2 calls" in text
    assert "not reported by 1 calls" in text
    assert report_to_dict(cost_report(records))["total"]["uncached_prompt_tokens"] == 1200
    none_said = render_report(cost_report(records[2:]))
    assert "prefix-cached prompt tokens: not reported by the server; not reported by 1 calls" in none_said


def test_usage_sum_keeps_an_unreported_cached_count_unknown() -> None:
    both = Usage(prompt_tokens=5, cached_prompt_tokens=3) + Usage(prompt_tokens=5, cached_prompt_tokens=1)
    assert both.cached_prompt_tokens == 4
    assert (Usage(prompt_tokens=5, cached_prompt_tokens=3) + Usage(prompt_tokens=5)).cached_prompt_tokens is None


def test_a_judge_record_keeps_the_cached_tokens_its_server_reported(tmp_path: Path) -> None:
    """A Judge read from its text (an OpenAI-compatible server: logprobs, no constrained choice) sums its
    requests' usage from ``Usage.zero()``: with a server that reports cached tokens the record has them (from
    ``Usage()`` the sum was always unknown); with one that does not, the record says unknown."""
    essay = Essay(id="e1", text="I waited for the bus with patience.")
    for cached in (120, None):
        usage = Usage(prompt_tokens=300, completion_tokens=5, cached_prompt_tokens=cached)
        provider = FakeProvider(script=lambda _req, u=usage: FakeReply("Final score: 2", usage=u), caps=TEXT_ONLY)
        ctx = make_ctx(tmp_path / str(cached), provider)
        score = asyncio.run(get_protocol("MA").score_trait(ctx, essay, IDEAS))  # type: ignore[attr-defined]
        record = ctx.store.get(score.record_key)
        assert record is not None and record.answers >= 1
        assert record.usage.prompt_tokens == 300 * record.answers  # summed over the Judge's requests
        assert record.usage.cached_prompt_tokens == (None if cached is None else cached * record.answers)


def confident_on_e1(request: ChatRequest) -> FakeReply:
    """The debate-free Judge is sure (0.97) about essay e1 and torn about e2; everything else as the default."""
    if request.choices is None or request_role(request) != "judge":
        return default_script(request)
    text = "\n".join(m.content for m in request.messages)
    if "Advocate" not in text and "The first essay" in text:
        lps = {c: math.log(0.97 if c == "2" else 0.01) for c in request.choices}
        return FakeReply(text="2", choice_logprobs=lps)
    lps = {c: math.log(0.4 if c in ("1", "2") else 0.1) for c in request.choices}
    return FakeReply(text="1", choice_logprobs=lps)


@pytest.mark.parametrize("protocol", ["MAD", "MADRAG[adv_r2]"])
async def test_adaptive_debate_skips_confident_traits_and_counts_saved_calls(tmp_path: Path, protocol: str) -> None:
    essays = [Essay(id="e1", text="The first essay waits."), Essay(id="e2", text="The second essay rushes.")]
    fake = FakeProvider(script=confident_on_e1)
    ctx = make_ctx(tmp_path, fake, settings=ScoringSettings(adaptive_debate=0.9))
    ctx.bank = anchor_bank()
    scores = {s.essay_id: s for s in await run_scoring(ctx, essays, RUBRIC, [get_protocol(protocol)])}
    assert isinstance(ctx.store, RunStore)
    records = list(ctx.store.records())
    debaters = {(r.essay_id, r.role) for r in records if r.role in ("advocate", "skeptic")}
    assert debaters == {("e2", "advocate"), ("e2", "skeptic")}  # only the uncertain trait was debated
    assert scores["e1"].score == 2 and scores["e2"].score is not None
    assert not [r for r in records if r.protocol == protocol and r.essay_id == "e1"]  # no record of its own
    screen = ctx.store.get(scores["e1"].record_key)  # the score is the screening Judge's, named by its row
    assert screen is not None and screen.protocol == ("MARAG" if "RAG" in protocol else "MA")
    assert screen.score is not None and max((screen.score.distribution or {}).values()) == pytest.approx(0.97, 0.01)
    (row,) = [s for s in ctx.store.scores() if s.essay_id == "e1"]
    assert row.record_key == screen.key and row.score == 2
    debated = next(r for r in records if r.protocol == protocol and r.essay_id == "e2")
    assert debated.context["adaptive"]["debated"] is True and debated.context["debate"]
    turns = 4 if protocol.endswith("r2]") else 2
    ctx.store.set_meta("config", {"settings": ctx.settings.model_dump()})  # the run's threshold, as a job keeps it
    summary = adaptive_summary(ctx.store)[protocol]
    assert summary == {
        "screened": 2, "debated": 1, "skipped": 1, "calls_saved": turns + 1, "threshold": 0.9,
        "screen_calls": 2, "net_saved": turns + 1 - 2,
    }  # fmt: skip
    assert ScoringSettings(adaptive_debate=0.9).model_dump()["adaptive_debate"] == 0.9  # recorded with the run


def test_a_run_recorded_before_the_new_settings_reads_them_as_their_defaults() -> None:
    from madrag.pipeline.migrations import identity

    older = ScoringSettings().model_dump()
    del older["judge_exemplars"], older["adaptive_debate"]  # what a run made before they existed recorded
    now = {"settings": ScoringSettings().model_dump()}
    assert identity({"settings": older}) == identity(now)  # so it still resumes
    assert identity({"settings": older}) != identity({"settings": ANCHORS.model_dump()})
    assert ANCHORS.model_dump()["judge_exemplars"] == "anchors"


def test_an_adaptive_run_records_its_threshold_and_costs_reports_the_calls_saved(tmp_path: Path, asap: Path) -> None:
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=asap / "rubric_set7.json",
        run_dir=tmp_path / "run",
        limit=2,
        protocols=["MARAG", "MADRAG"],
        provider=ProviderSpec(kind="fake"),
        embedder="hashing",
        cache_dir=tmp_path / "cache",
        response_cache=False,
        settings=ScoringSettings(adaptive_debate=0.5, judge_exemplars="anchors"),
    )
    result = asyncio.run(execute(job))
    assert len([s for s in result.scores if s.protocol == "MADRAG" and s.score is not None]) == 8
    from tests.helpers import stored_records

    records = stored_records(job.run_dir)
    assert not [r for r in records if r.role in ("advocate", "skeptic")]  # the fake's Judge is sure enough (0.53)
    assert load_run(job.run_dir).config["settings"]["adaptive_debate"] == 0.5
    app = typer.Typer()
    app.command()(costs_command)
    out = CliRunner().invoke(app, ["--run-dir", str(job.run_dir)])
    assert out.exit_code == 0, out.output
    assert "adaptive debate MADRAG (threshold 0.5): debated 0 of 8 essay-traits, skipped 8: 24 calls not made" in (
        " ".join(out.output.split())
    )
    data = json.loads(CliRunner().invoke(app, ["--run-dir", str(job.run_dir), "--json"]).output)
    assert data["adaptive_debate"]["MADRAG"]["calls_saved"] == 24
    total = data["report"]["total"]
    assert total["calls"] == 8  # MARAG's Judge calls, which MADRAG's screening shared; no debate, no second Judge
    assert total["cache_unreported_calls"] == 8 and total["cached_prompt_tokens"] == 0  # the fake does not say


async def test_anchors_need_a_bank_that_chooses_them(tmp_path: Path) -> None:
    from tests.helpers import StubBank

    from madrag.errors import ConfigError

    ctx = make_ctx(tmp_path, FakeProvider(), StubBank([]), settings=ANCHORS)
    protocol = get_protocol("MARAG")
    with pytest.raises(ConfigError, match="--judge-exemplars anchors needs an exemplar bank that chooses anchors"):
        await protocol.score_trait(ctx, Essay(id="e1", text="An essay."), IDEAS)  # type: ignore[attr-defined]
