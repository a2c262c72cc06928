"""A call that uses up its retries becomes a failed record; the run goes on (unless told to stop), keeps every
answer that arrived, counts every request it sent, and a resume retries exactly the failed calls."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from tests.helpers import make_ctx, stored_records

from madrag.agents.calls import AgentCall, CallContext, debater
from madrag.data import Essay
from madrag.errors import CallFailed, RunStopping, TooManyFailures, TransientProviderError
from madrag.evaluation.agreement import protocol_cell
from madrag.evaluation.costs.render import render_text
from madrag.evaluation.costs.tally import cost_report
from madrag.evaluation.run import load_run
from madrag.pipeline.job import ScoreJob, execute
from madrag.protocols.concurrency import gather_or_cancel
from madrag.providers.base import ChatRequest, ChatResponse, Message, Provider
from madrag.providers.policy import RetryPolicy
from madrag.providers.spec import ProviderSpec
from madrag.records import AgentRecord
from madrag.testing.stub_server import StubServer

TRAITS = 4
ROLES = ("advocate", "skeptic", "judge")


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RetryPolicy, "delay", lambda self, attempt: 0.0)


def _job(
    asap: Path, essays: list[Essay], run_dir: Path, base_url: str, retries: int = 4, max_failures: int | None = None
) -> ScoreJob:
    return ScoreJob(
        essays=essays,
        rubric=asap / "rubric_set7.json",
        run_dir=run_dir,
        eval_fold=None,
        protocols=["MAD"],
        provider=ProviderSpec(kind="openai", model="stub-model", base_url=base_url, retries=retries, timeout_s=10),
        response_cache=False,
        max_failures=max_failures,
    )


def _call_requests(server: StubServer) -> int:
    """The chat requests the server saw for agent calls: all of them less the runs' logprobs checks before their
    first call (the stub's role ``other``: no agent call, so no record)."""
    stats = server.stats()
    return stats.requests - stats.by_role.get("other", 0)


def _check_nothing_lost(records: list[AgentRecord], server_requests: int, stopped: bool = False) -> None:
    """Every request the server saw is on a record, and each essay-trait's chain is good records (one per role,
    in the chain's order) up to a failed call, after which nothing of it was asked. Only a ``stopped`` run has
    chains that end without a failed call (their next call was not started)."""
    assert sum(r.attempts or 0 for r in records) == server_requests
    assert all(r.attempts is not None for r in records)
    chains: dict[tuple[str, str], list[AgentRecord]] = {}
    for r in records:
        chains.setdefault((r.essay_id, r.trait), []).append(r)
    for chain in chains.values():
        good = [r.role for r in chain if not r.failed]
        failed = {r.role for r in chain if r.failed}
        assert sorted(good, key=ROLES.index) == list(ROLES[: len(good)])  # a prefix of the chain, once each
        if len(good) < len(ROLES):
            assert ROLES[len(good)] in failed or (stopped and not failed)
    for r in records:
        assert (r.failed and r.error and "failed after" in r.error and r.text == "") or (not r.failed and r.text)


async def test_faults_at_30_percent_become_failed_records_and_a_resume_fills_them(
    tmp_path: Path, asap: Path, essays7: list[Essay]
) -> None:
    essays, run_dir = essays7[:3], tmp_path / "run"
    with StubServer(latency_s=0.0, fault_rate=0.3, fault_seed=7) as server:
        first = await execute(_job(asap, essays, run_dir, server.base_url, retries=1))
        after_first = _call_requests(server)
        records = stored_records(run_dir)
        _check_nothing_lost(records, after_first)
        failed = [r for r in records if r.failed]
        assert first.stats.failed_calls == len(failed) > 0
        assert len(first.scores) == len(essays) * TRAITS - len({(r.essay_id, r.trait) for r in failed})
        # a failed call's essay-trait is missing (and counted as such), the others scored
        run = load_run(run_dir)
        assert len(run.scores) == len(first.scores) and all(s.score is not None for s in run.scores)
        trait = run.rubric.traits[0]
        _, _, counts = protocol_cell(run, "MAD", trait, run.score_map())
        assert counts["n_missing"] == len({r.essay_id for r in failed if r.trait == trait.name})
        # costs count every request sent, retries and failed calls included
        report = cost_report(records)
        assert report.total.attempts == after_first > report.total.calls - len(failed)
        assert report.total.failed_calls == len(failed)
        assert f"failed calls {len(failed)}" in render_text(report)

        second = await execute(_job(asap, essays, run_dir, server.base_url))  # the default retries
        assert second.resumed and second.stats.failed_calls == 0
        assert second.stats.made == len(failed) + sum(
            ROLES.index("judge") - ROLES.index(r.role) for r in failed
        )  # each failed call again, and the rest of its chain
        everything = stored_records(run_dir)
        _check_nothing_lost(everything, _call_requests(server))
    assert len(second.scores) == len(essays) * TRAITS and all(s.score is not None for s in second.scores)
    assert len(load_run(run_dir).scores) == len(essays) * TRAITS
    good = Counter((r.essay_id, r.trait, r.role) for r in everything if not r.failed)
    assert set(good.values()) == {1} and len(good) == len(essays) * TRAITS * len(ROLES)


async def test_with_the_default_retries_a_faulty_server_run_completes_in_one_go(
    tmp_path: Path, asap: Path, essays7: list[Essay]
) -> None:
    essays, run_dir = essays7[:3], tmp_path / "run"
    with StubServer(latency_s=0.0, fault_rate=0.3, fault_seed=3) as server:
        result = await execute(_job(asap, essays, run_dir, server.base_url))
        stats = server.stats()
    records = stored_records(run_dir)
    assert result.stats.failed_calls == 0 and len(result.scores) == len(essays) * TRAITS
    assert stats.faults > 0 and stats.requests == stats.completed + stats.faults
    report = cost_report(records)
    checks = stats.by_role.get("other", 0)  # the logprobs check before the first call (answered: no fault)
    assert checks == 1 and report.total.attempts == stats.requests - checks and report.total.retries == stats.faults
    assert report.total.calls == len(records) == len(essays) * TRAITS * len(ROLES)


async def test_max_failures_stops_the_run_without_losing_calls_in_flight(
    tmp_path: Path, asap: Path, essays7: list[Essay]
) -> None:
    essays, run_dir = essays7[:4], tmp_path / "run"
    with StubServer(latency_s=0.05, fault_rate=0.5, fault_seed=11) as server:
        with pytest.raises(TooManyFailures, match=r"--max-failures 1") as info:
            await execute(_job(asap, essays, run_dir, server.base_url, retries=0, max_failures=1))
        assert "resume" in str(info.value)
        records = stored_records(run_dir)
        _check_nothing_lost(records, _call_requests(server), stopped=True)  # calls in flight finished, kept
        assert sum(r.failed for r in records) >= 1
        assert len(records) < len(essays) * TRAITS * len(ROLES)  # it did stop
        resumed = await execute(_job(asap, essays, run_dir, server.base_url, retries=8))
        _check_nothing_lost(stored_records(run_dir), _call_requests(server))
    assert resumed.stats.failed_calls == 0 and len(resumed.scores) == len(essays) * TRAITS


class Failing(Provider):
    """Answers ``ok`` after ``delay_s``, except a prompt containing ``fail``, which fails transiently."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.name, self.model = "failing", "m"
        self.delay_s = delay_s
        self.answered = 0

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        await asyncio.sleep(self.delay_s)
        if "fail" in request.messages[-1].content:
            raise TransientProviderError("http://x/v1 answered HTTP 503: busy")
        self.answered += 1
        return ChatResponse(text="ok")


def _call(content: str, essay_id: str = "e1") -> AgentCall:
    return AgentCall("debate/adv_r1", essay_id, "Ideas", "advocate", [Message(role="user", content=content)], 0.7, 9)


def _with_budget(ctx: CallContext, max_failures: int | None) -> CallContext:
    from madrag.agents.calls import FailureBudget

    ctx.failures = FailureBudget(max_failures)
    return ctx


async def test_a_failed_call_is_recorded_under_its_own_key_and_retried_on_resume(tmp_path: Path) -> None:
    ctx = _with_budget(make_ctx(tmp_path, Failing(), retries=2), None)
    call = _call("please fail")
    with pytest.raises(CallFailed):
        await debater(ctx, call)
    assert ctx.store.get(call.key) is None  # not done: a resume makes the call again
    (failed,) = list(ctx.store.records())
    assert failed.failed and failed.key != call.key and failed.key.startswith(call.key)
    assert failed.attempts == 3 and len(failed.retries) == 3 and failed.answers == 0
    assert failed.error is not None and "failed after 3 attempts" in failed.error
    assert ctx.stats.failed_calls == 1 and ctx.stats.made == 0
    ctx.store.close()


async def test_siblings_of_a_failed_call_finish_and_a_fatal_error_still_cancels(tmp_path: Path) -> None:
    provider = Failing(delay_s=0.05)
    ctx = _with_budget(make_ctx(tmp_path, provider), None)
    calls = [_call("fail now", "e0"), *(_call(f"fine {i}", f"e{i}") for i in range(1, 4))]
    with pytest.raises(CallFailed):
        await gather_or_cancel(*(debater(ctx, c) for c in calls))
    assert provider.answered == 3 and ctx.store.count() == 4  # three answers kept, one failed record

    async def fatal() -> None:
        raise ValueError("a bug")

    slow = asyncio.ensure_future(asyncio.sleep(5))
    with pytest.raises(ValueError):
        await gather_or_cancel(fatal(), slow)
    assert slow.cancelled()
    ctx.store.close()


async def test_the_budget_stops_new_calls_once_spent(tmp_path: Path) -> None:
    ctx = _with_budget(make_ctx(tmp_path, Failing()), 1)
    with pytest.raises(CallFailed):
        await debater(ctx, _call("fail"))
    assert ctx.failures is not None and ctx.failures.spent
    with pytest.raises(RunStopping):
        await debater(ctx, _call("fine", "e2"))
    assert ctx.store.count() == 1
    ctx.store.close()


def _madrag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "madrag.cli", *args], capture_output=True, text=True, timeout=120)


def test_cli_finishes_with_failures_exit_3_and_fail_fast_exit_2(asap: Path, tmp_path: Path) -> None:
    # a server that is up (it passes the run's check before its first call) and fails every call; an unreachable
    # one stops the run before any call (tests/e2e/cli/test_research_run.py)
    with StubServer(fault_rate=1.0, latency_s=0.0, model="m") as stub:
        _failing_run(asap, tmp_path, stub.base_url)


def _failing_run(asap: Path, tmp_path: Path, dead: str) -> None:
    base = [
        "score", "--data", str(asap / "training_set_rel3_sets7_8.tsv"), "--rubric", str(asap / "rubric_set7.json"),
        "--cache-dir", str(tmp_path / "cache"), "--protocol", "MAD", "--provider", "openai", "--model", "m",
        "--base-url", dead, "--retries", "0", "--timeout", "5", "--limit", "1",
    ]  # fmt: skip
    proc = _madrag(*base, "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 3, proc.stderr
    out = " ".join((proc.stdout + proc.stderr).split())
    assert "4 calls failed after retries; resume to retry them" in out and "Traceback" not in out
    costs = _madrag("costs", str(tmp_path / "run"))
    assert costs.returncode == 0 and "failed calls 4" in costs.stdout and "sent 4" in costs.stdout
    stop = _madrag(*base, "--run-dir", str(tmp_path / "stop"), "--fail-fast")
    assert stop.returncode == 2, stop.stderr
    errors = [line for line in stop.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--max-failures 1" in errors[0] and "Traceback" not in stop.stderr


def test_the_failure_options() -> None:
    from madrag.cli.options import failure_budget
    from madrag.errors import InputError

    assert failure_budget(None, False) is None and failure_budget(None, True) == 1 and failure_budget(5, False) == 5
    assert failure_budget(1, True) == 1
    with pytest.raises(InputError, match="--max-failures must be >= 1"):
        failure_budget(0, False)
    with pytest.raises(InputError, match="--fail-fast is --max-failures 1"):
        failure_budget(3, True)


async def test_costs_count_every_request_the_server_saw_checks_included(
    tmp_path: Path, asap: Path, essays7: list[Essay]
) -> None:
    """Under 30% HTTP 500s, over two sessions (the second resumes the failed calls), ``madrag costs`` counts
    exactly the HTTP requests the server saw: the calls' attempts and the checks before each session's first
    call (the model list, the server's props, the logprobs check), by check."""
    from typer.testing import CliRunner

    from madrag.cli.app import app

    essays, run_dir = essays7[:2], tmp_path / "run"
    with StubServer(latency_s=0.0, fault_rate=0.3, fault_status=500, fault_seed=5) as server:
        first = await execute(_job(asap, essays, run_dir, server.base_url, retries=1))
        second = await execute(_job(asap, essays, run_dir, server.base_url))
        stats = server.stats()
    assert first.stats.failed_calls > 0 and second.resumed and stats.faults > 0
    shown = CliRunner().invoke(app, ["costs", "--run-dir", str(run_dir), "--json"])
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.output)["report"]
    checks = report["check_requests"]
    # one each a session: GET /models, GET /props (the stub answers 404: still a request), the logprobs check
    assert checks["complete"] and checks["by_check"] == {"logprobs": 2, "reachable": 2, "server_props": 2}
    assert report["requests_sent"] == stats.http_requests == report["total"]["attempts"] + checks["total"]
    text = CliRunner().invoke(app, ["costs", "--run-dir", str(run_dir)]).output
    said = "requests of the checks before the first call 6 (logprobs 2, reachable 2, server_props 2)"
    assert f"{said}; requests sent in all {stats.http_requests}" in text
