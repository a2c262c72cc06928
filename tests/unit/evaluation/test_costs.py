"""Cost reports over run stores: totals match the records, shared debates are attributed, prices applied,
and dry-run extrapolation is plain arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from tests.helpers import StubBank, make_ctx
from typer.testing import CliRunner

from madrag.cli.costs import costs_command
from madrag.data import Essay
from madrag.errors import InputError
from madrag.evaluation.costs.estimate import estimate_run
from madrag.evaluation.costs.prices import Price, load_prices
from madrag.evaluation.costs.render import render_text
from madrag.evaluation.costs.tally import cost_report
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.providers.base import Usage
from madrag.providers.fake import FakeProvider
from madrag.records import AgentRecord, call_key
from madrag.rubric import Rubric, Trait
from madrag.store import RunStore

TRAITS = ("Ideas", "Style")


def _rubric() -> Rubric:
    levels = {s: f"level {s}" for s in range(4)}
    return Rubric(traits=[Trait(name=n, min=0, max=3, levels=levels) for n in TRAITS])


def _essays(n: int, prefix: str) -> list[Essay]:
    return [
        Essay(
            id=f"{prefix}{i}",
            text=f"essay {i} about waiting patiently " * 20,
            rater_scores={t: [float(i % 4)] for t in TRAITS},
        )
        for i in range(n)
    ]


def rec(
    protocol: str,
    essay: str,
    trait: str,
    role: str,
    prompt: int,
    completion: int,
    *,
    requests: int = 1,
    cached: bool = False,
    model: str = "m1",
    reads: list[str] | None = None,
) -> AgentRecord:
    return AgentRecord(
        run_id="r",
        key=call_key(protocol, essay, trait, role),
        essay_id=essay,
        trait=trait,
        protocol=protocol,
        role=role,
        model=model,
        usage=Usage(prompt_tokens=prompt, completion_tokens=completion),
        answers=requests,
        cached=cached,
        context={"debate": reads} if reads is not None else {},
    )


def shared_sample(essays: int = 2, traits: int = 2) -> list[AgentRecord]:
    """Per essay-trait: a debate (adv 100/10, skp 200/20) read by a MAD judge (300/30) and a MADRAG judge
    (500/50, two requests)."""
    out = []
    for e in range(essays):
        for t in range(traits):
            essay, trait = f"e{e}", f"t{t}"
            adv = rec("debate/adv_r1", essay, trait, "advocate", 100, 10)
            skp = rec("debate/adv_r1", essay, trait, "skeptic", 200, 20)
            reads = [adv.key, skp.key]
            out += [adv, skp, rec("MAD", essay, trait, "judge", 300, 30, reads=reads)]
            out.append(rec("MADRAG", essay, trait, "judge", 500, 50, requests=2, reads=reads))
    return out


async def test_totals_match_the_records_of_a_real_run(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, FakeProvider(), StubBank(_essays(8, "pool")))
    essays = _essays(3, "e")
    await run_scoring(ctx, essays, _rubric(), [get_protocol("MAD"), get_protocol("MADRAG")])
    records = list(ctx.store.records())
    report = cost_report(ctx.store)
    total = report.total
    assert total.calls == len(records) == 3 * 2 * 4  # shared debate (2) + two judges per essay-trait
    assert total.requests == sum(r.answers for r in records)
    assert total.prompt_tokens == sum(r.usage.prompt_tokens for r in records) > 0
    assert total.completion_tokens == sum(r.usage.completion_tokens for r in records) > 0
    assert set(report.per_unit) == {(e.id, t) for e in essays for t in TRAITS}
    assert all(u.calls == 4 for u in report.per_unit.values())
    mad, madrag = report.protocols["MAD"], report.protocols["MADRAG"]
    assert mad.own.calls == madrag.own.calls == 6 and mad.shared.calls == madrag.shared.calls == 12
    assert mad.debates == ["debate/adv_r1"] and mad.shared_with == ["MADRAG"]
    assert mad.attributed.calls == madrag.attributed.calls == 6 + 6
    assert mad.attributed.plus(madrag.attributed).prompt_tokens == pytest.approx(total.prompt_tokens)
    assert report.unattributed.calls == 0
    text = render_text(report)
    assert "MAD (shared debate/adv_r1 with MADRAG)" in text and "no price table" in text


def test_shared_debates_split_equally_and_requests_per_call() -> None:
    report = cost_report(shared_sample(essays=1, traits=1))
    assert report.total.calls == 4 and report.total.requests == 5
    assert report.total.requests_per_call == pytest.approx(5 / 4)
    mad = report.protocols["MAD"]
    assert mad.own.prompt_tokens == 300 and mad.shared.prompt_tokens == 300
    assert mad.attributed.prompt_tokens == pytest.approx(300 + 150)
    assert report.by_role["judge"].calls == 2 and report.by_model["m1"].calls == 4


def test_debate_without_a_judge_is_unattributed() -> None:
    lone = rec("debate/adv_r1", "e9", "t0", "advocate", 40, 4)
    report = cost_report([*shared_sample(1, 1), lone])
    assert report.unattributed.calls == 1 and report.unattributed.prompt_tokens == 40
    summed = sum((p.attributed for p in report.protocols.values()), start=report.unattributed)
    assert summed.prompt_tokens == pytest.approx(report.total.prompt_tokens)


def test_price_table_applied_with_fallback_cache_and_unpriced(tmp_path: Path) -> None:
    table = tmp_path / "prices.yaml"
    table.write_text("m1: {prompt: 2.0, completion: 10.0}\n'*': {prompt: 1.0, completion: 1.0}\n")
    prices = load_prices(table)
    assert prices == {"m1": Price(2.0, 10.0), "*": Price(1.0, 1.0)}
    records = [
        rec("MA", "e0", "t0", "judge", 1_000_000, 100_000),  # $2 + $1
        rec("MA", "e1", "t0", "judge", 500_000, 0, model="other"),  # '*': $0.5
        rec("MA", "e2", "t0", "judge", 1_000_000, 0, cached=True),  # cached: gross only, $2
    ]
    report = cost_report(records, prices)
    assert report.total.spend == pytest.approx(3.5)
    assert report.total.gross_spend == pytest.approx(5.5)
    assert report.total.cached_calls == 1 and report.total.unpriced_calls == 0
    only_m1 = cost_report(records, {"m1": Price(2.0, 10.0)})
    assert only_m1.total.unpriced_calls == 1 and only_m1.total.gross_spend == pytest.approx(5.0)
    assert "spend $3.50 (gross $5.50)" in render_text(report)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("[1, 2]", "must map model names"),
        ("m1: {prompt: 1}", "exactly 'prompt' and 'completion'"),
        ('{"m1": {"prompt": "x", "completion": 1}}', "must be numbers"),
        ("m1: {prompt: -1, completion: 1}", "must not be negative"),
        ("m1: [unclosed", "cannot read price table"),
    ],
)
def test_bad_price_tables_are_input_errors(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(InputError, match=problem):
        load_prices(path)


def test_extrapolation_arithmetic() -> None:
    sample = shared_sample(essays=2, traits=2)  # 4 essay-traits
    prices = {"m1": Price(1.0, 2.0)}
    est = estimate_run(sample, n_essays=100, n_traits=4, prices=prices)
    units = 400
    assert est.sample_units == {"MAD": 4, "MADRAG": 4, "debate/adv_r1": 4}
    assert est.total.calls == pytest.approx(4 * units)  # the debate counted once
    assert est.total.requests == pytest.approx(5 * units)
    assert est.total.prompt_tokens == pytest.approx((100 + 200 + 300 + 500) * units)
    assert est.total.completion_tokens == pytest.approx((10 + 20 + 30 + 50) * units)
    assert est.per_protocol["MAD"].calls == pytest.approx(3 * units)
    assert est.per_protocol["MADRAG"].prompt_tokens == pytest.approx((100 + 200 + 500) * units)
    assert est.total.gross_spend == pytest.approx((1100 * 1.0 + 110 * 2.0) * units / 1_000_000)
    only_mad = estimate_run(cost_report(sample), 10, 2, protocols=["MAD"])
    assert only_mad.total.calls == pytest.approx(3 * 20) and set(only_mad.groups) == {"MAD", "debate/adv_r1"}
    assert "MAD run alone: 60 calls" in render_text(only_mad)


def test_the_time_is_the_samples_seconds_per_answered_call_times_the_calls_planned() -> None:
    """A dry run's time: the sample's wall-clock span (first request's start to the last answer stored) over its
    calls answered by the backend, times the planned run's calls; cached calls are no pace."""
    from madrag.evaluation.costs.estimate import Pace

    sample = [rec("MA", f"e{i}", "Ideas", "judge", 100, 10) for i in range(4)]
    for i, record in enumerate(sample):  # answers stored at 102, 104, 106 and 108 s, each 2 s on the backend
        record.created_at, record.latency_s = 102.0 + 2 * i, 2.0
    cached = rec("MA", "e9", "Ideas", "judge", 100, 10, cached=True)
    cached.created_at = 500.0  # served from the cache long after: not the backend's pace
    est = estimate_run([*sample, cached], n_essays=30, n_traits=1)
    assert est.pace == Pace(calls=4, seconds=8.0, busy_s=8.0) and est.pace.in_flight == pytest.approx(1.0)
    assert est.total.calls == pytest.approx(30) and est.seconds == pytest.approx(60.0)
    assert "time: about 60 s at the sample's pace (4 calls answered in 8 s, 2.00 s a call" in render_text(est)
    none = estimate_run([cached], n_essays=30, n_traits=1)
    assert none.pace is None and none.seconds is None
    assert "time: not estimated (the backend answered none of the sample's calls" in render_text(none)


def test_the_time_never_divides_by_the_concurrency_beyond_what_the_server_served() -> None:
    """Issue 48: a sample with 4 requests in flight on a 4-slot server given --concurrency 8 (4 answered at a time,
    each 4 s): its pace is 1 s a call, and 80 calls planned take 80 s, never 80 / 8 (the concurrency) nor less
    with more in flight (a CPU-bound server answers no more calls a second); a planned run sending only 2 at
    once takes twice as long."""
    from madrag.evaluation.costs.estimate import Served

    sample = [rec("MA", f"e{i}", "Ideas", "judge", 100, 10) for i in range(8)]
    for i, record in enumerate(sample):  # two waves of 4: stored at 104 and 108 s, each 4 s on the backend
        record.created_at, record.latency_s = 104.0 + 4 * (i // 4), 4.0
    est = estimate_run(sample, n_essays=80, n_traits=1)
    assert est.pace is not None and est.pace.in_flight == pytest.approx(4.0) and est.seconds == pytest.approx(80.0)
    served = Served(slots=4, concurrency=8)
    assert served.at_once == 4
    for planned, seconds in ((None, 80.0), (16, 80.0), (8, 80.0), (4, 80.0), (2, 160.0)):
        est.served, est.concurrency = served, planned
        assert est.seconds == pytest.approx(seconds), planned
    assert "x2.00 for --concurrency 2" in render_text(est) and "go faster)" not in render_text(est)
    assert Served.of({"*": {"concurrency": {"resolved": 8}, "server": {"total_slots": 4}}}) == served
    assert Served.of(None) == Served()


def test_whole_essay_calls_scale_with_essays_only() -> None:
    sample = [rec("Holistic", f"e{i}", "*", "judge", 1000, 100) for i in range(4)]
    est = estimate_run(sample, n_essays=50, n_traits=6)
    assert est.total.calls == pytest.approx(50) and est.total.prompt_tokens == pytest.approx(50_000)


def test_estimate_of_a_protocol_not_in_the_sample_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"no records of protocol\(s\) MA \(it has: MAD, MADRAG\)"):
        estimate_run(shared_sample(), 10, 4, protocols=["MA"])


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command()(costs_command)
    return app


def test_costs_command_text_json_and_errors(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    store = RunStore(run_dir / "store.sqlite")
    for record in shared_sample():
        store.put(record)
    store.close()
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m1": {"prompt": 1.0, "completion": 2.0}}))
    runner = CliRunner()
    args = ["--run-dir", str(run_dir), "--prices", str(prices), "--estimate-essays", "10"]
    result = runner.invoke(_cli(), args)
    assert result.exit_code == 0, result.output
    assert "total" in result.output and "estimate for 10 essays x 2 traits with MAD, MADRAG" in result.output
    result = runner.invoke(_cli(), [*args, "--json"])
    data = json.loads(result.output)
    assert data["report"]["total"]["calls"] == 16 and data["estimate"]["total"]["calls"] == pytest.approx(80)
    missing = runner.invoke(_cli(), ["--run-dir", str(tmp_path / "nowhere")])
    assert isinstance(missing.exception, InputError) and not (tmp_path / "nowhere").exists()
    bad = runner.invoke(_cli(), ["--run-dir", str(run_dir), "--estimate-essays", "0"])
    assert isinstance(bad.exception, InputError)


async def test_consensus_round_zero_is_shared_among_the_protocols_that_read_it(tmp_path: Path) -> None:
    """The consensus paper: StrictJudge makes no call of its own; it and ConsensusMAD share the round-0 Strict call."""
    ctx = make_ctx(tmp_path, FakeProvider())
    names = ["StrictJudge", "ConsensusMAD[rounds=1]"]
    await run_scoring(ctx, _essays(2, "c"), _rubric(), [get_protocol(n) for n in names])
    report = cost_report(list(ctx.store.records()), protocols=names)
    assert report.total.calls == 8  # per essay: Strict and Lenient round 0, then one round of both
    mad, strict = report.protocols["ConsensusMAD"], report.protocols["StrictJudge"]
    assert (mad.own.calls, mad.shared.calls) == (4, 4) and mad.shared_with == ["StrictJudge"]
    assert (strict.own.calls, strict.shared.calls) == (0, 2) and strict.debates == ["consensus/init"]
    # the Strict round-0 call is split between the two, the Lenient one read by ConsensusMAD alone
    assert strict.attributed.calls == pytest.approx(1.0) and mad.attributed.calls == pytest.approx(7.0)
    assert strict.attributed.calls + mad.attributed.calls + report.unattributed.calls == pytest.approx(8)
    alone = estimate_run(report, n_essays=10, n_traits=4, protocols=["StrictJudge"])
    assert alone.total.calls == pytest.approx(20)  # the whole round 0 group (both roles), 2 per essay
    text = render_text(report)
    assert "per essay, calls scoring every trait (2)" in text and "StrictJudge (shared consensus/init" in text
    ctx.store.close()


def test_an_answer_naming_a_dated_model_is_priced_as_the_model_asked_for() -> None:
    """Records keep the model the answers named (OpenAI's API answers gpt-4o-mini as gpt-4o-mini-2024-07-18)
    beside the one asked for: a price table naming the one asked for still prices them."""
    from madrag.evaluation.costs.prices import Price

    record = rec("MA", "e1", "Ideas", "judge", 1_000_000, 0, model="gpt-4o-mini-2024-07-18")
    record.requested_model = "gpt-4o-mini"
    report = cost_report([record], {"gpt-4o-mini": Price(0.15, 0.6)})
    assert report.total.spend == pytest.approx(0.15) and set(report.by_model) == {"gpt-4o-mini-2024-07-18"}
