"""Joining (or starting) the Ray cluster a run uses, and what the run records about it."""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import Any

from madrag.distributed.options import RayOptions
from madrag.errors import ConfigError

log = logging.getLogger(__name__)


def import_ray() -> Any:
    """The ``ray`` module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ConfigError("--ray needs Ray: pip install 'madrag[ray]'") from exc
    return ray


@dataclass
class Cluster:
    """A connection to Ray for one run; ``started`` when the run started a local instance, ``owned`` when the
    run connected (and so disconnects: not when this process had already joined Ray itself)."""

    address: str
    started: bool
    nodes: int
    cpus: float
    ray_version: str
    owned: bool = True

    def workers(self, options: RayOptions) -> int:
        """The number of workers: as asked, else one per ``cpus_per_worker`` CPUs of the cluster."""
        if options.workers is not None:
            return options.workers
        return max(1, int(self.cpus // options.cpus_per_worker))

    def describe(self, options: RayOptions, workers: int) -> dict[str, Any]:
        """What the run store records (meta ``ray``): the cluster, its size and the worker layout."""
        return {
            "address": self.address if not self.started else "local",
            "nodes": self.nodes,
            "cpus": self.cpus,
            "workers": workers,
            "cpus_per_worker": options.cpus_per_worker,
            "ray_version": self.ray_version,
        }


def connect(options: RayOptions, local_workers: int) -> Cluster:
    """Join the cluster at ``options.address``, or start a local instance sized for ``local_workers``.

    A local instance gets exactly the CPUs its workers need, a small object store and no dashboard; its
    processes all run on this machine. Its workers inherit this process's environment (``PYTHONPATH``, API
    keys); on an existing cluster they have their own nodes' environment.
    """
    ray = import_ray()
    owned, started = not ray.is_initialized(), False
    if not owned:  # this process joined Ray itself (e.g. a notebook): use that cluster, leave it joined
        log.info("using the Ray cluster this process has already joined")
    elif options.address is None:
        start_local(ray, max(1, math.ceil(local_workers * options.cpus_per_worker)), options.object_store_mb)
        started = True
    else:
        ray.init(address=options.address, logging_level="warning", log_to_driver=True)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = float(ray.cluster_resources().get("CPU", 0.0))
    address = str(ray.get_runtime_context().gcs_address)
    return Cluster(address, started, len(nodes), cpus, ray.__version__, owned=owned)


LOCAL_START_ATTEMPTS = 3
"""Tries to start a local instance: Ray gives its node 30 s to register, which a busy machine can miss."""


def start_local(ray: Any, cpus: int, object_store_mb: int) -> None:
    """Start a local Ray instance (no dashboard, a small object store), trying again when its node was too
    slow to come up."""
    for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
        try:
            ray.init(
                num_cpus=cpus,
                object_store_memory=object_store_mb * 1024 * 1024,
                include_dashboard=False,
                logging_level="warning",
                log_to_driver=True,
            )
            return
        except Exception as exc:
            ray.shutdown()
            if attempt == LOCAL_START_ATTEMPTS or "timed out during startup" not in str(exc):
                raise
            log.warning("the local Ray instance was slow to start (%s); trying again", exc)


def disconnect(cluster: Cluster | None) -> None:
    """Leave the cluster the run joined (a local instance started for the run stops with it); a cluster this
    process had joined before the run is left joined."""
    ray = import_ray()
    if ray.is_initialized() and (cluster is None or cluster.owned):
        ray.shutdown()


def quiet_ray_env() -> None:
    """No usage-statistics prompt or upload from a run (set before Ray starts)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
