"""The embedder ``--embedder`` names, made: MiniLM as the MADRAG paper, MiniLM over windows, the hashing test
embedder, or an OpenAI-compatible server's ``/v1/embeddings`` at the endpoint the job gives."""

from __future__ import annotations

from madrag.errors import ConfigError, MadragError
from madrag.extras import PACKAGES, MissingExtra, installed
from madrag.retrieval.embedder import (
    EMBEDDERS,
    MINILM_PACKAGE,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    MiniLMWindowsEmbedder,
)
from madrag.retrieval.openai_embedder import EmbeddingEndpoint, OpenAIEmbedder

NEEDS: dict[str, tuple[str, ...]] = {
    "minilm": (MINILM_PACKAGE, "sentence_transformers", "torch"),
    "minilm-windows": (MINILM_PACKAGE, "sentence_transformers", "torch"),
}
"""The packages (all of the embedded extra) each embedder that runs here needs."""


def check_embedder(kind: str) -> None:
    """:class:`~madrag.extras.MissingExtra` when the embedder ``kind`` needs a package that is not installed:
    checked with a run's other checks, before anything is written (nothing is imported)."""
    for module in NEEDS.get(kind, ()):
        if not installed(module):
            raise MissingExtra("embedded", PACKAGES.get(module.partition(".")[0], (module, "embedded"))[0])


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
