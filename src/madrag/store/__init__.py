"""The run store: a run's SQLite file and everything that reads or writes it whole.

* :mod:`~madrag.store.run_store`: :class:`RunStore`, one row per agent call and one per final score;
* :mod:`~madrag.store.writer`: the rows a record and a score are stored as, and the writer thread that commits them;
* :mod:`~madrag.store.schema`: the current tables and the version a store carries;
* :mod:`~madrag.store.run_config`: a run's stored configuration (its identity) and how two of them differ;
* :mod:`~madrag.store.writer_lock`: the one writer of a run directory (or a server's data directory).

Older formats (a store, a configuration or a record made by an earlier madrag) are read and upgraded by
:mod:`madrag.pipeline.migrations`, the one home of every older format.
"""

from madrag.store.run_store import RunStore, write_scores_csv

__all__ = ["RunStore", "write_scores_csv"]
