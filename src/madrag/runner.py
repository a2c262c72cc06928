"""Orchestration: essays with bounded concurrency, each essay's traits in parallel (inside a protocol).

Throughput. A trait's debate is a chain of sequential calls (Advocate -> Skeptic -> Judge), so the backend's
slots are only kept busy when at least as many chains are in flight as the backend has slots. With
``essay_concurrency=None`` (the default) the runner derives the number of essays in flight from the
provider's concurrency and the chains one essay runs at once (its traits, for per-trait protocols): enough
chains to fill every slot twice over, so a slot freed by one chain is taken at once by a request already
waiting (see :func:`auto_essay_concurrency`). A backend with one slot (the embedded llama.cpp model) gets
one essay at a time.

Shared debates. MAD and MADRAG (and any protocols using the same transcript variant) share one debate per
essay-trait through the run store. Run concurrently, both would miss the store and each pay for (and read)
its own debate. So an essay's protocols run in stages: first one protocol per debate variant, together with
the protocols that hold no debate; then the rest, which find the debate already stored.

A backend failure that survives the retries stops the run cleanly: pending work is cancelled, every record
already written stays, and running the same command again resumes.
"""

from __future__ import annotations

import asyncio
import gc
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from madrag.agents.calls import CallContext
from madrag.data.essay import Essay
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.rubric import Rubric

EssayDone = Callable[[Essay, list[TraitScore]], None]

OVERCOMMIT = 2
"""Chains in flight per backend slot under the automatic essay concurrency."""

GC_GEN0_THRESHOLD = 20_000
"""Allocations between young-generation collections during a run (Python's default is 700)."""


class _GcTuning:
    """Process-wide GC settings for the duration of the outermost running :func:`run_scoring`."""

    depth = 0
    saved: tuple[int, int, int] = (700, 10, 10)
    froze = False


@contextmanager
def tuned_gc() -> Iterator[None]:
    """Cheaper garbage collection while scoring, restored afterwards.

    Every call parses a response into hundreds of short-lived objects (one per token and alternative), so
    with Python's defaults the cyclic collector runs every few hundred allocations and, now and then,
    walks every object the process holds (libraries, data, exemplar bank): measured here, about 40% of the
    client's CPU per call and event-loop stalls of hundreds of milliseconds. During a run the objects that
    already exist are frozen out of collections (``gc.freeze``, unless the process froze some itself) and the
    young-generation threshold is raised to ``GC_GEN0_THRESHOLD``. Reference counting still frees almost
    everything at once; only cyclic garbage waits a little longer. Nested or concurrent runs share one
    setting, undone when the last one ends.
    """
    state = _GcTuning
    if state.depth == 0:
        state.saved = gc.get_threshold()
        state.froze = gc.get_freeze_count() == 0
        if state.froze:
            gc.freeze()
        gc.set_threshold(max(GC_GEN0_THRESHOLD, state.saved[0]), state.saved[1], state.saved[2])
    state.depth += 1
    try:
        yield
    finally:
        state.depth -= 1
        if state.depth == 0:
            gc.set_threshold(*state.saved)
            if state.froze:
                gc.unfreeze()


def provider_slots(ctx: CallContext) -> int:
    """Parallel requests the managed provider allows (its own limit, else the backend's)."""
    return max(1, ctx.provider.concurrency or ctx.provider.provider.max_concurrency)


def auto_essay_concurrency(slots: int, width: int) -> int:
    """Essays in flight so that ``OVERCOMMIT`` x ``slots`` call chains run: ceil(2 * slots / width), where
    ``width`` is the number of chains one essay keeps going (:func:`essay_width`: its traits, for per-trait
    protocols).

    One slot and four traits give one essay (the embedded model); 32 slots and four traits give 16 essays.
    """
    return max(1, math.ceil(OVERCOMMIT * max(1, slots) / max(1, width)))


def essay_width(protocols: Sequence[ScoringProtocol], n_traits: int) -> int:
    """Concurrent call chains of one essay in its narrowest stage (see :func:`protocol_stages`).

    A protocol whose ``describe()`` says ``per_trait: False`` (one call for all traits, e.g. SA) counts as
    one chain; any other counts as one per trait. The narrowest stage is used so that every stage fills the
    backend's slots.
    """
    widths = [
        sum(n_traits if protocols[i].describe().get("per_trait", True) else 1 for i in stage)
        for stage in protocol_stages(protocols)
    ]
    return max(1, min(widths, default=1))


def protocol_stages(protocols: Sequence[ScoringProtocol]) -> list[list[int]]:
    """Positions of ``protocols`` grouped so that no two in one stage share a debate.

    A protocol's debate is its ``debate`` attribute (e.g. ``"adv_r1"``; None or absent: no debate). Stage 1
    holds the first protocol of each debate variant and every protocol without a debate; later stages hold
    the protocols that reuse a debate made in an earlier stage.
    """
    stages: list[list[int]] = []
    seen: dict[object, int] = {}
    for position, proto in enumerate(protocols):
        variant = getattr(proto, "debate", None)
        level = 0
        if variant is not None:
            level = seen.get(variant, -1) + 1
            seen[variant] = level
        while len(stages) <= level:
            stages.append([])
        stages[level].append(position)
    return stages


async def score_essay(
    ctx: CallContext, essay: Essay, rubric: Rubric, protocols: Sequence[ScoringProtocol]
) -> list[TraitScore]:
    """Every protocol on one essay, in stages (see :func:`protocol_stages`); scores in the protocols' order."""
    per_protocol: dict[int, list[TraitScore]] = {}
    for stage in protocol_stages(protocols):
        results = await asyncio.gather(*(protocols[i].score_essay(ctx, essay, rubric) for i in stage))
        per_protocol.update(zip(stage, results, strict=True))
    return [score for i in range(len(protocols)) for score in per_protocol[i]]


async def run_scoring(
    ctx: CallContext,
    essays: Sequence[Essay],
    rubric: Rubric,
    protocols: Sequence[ScoringProtocol],
    essay_concurrency: int | None = None,
    on_essay_done: EssayDone | None = None,
) -> list[TraitScore]:
    """Score ``essays``; results come back in the essays' order.

    ``essay_concurrency`` is the number of essays in flight; None derives it from the provider's concurrency
    and the chains one essay runs at once (:func:`auto_essay_concurrency`, :func:`essay_width`).
    ``on_essay_done`` is called as each essay finishes (in completion order).
    """
    if essay_concurrency is None:
        width = essay_width(protocols, len(rubric.traits))
        essay_concurrency = auto_essay_concurrency(provider_slots(ctx), width)
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

    with tuned_gc():
        workers = [asyncio.create_task(worker()) for _ in range(min(essay_concurrency, len(essays)) or 1)]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
    return [score for i in range(len(essays)) for score in results[i]]
