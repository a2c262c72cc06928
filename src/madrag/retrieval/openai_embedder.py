"""Essay embeddings from an OpenAI-compatible server's ``POST {base_url}/embeddings`` (``--embedder server``): the
core install's retrieval, with no model in this process (vLLM, llama.cpp's server with ``--embeddings``, OpenAI
and others serve it).

The texts go in batches of ``batch_size`` (``{"model": ..., "input": [...], "encoding_format": "float"}``) over
the HTTP client the OpenAI-compatible chat backend uses (:func:`madrag.providers.openai_compat.make_client`: its
headers, key, proxies, its one-line failures), one batch after the other. An answer must hold one vector per text
(by ``index``), all of one length, all finite; anything else is a :class:`ProviderError` naming the server and
what was wrong. The vectors are L2-normalised as every embedder's are.

Where the server is: :class:`EmbeddingEndpoint` (``--embedding-url``, ``--embedding-model``), by default the chat
backend's own (its ``--base-url``, ``--model`` and key's variable), so ``--provider openai --embedder server`` asks
the one server for both. The embedder's :attr:`~OpenAIEmbedder.name` holds the model, so a bank built by one model
is never used with another's vectors.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict

from madrag.errors import ConfigError, ProviderError, clip
from madrag.providers.openai_compat import NO_KEY, make_client
from madrag.providers.openai_http import ClientFailure, HttpClientFactory, StatusFailure
from madrag.retrieval.embedder import FloatArray, normalize_rows

T = TypeVar("T")
PATH = "/embeddings"
"""The endpoint under the base URL (``http://host:8000/v1`` -> ``http://host:8000/v1/embeddings``)."""


class EmbeddingEndpoint(BaseModel):
    """Where ``--embedder server`` sends its texts: the server (``base_url``; None: the chat backend's), the model
    it names (None: the chat backend's) and the environment variable holding the API key."""

    model_config = ConfigDict(frozen=True)

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"

    def over(self, base_url: str | None, model: str | None, api_key_env: str) -> EmbeddingEndpoint:
        """This endpoint with what it leaves unsaid taken from the chat backend's (its URL, model and key)."""
        return EmbeddingEndpoint(
            base_url=self.base_url or base_url,
            model=self.model or model,
            api_key_env=api_key_env if self.api_key_env == "OPENAI_API_KEY" else self.api_key_env,
        )


def _in_thread(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to its end in an event loop of its own (a worker thread's), so a caller inside a running
    loop (the pipeline builds its bank there) and one outside it both can."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="madrag-embed") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def read_vectors(body: bytes, expected: int, where: str) -> FloatArray:
    """The vectors of an embeddings answer, in input order; a ProviderError when it is not ``expected`` vectors of
    one length of finite numbers."""
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ProviderError(f"{where} answered no JSON: {clip(body.decode('utf-8', 'replace'))!r}") from None
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise ProviderError(f"{where} answered no 'data' list of embeddings: {clip(str(answer))!r}")
    rows: dict[int, list[Any]] = {}
    for position, item in enumerate(data):
        vector = item.get("embedding") if isinstance(item, dict) else None
        index = item.get("index", position) if isinstance(item, dict) else position
        if not isinstance(vector, list) or not isinstance(index, int) or index in rows:
            raise ProviderError(f"{where} answered a bad embedding at position {position}: {clip(str(item))!r}")
        rows[index] = vector
    if sorted(rows) != list(range(expected)):
        raise ProviderError(f"{where} answered {len(rows)} embeddings for {expected} texts")
    lengths = {len(v) for v in rows.values()}
    if len(lengths) != 1 or 0 in lengths:
        raise ProviderError(f"{where} answered embeddings of different or no lengths: {sorted(lengths)}")
    try:
        vectors = np.array([rows[i] for i in range(expected)], dtype=np.float64)
    except (TypeError, ValueError):
        raise ProviderError(f"{where} answered embeddings that are not lists of numbers") from None
    if not np.isfinite(vectors).all():
        raise ProviderError(f"{where} answered embeddings with values that are not finite numbers")
    return normalize_rows(vectors)


class OpenAIEmbedder:
    """An :class:`~madrag.retrieval.Embedder` over an OpenAI-compatible ``/embeddings`` endpoint (see the module)."""

    def __init__(
        self,
        endpoint: EmbeddingEndpoint,
        *,
        batch_size: int = 64,
        timeout_s: float = 120.0,
        http: HttpClientFactory | None = None,
    ) -> None:
        if not endpoint.model:
            raise ConfigError("--embedder server needs a model name: --embedding-model, else the backend's --model")
        if batch_size < 1:
            raise ConfigError(f"the embeddings batch size must be >= 1, got {batch_size}")
        self.endpoint = endpoint
        self.model: str = endpoint.model
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self._http = http or make_client  # madrag's client unless given (the tests' reference clients)
        self._dim: int | None = None

    @property
    def name(self) -> str:
        """``server-embeddings[model=M]``: the model the server embeds with (what fingerprints a bank)."""
        return f"server-embeddings[model={self.model}]"

    @property
    def dim(self) -> int:
        """The length of the server's vectors (one text embedded the first time it is asked)."""
        if self._dim is None:
            self._dim = int(self.embed(["dimension"]).shape[1])
        return self._dim

    @property
    def where(self) -> str:
        """The endpoint as errors name it."""
        return f"the embeddings endpoint {(self.endpoint.base_url or 'https://api.openai.com/v1').rstrip('/')}{PATH}"

    def embed(self, texts: list[str]) -> FloatArray:
        """One L2-normalised row per text, in order, ``batch_size`` texts per request."""
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        batches = [texts[i : i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        vectors = np.concatenate(_in_thread(lambda: self._embed_batches(batches)))
        self._dim = int(vectors.shape[1])
        return vectors

    async def _embed_batches(self, batches: Sequence[list[str]]) -> list[FloatArray]:
        key = os.environ.get(self.endpoint.api_key_env, "").strip() or NO_KEY
        http = self._http(self.endpoint.base_url, key, self.timeout_s, 1)
        try:
            out = []
            for batch in batches:
                body = {"model": self.model, "input": batch, "encoding_format": "float"}
                try:
                    answer = await http.post(PATH, body)
                except ClientFailure as exc:
                    raise ProviderError(f"{self.where} cannot be reached ({exc.kind}): {exc.detail}") from None
                except StatusFailure as exc:
                    raise ProviderError(f"{self.where} refused the texts (HTTP {exc.status}): {exc.detail}") from None
                out.append(read_vectors(answer, len(batch), self.where))
            return out
        finally:
            await http.aclose()
