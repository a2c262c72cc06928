"""How a run uses Ray: which cluster, how many workers, how essays are cut into shards.

Kept free of any Ray import, so these options (and a job whose executor is a
:class:`~madrag.distributed.driver.RayExecutor` of them) can be built and validated where Ray is not installed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

QueryEmbeddings = Literal["driver", "workers"]


class RayOptions(BaseModel):
    """A run on Ray (``madrag score --ray [ADDRESS]``).

    ``address`` None starts a local Ray instance for the run (``num_cpus`` = workers x ``cpus_per_worker``,
    an object store of ``object_store_mb``, no dashboard) and stops it afterwards; an address (``HOST:PORT``
    or ``auto``) joins an existing cluster and leaves it running. ``workers`` None means one worker per
    ``cpus_per_worker`` CPUs of the cluster (2 on a local instance).
    """

    model_config = ConfigDict(frozen=True)

    address: str | None = None
    workers: int | None = Field(default=None, ge=1)
    cpus_per_worker: float = Field(default=1.0, gt=0)
    # essays per shard; None: enough to keep a worker's backend slots busy for several rounds
    shard_essays: int | None = Field(default=None, ge=1)
    # shards each worker scores at once: a second one fills the slots the first one's last essays leave idle
    shards_per_worker: int = Field(default=2, ge=1)
    # times a shard is handed out before the run stops (a shard is redone when its worker dies)
    max_attempts: int = Field(default=4, ge=1)
    object_store_mb: int = Field(default=200, ge=75)  # local instance only
    # "workers": each worker loads the embedder and embeds its shard's essays in one batch (the default: measured
    # at ~0.15 s of CPU per ASAP essay, embedding on the driver would cap a cluster at a few essays per second
    # per driver core, see docs/scaling.md); "driver": the driver embeds each shard's essays in one batch and
    # ships the vectors with the shard (workers never load the model: small clusters, or a driver with a GPU)
    query_embeddings: QueryEmbeddings = "workers"
    # how long a lost worker may take to come back before its slot is given up
    restart_wait_s: float = Field(default=120.0, gt=0)


LOCAL = "local"
"""The value of ``--ray`` given without an address: a local Ray instance for the run."""


def ray_options(address: str | None, workers: int | None = None) -> RayOptions | None:
    """The options of ``--ray [ADDRESS]`` and ``--ray-workers N``: None without ``--ray``."""
    if address is None:
        return None
    return RayOptions(address=None if address == LOCAL else address, workers=workers)


def ray_summary(info: object) -> str:
    """How ``madrag runs list`` shows where a run was scored, from the store's meta ``ray`` (None: locally)."""
    if not isinstance(info, dict):
        return "local"
    where = "local Ray" if info.get("address") == "local" else f"Ray {info.get('address')}"
    return f"{where}: {info.get('workers')} workers, {info.get('nodes')} node(s)"
