"""Essays, their loaders and splits."""

from madrag.data.essay import Essay, no_scores_line, reference_label, traits_without_scores
from madrag.data.loaders import load_asap, load_essays, load_table
from madrag.data.splits import Split, split_by_fold

__all__ = [
    "Essay",
    "Split",
    "load_asap",
    "load_essays",
    "load_table",
    "no_scores_line",
    "reference_label",
    "split_by_fold",
    "traits_without_scores",
]
