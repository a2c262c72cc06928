"""The Python API: score essays held in memory (or a data file) from a notebook or a script.

``score`` (synchronous, also inside Jupyter's running event loop) and ``ascore`` (its async twin) run the same
scoring job as ``madrag score`` and return a :class:`ScoringResult` (``.scores``, ``.records``,
``.evaluate()``, ``.run_dir``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from madrag.api.lazy_exports import lazy_exports

if TYPE_CHECKING:  # at run time each name is imported on first use (madrag.api.lazy_exports): importing
    # madrag.api.progress, say, does not import pandas through madrag.api.inputs
    from madrag.api.backend import ProviderLike, parse_provider
    from madrag.api.inputs import EssaysLike, RubricLike, to_essays, to_rubric
    from madrag.api.progress import ScoreProgress
    from madrag.api.result import ScoringResult
    from madrag.api.scoring import arun_job, ascore, run_job, run_sync, score

__all__ = [
    "EssaysLike",
    "ProviderLike",
    "RubricLike",
    "ScoreProgress",
    "ScoringResult",
    "arun_job",
    "ascore",
    "parse_provider",
    "run_job",
    "run_sync",
    "score",
    "to_essays",
    "to_rubric",
]

_HOMES = {
    "EssaysLike": "madrag.api.inputs",
    "ProviderLike": "madrag.api.backend",
    "RubricLike": "madrag.api.inputs",
    "ScoreProgress": "madrag.api.progress",
    "ScoringResult": "madrag.api.result",
    "arun_job": "madrag.api.scoring",
    "ascore": "madrag.api.scoring",
    "parse_provider": "madrag.api.backend",
    "run_job": "madrag.api.scoring",
    "run_sync": "madrag.api.scoring",
    "score": "madrag.api.scoring",
    "to_essays": "madrag.api.inputs",
    "to_rubric": "madrag.api.inputs",
}
if not TYPE_CHECKING:
    __getattr__ = lazy_exports(globals(), _HOMES)
