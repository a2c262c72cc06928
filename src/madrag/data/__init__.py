"""Essays, their loaders and splits."""

from madrag.data.essay import Essay, reference_label, traits_without_scores
from madrag.data.loaders import load_asap, load_essays, load_table
from madrag.data.splits import split_by_fold

__all__ = [
    "Essay",
    "load_asap",
    "load_essays",
    "load_table",
    "reference_label",
    "split_by_fold",
    "traits_without_scores",
]
