"""Runs made by earlier commits, brought to today's format in one place: every other module knows only the current
format.

* :mod:`~madrag.pipeline.migrations.store`: a run store an earlier madrag wrote, its schema brought to the current
  version (on disk, kept beside itself first, for a writer; in memory for a reader), and :func:`open_store`, how
  every command opens a run's store;
* :mod:`~madrag.pipeline.migrations.scores`: the final-score rows of a run made before they were kept, derived
  once from its records;
* :mod:`~madrag.pipeline.migrations.config`: a run's stored configuration and recorded backend identity in an
  older shape, upgraded before they are compared, the embedder a run recorded, a backend's retired options and
  the web app's ``run.json`` of an older run and ``draft.json`` of an older draft;
* :mod:`~madrag.pipeline.migrations.chroma`: the Chroma store an older madrag kept its exemplar banks in, found in
  a cache folder and deleted on request (never read).
"""

from madrag.pipeline.migrations.config import (
    CONFIG_VERSION,
    identity,
    recorded_spec,
    stored_embedder,
    upgrade,
    upgrade_draft,
    upgrade_identity,
    upgrade_run_description,
)
from madrag.pipeline.migrations.scores import derive_scores, scores_pending, upgrade_scores
from madrag.pipeline.migrations.store import STORE_MIGRATIONS, migrate, open_store, read_view

__all__ = [
    "CONFIG_VERSION",
    "STORE_MIGRATIONS",
    "derive_scores",
    "identity",
    "migrate",
    "open_store",
    "read_view",
    "recorded_spec",
    "scores_pending",
    "stored_embedder",
    "upgrade",
    "upgrade_draft",
    "upgrade_identity",
    "upgrade_run_description",
    "upgrade_scores",
]
