"""Reading a finished run and measuring it, one module per concept:

* :mod:`~madrag.evaluation.run`: the one reader of a run (store, stored configuration, final trait scores,
  the consensus paper's agent scores);
* :mod:`~madrag.evaluation.agreement`: the MADRAG paper's QWK tables, Human-Human rows, extreme subset, comparisons;
* :mod:`~madrag.evaluation.consensus_frames` and :mod:`~madrag.evaluation.consensus`: the consensus paper's inputs
  (references, per-round predictions) and metrics;
* :mod:`~madrag.evaluation.tables`: every table, markdown page and file the eval commands write;
* :mod:`~madrag.evaluation.report`: the HTML report, over :mod:`~madrag.evaluation.sources` (a run's scores, Judge
  records and debates);
* :mod:`madrag.evaluation.costs`: what a run cost (tallies, dry-run estimates, prices, prompt prefixes).
"""
