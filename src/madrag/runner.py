"""Orchestration: essays with bounded concurrency, each essay's traits in parallel (inside a protocol).

A backend failure that survives the retries stops the run cleanly: pending work is cancelled, every record
already written stays, and running the same command again resumes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from madrag.agents.calls import CallContext
from madrag.data.essay import Essay
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.rubric import Rubric

EssayDone = Callable[[Essay, list[TraitScore]], None]


async def score_essay(
    ctx: CallContext, essay: Essay, rubric: Rubric, protocols: Sequence[ScoringProtocol]
) -> list[TraitScore]:
    """Every protocol on one essay; protocols run concurrently (shared debates are reused from the store)."""
    results = await asyncio.gather(*(p.score_essay(ctx, essay, rubric) for p in protocols))
    return [score for per_protocol in results for score in per_protocol]


async def run_scoring(
    ctx: CallContext,
    essays: Sequence[Essay],
    rubric: Rubric,
    protocols: Sequence[ScoringProtocol],
    essay_concurrency: int = 4,
    on_essay_done: EssayDone | None = None,
) -> list[TraitScore]:
    """Score ``essays``; results come back in the essays' order."""
    if essay_concurrency < 1:
        raise ValueError("essay_concurrency must be >= 1")
    queue: asyncio.Queue[tuple[int, Essay]] = asyncio.Queue()
    for item in enumerate(essays):
        queue.put_nowait(item)
    results: dict[int, list[TraitScore]] = {}

    async def worker() -> None:
        while True:
            try:
                index, essay = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            scores = await score_essay(ctx, essay, rubric, protocols)
            results[index] = scores
            if on_essay_done is not None:
                on_essay_done(essay, scores)

    workers = [asyncio.create_task(worker()) for _ in range(min(essay_concurrency, len(essays)) or 1)]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise
    return [score for i in range(len(essays)) for score in results[i]]
