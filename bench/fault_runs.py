"""Runs against a server that fails a share of its requests: do they finish, is anything lost, do costs add up?

Each run scores ``--essays`` ASAP set-7 essays x 4 traits with MAD (3 calls per essay-trait: 360 calls for 30
essays) on the stub server (``madrag.testing.stub_server``) answering ``--fault-rate`` of the requests with an HTTP
503, with the default retries (4; the back-off is skipped, which changes no outcome, only the time). Per seed it
prints whether the run finished, its failed calls, whether every request the server saw is on a record (nothing
lost), and what a resume left failed. Run: ``.venv/bin/python bench/fault_runs.py [--seeds 12] [--essays 30]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from madrag.data import Essay, load_asap
from madrag.pipeline.job import ScoreJob, execute
from madrag.providers.policy import RetryPolicy
from madrag.providers.spec import ProviderSpec
from madrag.rubric import load_rubric
from madrag.store import RunStore
from madrag.testing.stub_server import StubServer


def _job(asap: Path, essays: list[Essay], run_dir: Path, url: str) -> ScoreJob:
    spec = ProviderSpec(kind="openai", model="stub-model", base_url=url, timeout_s=30, concurrency=16)
    return ScoreJob(
        essays=essays,
        rubric=asap / "rubric_set7.json",
        run_dir=run_dir,
        eval_fold=None,
        protocols=["MAD"],
        provider=spec,
        response_cache=False,
    )


def _accounted(run_dir: Path) -> int:
    """Requests sent, summed over the run's records."""
    store = RunStore(run_dir / "store.sqlite")
    try:
        return sum(r.attempts or 0 for r in store.records())
    finally:
        store.close()


async def one(asap: Path, essays: list[Essay], seed: int, fault_rate: float, root: Path) -> str:
    run_dir = root / f"seed{seed}"
    with StubServer(latency_s=0.0, capacity=16, fault_rate=fault_rate, fault_seed=seed) as server:
        job = _job(asap, essays, run_dir, server.base_url)
        try:
            result = await execute(job)
        except Exception as exc:  # a stopped run is an outcome here
            return f"seed {seed:3d}: STOPPED ({type(exc).__name__}); server requests {server.stats().requests}"
        failed = result.stats.failed_calls
        sent = server.stats().requests
        line = f"seed {seed:3d}: finished, {failed} failed calls; requests {sent}, on records {_accounted(run_dir)}"
        if failed:
            again = await execute(job)
            line += f"; resume: {again.stats.made} calls made, {again.stats.failed_calls} failed"
        return line


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--essays", type=int, default=30)
    parser.add_argument("--fault-rate", type=float, default=0.3)
    parser.add_argument("--asap", type=Path, default=Path("../shared/data/asap"))
    args = parser.parse_args()
    RetryPolicy.delay = lambda self, attempt: 0.0  # type: ignore[method-assign]
    rubric = load_rubric(args.asap / "rubric_set7.json")
    essays = load_asap(args.asap / "training_set_rel3_sets7_8.tsv", rubric)[: args.essays]
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            print(await one(args.asap, essays, seed, args.fault_rate, Path(tmp)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
