"""Exemplar retrieval (the MADRAG paper, 3.3): essay embeddings (MiniLM, or a server's) and the exemplar bank."""

from madrag.retrieval.bank import Exemplar, ExemplarBank, LevelExemplar, score_key
from madrag.retrieval.choice import make_embedder
from madrag.retrieval.embedder import (
    EMBEDDERS,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    MiniLMWindowsEmbedder,
    minilm_model_dir,
    plan_windows,
)
from madrag.retrieval.openai_embedder import EmbeddingEndpoint, OpenAIEmbedder

__all__ = [
    "EMBEDDERS",
    "Embedder",
    "EmbeddingEndpoint",
    "Exemplar",
    "ExemplarBank",
    "HashingEmbedder",
    "LevelExemplar",
    "MiniLMEmbedder",
    "MiniLMWindowsEmbedder",
    "OpenAIEmbedder",
    "make_embedder",
    "minilm_model_dir",
    "plan_windows",
    "score_key",
]
