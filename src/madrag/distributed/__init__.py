"""Scoring across a Ray cluster (``madrag score --ray [ADDRESS]``, the ``ray`` extra).

Shards of essays are scored on Ray workers by the same async runner, protocols and agent calls as a local run;
records stream back to the driver, the run store's one writer; the exemplar bank is built once on the driver
and shipped through Ray's object store; a lost worker's shard is redone and a rerun resumes. See
``docs/scaling.md``. :mod:`madrag.distributed.options` imports nothing from Ray; the rest needs it.
"""

from madrag.distributed.options import RayOptions

__all__ = ["RayOptions"]
