"""Exemplar retrieval (the MADRAG paper, 3.3): essay embeddings and the Chroma-backed exemplar bank."""

from madrag.retrieval.bank import (
    SCORE_PREFIX,
    Exemplar,
    ExemplarBank,
    LevelExemplar,
    pool_fingerprint,
    score_key,
)
from madrag.retrieval.embedder import (
    EMBEDDERS,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    MiniLMWindowsEmbedder,
    make_embedder,
    minilm_model_dir,
    normalize_rows,
    plan_windows,
    stored_embedder,
)

__all__ = [
    "EMBEDDERS",
    "SCORE_PREFIX",
    "Embedder",
    "Exemplar",
    "ExemplarBank",
    "HashingEmbedder",
    "LevelExemplar",
    "MiniLMEmbedder",
    "MiniLMWindowsEmbedder",
    "make_embedder",
    "minilm_model_dir",
    "normalize_rows",
    "plan_windows",
    "pool_fingerprint",
    "score_key",
    "stored_embedder",
]
