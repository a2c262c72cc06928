"""The research wing: what exists only to reproduce the three papers' tables and figures, beside the scoring core.

- :mod:`madrag.paper.confidence`: "Early-token confidence predicts reasoning quality" (Keramati, Cheok, Horne,
  Warschauer; arXiv 2606.10307): trajectories, window features, the meta-evaluator, the correlation analysis;
- :mod:`madrag.paper.baselines`: the MADRAG paper's LLM-free feature baselines;
- :mod:`madrag.paper.coding`: the MADRAG paper's error export for qualitative coding and the tables of a coded one;
- :mod:`madrag.paper.consensus`: "Beyond consensus: downward bias and role asymmetry in multi-agent LLM judges":
  its metrics, tables and figures over one run or several (judge models);
- :mod:`madrag.paper.beside_paper`, :mod:`madrag.paper.beside_consensus`: a run's figures beside the papers'
  reported ones (:mod:`madrag.paper.reported`, the published cells as package data).

The core (scoring, evaluation, the report, the web app, the API) never imports this package (an import-linter
contract); the CLI's paper commands do, and hand the report its ``--paper`` section.
"""
