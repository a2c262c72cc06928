"""Failed calls on Ray workers, without a cluster: a worker writes failed records and goes on with its shard, the
driver counts them into the run's statistics and keeps ``--max-failures`` for the whole cluster."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import make_ctx
from tests.unit.distributed.test_ray_unit import (
    ESSAYS,
    PROTOCOLS,
    RUBRIC,
    LocalActor,
    Method,
    collect,
    dispatcher,
    worker,
)

from madrag.agents.calls import FailureBudget
from madrag.distributed.shard import Shard, make_shards, plan_run
from madrag.errors import TransientProviderError
from madrag.protocols import get_protocol
from madrag.providers.base import ChatRequest
from madrag.providers.fake import FakeProvider, FakeReply, default_script
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.records import AgentRecord
from madrag.settings import ScoringSettings

PER_ESSAY = 3 * len(RUBRIC.traits) + 1  # MAD: advocate, skeptic, judge per trait; SA: one call


def busy_on_style_skeptic(request: ChatRequest) -> FakeReply:
    """The fake's answers, except that every Skeptic call on Style gets HTTP 503 (a transient failure)."""
    if request.role == "skeptic" and request.trait == "Style":
        return FakeReply(text="", error=TransientProviderError("http://x/v1 answered HTTP 503: busy"))
    return default_script(request)


def failing_backend() -> ManagedProvider:
    return ManagedProvider(FakeProvider(script=busy_on_style_skeptic), RetryPolicy(retries=1, base_delay_s=0.0))


def failing_actor() -> LocalActor:
    actor = LocalActor()
    actor.worker._backends = (failing_backend(), {})
    actor.halt = Method(actor.worker.halt)  # type: ignore[attr-defined]
    return actor


async def test_a_worker_records_failed_calls_and_goes_on_with_its_shard() -> None:
    shard_worker = worker()
    shard_worker._backends = (failing_backend(), {})
    todo = {e.id: {p: RUBRIC.trait_names for p in PROTOCOLS} for e in ESSAYS[:2]}
    events = await collect(shard_worker.score(Shard(index=0, essays=ESSAYS[:2], todo=todo)))
    records = [AgentRecord.model_validate_json(p[0][-1]) for k, p in events if k == "record"]
    failed = [r for r in records if r.failed]
    assert sorted((r.essay_id, r.role, r.trait) for r in failed) == [
        ("e0", "skeptic", "Style"),
        ("e1", "skeptic", "Style"),
    ]
    assert all("|failed|" in r.key and r.attempts == 2 and r.error for r in failed)
    stats = events[-1][1]
    assert events[-1][0] == "done" and stats["failed_calls"] == 2 and stats["stopped"] is False
    assert stats["made"] == len(records) - 2 == 2 * (PER_ESSAY - 2)  # Style: no skeptic answer, no judge
    scores = dict(p for k, p in events if k == "essay")
    assert {(s.protocol, s.trait) for s in scores["e0"]} == {("MAD", "Ideas"), ("MAD", "Organization")} | {
        ("SA", t) for t in RUBRIC.trait_names
    }


async def test_the_driver_counts_failed_calls_and_a_resume_plan_retries_them(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, FakeProvider())
    ctx.failures = FailureBudget(None)
    job = dispatcher(ctx, [failing_actor(), failing_actor()], done := list[str]())
    shards = make_shards(ESSAYS, job.plan, 2)
    progress = await job.run(shards)
    assert progress.shards_done == len(shards) and sorted(done) == sorted(e.id for e in ESSAYS)
    assert ctx.stats.failed_calls == progress.failed_calls == len(ESSAYS)
    assert ctx.stats.made == (PER_ESSAY - 2) * len(ESSAYS)  # failed records are not made calls
    assert sum(r.failed for r in ctx.store.records()) == len(ESSAYS)  # type: ignore[attr-defined]
    plan = plan_run(ctx.store, ESSAYS, RUBRIC, [get_protocol(p) for p in PROTOCOLS], ScoringSettings())  # type: ignore[arg-type]
    assert plan.todo == {e.id: {"MAD": ["Style"]} for e in ESSAYS}  # a resume hands out just the failed traits
    ctx.store.close()  # type: ignore[attr-defined]


async def test_max_failures_is_cluster_wide_and_stops_handing_out_shards(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, FakeProvider())
    ctx.failures = FailureBudget(1)
    actor = failing_actor()
    job = dispatcher(ctx, [actor], done := list[str]())
    job.shards_per_worker = 1
    shards = make_shards(ESSAYS, job.plan, 1)
    progress = await job.run(shards)  # returns; the driver raises TooManyFailures from it
    assert ctx.failures.spent and progress.shards_done < len(shards)
    assert len(actor.shards) < len(shards) and len(done) < len(ESSAYS)  # shards left were never handed out
    assert ctx.stats.failed_calls == progress.failed_calls >= 1
    stored = list(ctx.store.records())  # type: ignore[attr-defined]
    assert sum(r.failed for r in stored) == ctx.stats.failed_calls and len(stored) < PER_ESSAY * len(ESSAYS)
    ctx.store.close()  # type: ignore[attr-defined]
