"""What a run cost: calls, HTTP requests, tokens, cache hits and an estimated spend, from its records.

* :mod:`~madrag.evaluation.costs.tally`: the tallies of a run (:func:`cost_report`), shared calls attributed.
* :mod:`~madrag.evaluation.costs.estimate`: a sample scaled to a planned run (:func:`estimate_run`).
* :mod:`~madrag.evaluation.costs.prices`: price tables (dollars per million tokens).
* :mod:`~madrag.evaluation.costs.prefix`: how much of each prompt repeats an earlier one (prefix caching).
* :mod:`~madrag.evaluation.costs.render`: reports and estimates as text and JSON.
"""
