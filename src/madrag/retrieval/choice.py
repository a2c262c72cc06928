"""The embedder ``--embedder`` names, made: MiniLM as the MADRAG paper, MiniLM over windows, the hashing test
embedder, or an OpenAI-compatible server's ``/v1/embeddings`` at the endpoint the job gives."""

from __future__ import annotations

from madrag.errors import ConfigError, MadragError
from madrag.retrieval.embedder import EMBEDDERS, Embedder, HashingEmbedder, MiniLMEmbedder, MiniLMWindowsEmbedder
from madrag.retrieval.openai_embedder import EmbeddingEndpoint, OpenAIEmbedder


def make_embedder(kind: str, endpoint: EmbeddingEndpoint | None = None) -> Embedder:
    """The embedder ``--embedder`` names: ``minilm`` (the default, the MADRAG paper's), ``minilm-windows`` (the
    option), ``hashing`` (quick checks) or ``openai`` (the server at ``endpoint``: a job's
    :meth:`~madrag.pipeline.score_job.ScoreJob.embedding_endpoint`)."""
    if kind == "minilm":
        return MiniLMEmbedder()
    if kind == "minilm-windows":
        return MiniLMWindowsEmbedder()
    if kind == "hashing":
        return HashingEmbedder()
    if kind == "server":
        if endpoint is None:
            raise ConfigError("--embedder server needs an OpenAI-compatible server: --embedding-url, else --base-url")
        return OpenAIEmbedder(endpoint)
    raise MadragError(f"unknown embedder {kind!r}; use one of {', '.join(EMBEDDERS)}")
