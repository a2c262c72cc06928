"""Where a job's essays are scored, chosen by the caller: here (no executor) or on a Ray cluster.

:class:`~madrag.distributed.driver.RayExecutor` is built here, at the top, because it reads what a resumed run
already holds with :func:`madrag.evaluation.run.trait_scores` (the one reader of a run), a layer above the
distributed driver.
"""

from __future__ import annotations

from madrag.distributed.driver import RayExecutor
from madrag.distributed.options import RayOptions, ray_options
from madrag.evaluation.run import trait_scores


def ray_executor(ray: str | RayOptions | None, workers: int | None = None) -> RayExecutor | None:
    """The executor of ``--ray [ADDRESS]`` / ``ray=``: ``"local"``, ``"HOST:PORT"``, ``"auto"`` or
    :class:`RayOptions` (``workers``: ``--ray-workers``); None (score in this process) without one."""
    options = ray if isinstance(ray, RayOptions) else ray_options(ray, workers)
    return None if options is None else RayExecutor(options, trait_scores)
