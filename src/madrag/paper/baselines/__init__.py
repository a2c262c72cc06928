"""LLM-free baselines for the MADRAG paper's Table 1: a FeatEng-RF-style feature model and a retrieval-only scorer.

Both are evaluated with the same protocol: the ASAP ``fold`` column's five folds, train (or build the exemplar
bank) on four, score the fifth, and report QWK per trait on the pooled out-of-fold predictions and as the mean
over folds.
"""

from madrag.paper.baselines.feature_scorer import CVResult, ForestSettings, cross_validate_features, fold_indices
from madrag.paper.baselines.features import FEATURE_NAMES, essay_features, feature_matrix
from madrag.paper.baselines.lexicon import english_lexicon
from madrag.paper.baselines.retrieval_scorer import RetrievalScorer, cross_validate_retrieval, weighted_score
from madrag.retrieval.vectors import CachingEmbedder

__all__ = [
    "FEATURE_NAMES",
    "CVResult",
    "CachingEmbedder",
    "ForestSettings",
    "RetrievalScorer",
    "cross_validate_features",
    "cross_validate_retrieval",
    "english_lexicon",
    "essay_features",
    "feature_matrix",
    "fold_indices",
    "weighted_score",
]
