"""Reading a finished run and measuring it, one module per concept:

* :mod:`~madrag.evaluation.run`: the one reader of a run (store, stored configuration, final trait scores of every
  protocol, a consensus protocol's too);
* :mod:`~madrag.evaluation.agreement`: the MADRAG paper's QWK tables, Human-Human rows, extreme subset, comparisons;
* :mod:`~madrag.evaluation.merge` and :mod:`~madrag.evaluation.compare_runs`: several runs merged, or compared;
* :mod:`~madrag.evaluation.tables`: every table, markdown page and file the eval commands write;
* :mod:`~madrag.evaluation.report`: the HTML report, over :mod:`~madrag.evaluation.sources` (a run's scores, Judge
  records and debates);
* :mod:`madrag.evaluation.costs`: what a run cost (tallies, dry-run estimates, prices, prompt prefixes).

The papers' own studies (the consensus paper's tables, the MADRAG paper's error export and coded tables) are the
research wing's, :mod:`madrag.paper`, which nothing here imports.
"""
