"""Confidence vs reasoning quality (the confidence paper): token log-probability window features and trajectories of the
debaters, the LLM meta-evaluator of their reasoning, and the correlation study.

* :mod:`~madrag.paper.confidence.features`: windows (first/last k tokens, first/last fraction, full) and statistics.
* :mod:`~madrag.paper.confidence.trajectory`: trajectories normalised to 0-100 % with percentile bands; the plot.
* :mod:`~madrag.paper.confidence.judgment`: the meta-evaluator's judgment (Figure 7's object), Q1 and Q, its parsing.
* :mod:`~madrag.paper.confidence.meta_eval`: the meta-evaluator's calls (Figures 7 and 8), recorded and resumable.
* :mod:`~madrag.paper.confidence.job`: a meta-evaluation of a finished run, in its own run store.
* :mod:`~madrag.paper.confidence.analysis`: Spearman / Kendall / AUROC / point-biserial, top features.
* :mod:`~madrag.paper.confidence.study`: all of it for one run, saved as tables, a plot and markdown.
* :mod:`~madrag.paper.confidence.figure3`: Figure 3 (the meta-evaluator's scores per dimension), pass rates per role.
* :mod:`~madrag.paper.confidence.sets`: Table 1 over several runs (one per essay set, ranked per set), Figure 3
  over all.
"""
