"""Structured concurrency for a run's calls: when one of several concurrent calls fails, the others stop - unless
the failure is one the run goes on after (a call recorded as failed, or not started because the run is stopping),
in which case the others finish first, so no answer on its way is thrown away."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar, cast

from madrag.errors import CallFailed, RunStopping

T = TypeVar("T")

RECORDED = (CallFailed, RunStopping)
"""Failures that leave nothing to clean up: the call is recorded as failed (or was never started)."""


async def _settle(aws: tuple[Awaitable[T], ...]) -> tuple[list[T | None], BaseException | None]:
    """Run ``aws`` concurrently: (their results, None in place of a :data:`RECORDED` failure; the first such
    failure). Any other failure, or a cancellation, cancels the rest, waits for them and propagates."""
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    recorded: BaseException | None = None
    try:
        pending: set[asyncio.Future[T]] = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if task.cancelled():
                    raise asyncio.CancelledError
                exc = task.exception()
                if isinstance(exc, RECORDED):
                    recorded = recorded or exc
                elif exc is not None:
                    raise exc
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return [None if task.exception() is not None else task.result() for task in tasks], recorded


async def gather_or_cancel(*aws: Awaitable[T]) -> list[T]:
    """Like ``asyncio.gather``, but a failure (or cancellation) cancels the siblings and waits for them before
    the original exception propagates, so no orphaned call keeps running - or writing records - after a run
    has stopped. (``asyncio.TaskGroup`` would do this too, but wraps the error in an ``ExceptionGroup``.)

    A :data:`RECORDED` failure cancels nothing: the siblings run to the end (their records are kept), then the
    first such failure propagates - unless a sibling fails otherwise meanwhile, whose error then cancels the
    rest and propagates instead."""
    results, recorded = await _settle(aws)
    if recorded is not None:
        raise recorded
    return cast(list[T], results)  # no failure: every result is the awaitable's own


async def gather_settled(*aws: Awaitable[T]) -> list[T | None]:
    """:func:`gather_or_cancel` that goes on after :data:`RECORDED` failures: None in their places (the traits
    of a protocol whose other traits are still to be scored)."""
    results, _ = await _settle(aws)
    return results
