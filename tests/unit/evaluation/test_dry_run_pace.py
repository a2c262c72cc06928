"""A dry run's time on a CPU-bound server whose slots are fewer than the concurrency (issue 48): the stub's
4 slots share one compute, as a CPU-bound llama.cpp server's do, and the run is given --concurrency 8. The
sample's pace, scaled to the planned calls, comes near the planned run's own span; dividing by the
concurrency (or by the slots, as if a fuller server answered faster) would be several times short."""

from __future__ import annotations

from pathlib import Path

import pytest

from madrag.data.essay import Essay
from madrag.evaluation.costs.estimate import Pace, estimate_run
from madrag.evaluation.costs.render import render_text
from madrag.evaluation.costs.tally import cost_report
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers import ProviderSpec
from madrag.store import RunStore
from madrag.testing.stub_server import StubServer


def _job(asap: Path, essays: list[Essay], run_dir: Path, base_url: str) -> ScoreJob:
    return ScoreJob(
        essays=essays,
        rubric=asap / "rubric_set7.json",
        run_dir=run_dir,
        eval_fold=None,
        protocols=["MAD"],
        provider=ProviderSpec(kind="openai", model="m", base_url=base_url, timeout_s=60, concurrency=8),
        cache_dir=run_dir.parent / "cache",
        response_cache=False,
    )


async def test_the_dry_runs_time_on_a_cpu_bound_server_is_its_pace_not_divided_by_the_concurrency(
    tmp_path: Path, asap: Path, essays7: list[Essay]
) -> None:
    latency = 0.03
    with StubServer(capacity=4, latency_s=latency, props=True, n_ctx=100_000, cpu_bound=True) as server:
        await execute(_job(asap, essays7[:2], tmp_path / "sample", server.base_url))
        await execute(_job(asap, essays7[:8], tmp_path / "full", server.base_url))
    sample = RunStore(tmp_path / "sample" / "store.sqlite", read_only=True)
    full = RunStore(tmp_path / "full" / "store.sqlite", read_only=True)
    try:
        est = estimate_run(sample, 8, 4)
        span = Pace.of(cost_report(full).calls)
    finally:
        sample.close()
        full.close()
    assert est.seconds is not None and span is not None and est.pace is not None
    assert est.total.calls == pytest.approx(span.calls)
    # the server answers one call per latency however many wait: the planned run cannot beat calls x latency
    assert span.seconds >= span.calls * latency * 0.95
    assert 0.6 * span.seconds <= est.seconds <= 1.6 * span.seconds
    # what the estimate read of the sample's server; a model where the slots answer at once (one answer's time
    # divided by the slots) would say a quarter of the run's time
    assert (est.served.slots, est.served.concurrency, est.served.at_once) == (4, 8, 4)
    assert est.pace.in_flight is not None and est.pace.in_flight > 1
    assert est.total.calls * latency / 4 < 0.3 * span.seconds
    assert "the server working on 4 at once of its 4 slots" in render_text(est)
