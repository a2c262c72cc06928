"""Structured concurrency for the pipeline: when one of several concurrent calls fails, the others stop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def gather_or_cancel(*aws: Awaitable[T]) -> list[T]:
    """Like ``asyncio.gather``, but a failure (or cancellation) cancels the siblings and waits for them before
    the original exception propagates, so no orphaned call keeps running - or writing records - after a run
    has stopped. (``asyncio.TaskGroup`` would do this too, but wraps the error in an ``ExceptionGroup``.)"""
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
