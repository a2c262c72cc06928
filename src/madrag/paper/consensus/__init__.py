"""The consensus paper's evaluation ("Beyond consensus: downward bias and role asymmetry in multi-agent LLM judges")
of a run of its judge protocols, ``madrag paper eval-consensus``:

* :mod:`~madrag.paper.consensus.frames`: protocol names in the paper's order, the human references, the agents'
  scores per round and the protocols' per-round predictions, read from a run (``load_consensus_run``);
* :mod:`~madrag.paper.consensus.metrics`: RMSE / Spearman, the mean shift (the downward bias), round
  trajectories, the dominance of the strict role (role asymmetry) and paired bootstrap comparisons;
* :mod:`~madrag.paper.consensus.tables`: one run's tables, consensus.md and figures;
* :mod:`~madrag.paper.consensus.multi` and :mod:`~madrag.paper.consensus.multi_tables`: several runs (judge
  models) averaged, the cross-model grid of strict and lenient models, and their tables.

The consensus protocols themselves are the core's (:mod:`madrag.protocols.consensus`), and so is reading their
final scores (``madrag eval``, :meth:`madrag.store.RunStore.scores`).
"""
