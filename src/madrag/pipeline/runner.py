"""Orchestration: essays with bounded concurrency, each essay's traits in parallel (inside a protocol).

Throughput. A trait's debate is a chain of sequential calls (Advocate -> Skeptic -> Judge), so the backend's
slots are only kept busy when at least as many chains are in flight as the backend has slots. With
``essay_concurrency=None`` (the default) the runner derives the number of essays in flight from the
provider's concurrency and the chains one essay runs at once (each protocol's ``chains``: its traits, for
per-trait protocols, a debate shared by several protocols once): enough
chains to fill every slot twice over, so a slot freed by one chain is taken at once by a request already
waiting (see :func:`auto_essay_concurrency`). A backend with one slot (the embedded llama.cpp model) gets
one essay at a time.

Shared debates. MAD and MADRAG (and any protocols using the same transcript variant) share one debate per
essay-trait: the store returns a finished debate call, and a call still in flight is awaited rather than
made twice (``agents.calls.once``). So all of an essay's protocols run concurrently.

Failures. A call that uses up its retries is recorded as failed (:func:`madrag.agents.calls.once`, in a context
with a failure budget): its essay-trait (for a protocol that scores every trait in one call, its essay) is left
without a score, the rest of the run goes on, and running the same command again retries it (a per-trait
protocol still scores its other traits: :func:`madrag.protocols.concurrency.gather_settled`). When the budget is
spent (``--max-failures``), no new call starts, the calls in flight finish and are kept, and
:class:`~madrag.errors.TooManyFailures` is raised. Any other backend failure stops the run cleanly: pending work
is cancelled, every record already written stays, and running the same command again resumes.
"""

from __future__ import annotations

import asyncio
import gc
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from madrag.agents.calls import CallContext, FailureBudget
from madrag.data.essay import Essay
from madrag.errors import TooManyFailures
from madrag.pipeline.final_scores import keeper
from madrag.protocols.base import ScoringProtocol, TraitScore, essay_width
from madrag.protocols.concurrency import RECORDED, gather_or_cancel
from madrag.rubric import Rubric

EssayDone = Callable[[Essay, list[TraitScore]], None]
"""Called with each essay and its scores as the essay finishes."""

RubricFor = Callable[[Essay, ScoringProtocol], Rubric | None]
"""Which traits of an essay a protocol is to score: a rubric holding just those traits, or None to skip the
protocol on that essay (a resumed shard of a distributed run hands out only the essay-traits not finished)."""

OVERCOMMIT = 2
"""Chains in flight per backend slot under the automatic essay concurrency."""

GC_GEN0_THRESHOLD = 20_000
"""Allocations between young-generation collections during a run (Python's default is 700)."""

GC_GEN1_THRESHOLD = 100
"""Young-generation collections between middle-generation ones during a run (Python's default is 10).

Each middle-generation collection walks every object that survived a young collection - during a run, the
in-flight calls' parsed responses and records (hundreds of objects per call) - and measured 25-50 ms apiece
in ``bench/orchestration.py``, stalling the event loop while backend slots waited for their next request;
at 100 there are a tenth as many (0.6 s -> 0.07 s of the client's CPU over 2,400 calls, 92 % -> 94 % of the
ideal throughput). Objects are still freed by reference counting as soon as they are unreachable."""


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
    young- and middle-generation thresholds are raised to ``GC_GEN0_THRESHOLD`` and ``GC_GEN1_THRESHOLD``.
    Reference counting still frees almost everything at once; only cyclic garbage waits a little longer.
    Nested or concurrent runs share one setting, undone when the last one ends.
    """
    state = _GcTuning
    if state.depth == 0:
        state.saved = gc.get_threshold()
        state.froze = gc.get_freeze_count() == 0
        if state.froze:
            gc.freeze()
        gc.set_threshold(max(GC_GEN0_THRESHOLD, state.saved[0]), max(GC_GEN1_THRESHOLD, state.saved[1]), state.saved[2])
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
    return max(1, ctx.provider.max_concurrency)


def auto_essay_concurrency(slots: int, width: int) -> int:
    """Essays in flight so that ``OVERCOMMIT`` x ``slots`` call chains run: ceil(2 * slots / width), where
    ``width`` is the number of chains one essay keeps going (:func:`~madrag.protocols.base.essay_width`: its
    traits, for per-trait protocols).

    One slot and four traits give one essay (the embedded model); 32 slots and four traits give 16 essays.
    """
    return max(1, math.ceil(OVERCOMMIT * max(1, slots) / max(1, width)))


async def _score_unit(ctx: CallContext, essay: Essay, protocol: ScoringProtocol, rubric: Rubric) -> list[TraitScore]:
    """The protocol's scores of ``rubric``'s traits on ``essay``; none when a call of it failed after its retries
    (recorded as failed) or was not started because the run is stopping (a per-trait protocol leaves out only
    the traits concerned itself: :func:`madrag.protocols.concurrency.gather_settled`)."""
    try:
        return await protocol.score_essay(ctx, essay, rubric)
    except RECORDED:
        return []


async def score_essay(
    ctx: CallContext,
    essay: Essay,
    rubric: Rubric,
    protocols: Sequence[ScoringProtocol],
    rubric_for: RubricFor | None = None,
) -> list[TraitScore]:
    """Every protocol on one essay, concurrently; scores in the protocols' order. ``rubric_for`` narrows the
    traits each protocol scores (default: all of ``rubric``). Scores with a failed call are left out (see the
    module docstring)."""
    chosen = [(p, rubric if rubric_for is None else rubric_for(essay, p)) for p in protocols]
    results = await gather_or_cancel(*(_score_unit(ctx, essay, p, r) for p, r in chosen if r is not None))
    return [score for per_protocol in results for score in per_protocol]


def stopped_error(budget: FailureBudget) -> TooManyFailures:
    """The error of a run stopped by its failure budget."""
    n = len(budget.failed)
    return TooManyFailures(
        f"stopped after {n} call{'s' if n != 1 else ''} failed after retries (--max-failures {budget.max_failures}); "
        f"last: {budget.last_error}. Every answer received is saved: run the same command again to resume "
        "(the failed calls are retried)"
    )


async def run_scoring(
    ctx: CallContext,
    essays: Sequence[Essay],
    rubric: Rubric,
    protocols: Sequence[ScoringProtocol],
    essay_concurrency: int | None = None,
    on_essay_done: EssayDone | None = None,
    rubric_for: RubricFor | None = None,
) -> list[TraitScore]:
    """Score ``essays``; results come back in the essays' order.

    ``essay_concurrency`` is the number of essays in flight; None derives it from the provider's concurrency
    and the chains one essay runs at once (:func:`auto_essay_concurrency`, :func:`~madrag.protocols.base.essay_width`).
    ``on_essay_done`` is called as each essay finishes (in completion order). ``rubric_for`` limits the
    traits scored per essay and protocol (see :data:`RubricFor`). Each essay's final scores are kept in the
    context's store as the essay finishes, before ``on_essay_done`` hears of it (the run's score rows:
    :func:`madrag.pipeline.final_scores.keeper`).
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
    keep_scores = keeper(ctx.store, protocols)

    async def worker() -> None:
        while ctx.failures is None or not ctx.failures.spent:
            try:
                index, essay = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            scores = await score_essay(ctx, essay, rubric, protocols, rubric_for)
            results[index] = scores
            await keep_scores(scores)
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
    if ctx.failures is not None and ctx.failures.spent:
        raise stopped_error(ctx.failures)
    return [score for i in range(len(essays)) for score in results[i]]
