"""``--embedder server``: essay vectors from an OpenAI-compatible ``/v1/embeddings``, here the stub server's (a
hashed bag of words per text), in batches, with one-line errors for a server that cannot be used."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import pytest

from madrag.errors import ConfigError, ProviderError
from madrag.pipeline.score_job import ScoreJob
from madrag.providers.spec import ProviderSpec
from madrag.retrieval import Embedder, EmbeddingEndpoint, HashingEmbedder, OpenAIEmbedder, make_embedder
from madrag.retrieval.openai_embedder import read_vectors
from madrag.testing.stub_answers import EMBEDDING_DIM
from madrag.testing.stub_server import StubServer

TEXTS = ["the river boat journey", "a mountain snow climb", "the river at night", "city market noise", "snow"]


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    """One stub server for the module's tests."""
    with StubServer(latency_s=0.0) as server:
        yield server


def embedder(stub: StubServer, **kwargs: int) -> OpenAIEmbedder:
    return OpenAIEmbedder(EmbeddingEndpoint(base_url=stub.base_url, model="stub-embed"), **kwargs)


def test_the_vectors_are_the_servers_in_order_and_in_batches(stub: StubServer) -> None:
    emb = embedder(stub, batch_size=2)
    assert isinstance(emb, Embedder) and emb.name == "server-embeddings[model=stub-embed]"
    stub.reset_stats()
    vectors = emb.embed(TEXTS)
    stats = stub.stats()
    assert (stats.embedding_requests, stats.embedded) == (3, 5)  # 2 + 2 + 1
    np.testing.assert_allclose(vectors, HashingEmbedder(EMBEDDING_DIM).embed(TEXTS), atol=1e-6)
    assert vectors.dtype == np.float32 and emb.dim == EMBEDDING_DIM
    near = vectors[1:] @ vectors[0]
    assert int(np.argmax(near)) == 1  # "the river at night" shares the most words with the first text
    assert emb.embed([]).shape == (0, EMBEDDING_DIM)


async def test_it_embeds_from_inside_a_running_event_loop(stub: StubServer) -> None:
    # the pipeline builds its bank in the event loop's thread: the embedder runs its requests in a loop of its own
    assert embedder(stub).embed(["one text"]).shape == (1, EMBEDDING_DIM)


def test_a_server_without_the_endpoint_or_no_server_is_one_line(stub: StubServer) -> None:
    wrong_path = OpenAIEmbedder(EmbeddingEndpoint(base_url=stub.base_url.removesuffix("/v1"), model="m"))
    with pytest.raises(ProviderError, match=r"/embeddings refused the texts \(HTTP 404\)"):
        wrong_path.embed(["text"])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens on it once closed
    gone = OpenAIEmbedder(EmbeddingEndpoint(base_url=f"http://127.0.0.1:{port}/v1", model="m"), timeout_s=5)
    with pytest.raises(ProviderError, match=rf"127\.0\.0\.1:{port}/v1/embeddings cannot be reached \(connection\)"):
        gone.embed(["text"])


def _answer(*vectors: object, **extra: object) -> bytes:
    return orjson.dumps({"data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)], **extra})


@pytest.mark.parametrize(
    ("body", "expected", "message"),
    [
        (b"<html>busy</html>", 1, "answered no JSON"),
        (orjson.dumps({"object": "list"}), 1, "no 'data' list"),
        (_answer([1.0, 0.0]), 2, "answered 1 embeddings for 2 texts"),
        (_answer([1.0, 0.0], [1.0]), 2, r"different or no lengths: \[1, 2\]"),
        (_answer([]), 1, r"different or no lengths: \[0\]"),
        (_answer(["a", "b"]), 1, "not lists of numbers"),
        (orjson.dumps({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}), 2, "bad"),
        (orjson.dumps({"data": [{"index": 0, "embedding": [1e308 * 10]}]}), 1, "not finite"),
    ],
)
def test_an_answer_that_is_not_one_vector_per_text_is_refused(body: bytes, expected: int, message: str) -> None:
    with pytest.raises(ProviderError, match=message):
        read_vectors(body, expected, "the embeddings endpoint http://x/v1/embeddings")


def test_vectors_are_read_by_index_and_normalised() -> None:
    body = orjson.dumps({"data": [{"index": 1, "embedding": [0.0, 2.0]}, {"index": 0, "embedding": [3.0, 4.0]}]})
    np.testing.assert_allclose(read_vectors(body, 2, "x"), [[0.6, 0.8], [0.0, 1.0]], atol=1e-6)


def test_the_endpoint_is_the_backends_unless_given(tmp_path: Path) -> None:
    backend = ProviderSpec(kind="openai", model="chat", base_url="http://a/v1", api_key_env="A_KEY")
    job = ScoreJob(data=tmp_path / "e.csv", rubric=tmp_path / "r.json", run_dir=tmp_path, provider=backend)
    assert job.embedding_endpoint() is None  # MiniLM: no server
    served = job.model_copy(update={"embedder": "server"})
    assert served.embedding_endpoint() == EmbeddingEndpoint(base_url="http://a/v1", model="chat", api_key_env="A_KEY")
    own = served.model_copy(update={"embedding": EmbeddingEndpoint(base_url="http://b/v1", model="embed")})
    assert own.embedding_endpoint() == EmbeddingEndpoint(base_url="http://b/v1", model="embed", api_key_env="A_KEY")
    assert make_embedder("server", own.embedding_endpoint()).name == "server-embeddings[model=embed]"
    with pytest.raises(ConfigError, match="--embedder server needs an OpenAI-compatible server"):
        make_embedder("server")
    with pytest.raises(ConfigError, match="needs a model name"):
        OpenAIEmbedder(EmbeddingEndpoint(base_url="http://b/v1"))
