"""Where a job's essays are scored, chosen by the caller: here (no executor) or on a Ray cluster
(:class:`~madrag.distributed.driver.RayExecutor`)."""

from __future__ import annotations

from madrag.distributed.driver import RayExecutor
from madrag.distributed.options import RayOptions, ray_options


def ray_executor(ray: str | RayOptions | None, workers: int | None = None) -> RayExecutor | None:
    """The executor of ``--ray [ADDRESS]`` / ``ray=``: ``"local"``, ``"HOST:PORT"``, ``"auto"`` or
    :class:`RayOptions` (``workers``: ``--ray-workers``); None (score in this process) without one."""
    options = ray if isinstance(ray, RayOptions) else ray_options(ray, workers)
    return None if options is None else RayExecutor(options)
