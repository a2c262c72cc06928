"""The Python API: score essays held in memory (or a data file) from a notebook or a script.

``score`` (synchronous, also inside Jupyter's running event loop) and ``ascore`` (its async twin) run the same
scoring job as ``madrag score`` and return a :class:`ScoringResult` (``.scores``, ``.records``,
``.evaluate()``, ``.run_dir``).
"""

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
