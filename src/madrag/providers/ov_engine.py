"""The embedded runtime on OpenVINO (``runtime="openvino"``, ``pip install 'madrag[openvino]'``): the same GGUF
file, the same prompt text and the same contract as the llama.cpp runtimes (:mod:`madrag.providers.llamacpp`,
:mod:`madrag.providers.xllama`), on the model :mod:`madrag.providers.ov_model` converts it to (F16, once, cached).

* The chat template is the GGUF's, rendered as the other runtimes render it (:mod:`madrag.providers.embedded`);
  token ids come from the tokenizer OpenVINO GenAI converts from the same GGUF (special tokens parsed, as llama.cpp
  parses them in a prompt), a token's text from the GGUF's own vocabulary (as llama.cpp's server reports it, a
  control token as its text).
* Every step's full-vocabulary logits are in hand (:class:`~madrag.providers.ov_model.StatefulLogits`), so each
  record field is computed exactly, as llama-cpp-python's loop computes it: a generated token's log-probability
  and top alternatives from the step's log-softmax (before temperature); ``choices`` from the distribution after
  the prompt (a longer choice's later tokens fed in one call, its log-probabilities summed); the pick with
  :func:`~madrag.providers.embedded.pick_token` (greedy at temperature 0; sampled texts are reproducible per seed
  but differ from llama.cpp's, whose random generator is its own).
* Prompt-prefix reuse as the llama.cpp runtimes restrict it: a prompt is always evaluated in the same aligned
  chunks of ``n_batch`` tokens, and only whole chunks an earlier prompt evaluated are kept (the state cut back to
  them), so the same request gives the same numbers whatever ran before.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from madrag.errors import ProviderError
from madrag.extras import require
from madrag.providers.base import ChatRequest, TokenLogprob, TopLogprob
from madrag.providers.embedded import (
    Generated,
    GgufVocab,
    log_softmax,
    pick_token,
    read_gguf_metadata,
    read_gguf_vocab,
    trim_tokens,
)
from madrag.providers.ov_model import StatefulLogits, converted_model

# the end-of-generation texts llama.cpp recognises besides the GGUF's own eos/eot/eom ids (llama-vocab.cpp)
_EOG_TEXTS = frozenset(
    {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>"}
)
_CONTROL, _USER_DEFINED, _BYTE = 3, 4, 6


def _gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the character standing for each byte in a BPE vocabulary's token texts."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


@dataclass(frozen=True)
class TokenTable:
    """Each token id's bytes (its piece, as llama.cpp's server reports it) and the end-of-generation ids."""

    pieces: list[bytes]
    eog: frozenset[int]


def read_token_table(path: Path) -> TokenTable:
    """The token pieces and end-of-generation ids of a GGUF file's vocabulary (a BPE ``gpt2`` vocabulary or a
    SentencePiece ``llama`` one)."""
    meta = read_gguf_metadata(path, ("tokenizer.ggml.",))
    texts, kinds = meta.get("tokenizer.ggml.tokens"), meta.get("tokenizer.ggml.token_type")
    model = meta.get("tokenizer.ggml.model")
    if not isinstance(texts, list) or not isinstance(kinds, list) or len(texts) != len(kinds):
        raise ProviderError(f"{path.name} has no token types beside its vocabulary")
    if model not in ("gpt2", "llama"):
        raise ProviderError(f"the OpenVINO runtime reads BPE (gpt2) or SentencePiece (llama) vocabularies, not {model}")
    decoder = _gpt2_byte_decoder()
    pieces: list[bytes] = []
    for text, kind in zip(texts, kinds, strict=True):
        if kind in (_CONTROL, _USER_DEFINED):
            pieces.append(str(text).encode())
        elif model == "gpt2":
            pieces.append(bytes(decoder[c] for c in text) if all(c in decoder for c in text) else text.encode())
        elif kind == _BYTE:
            pieces.append(bytes([int(str(text)[3:-1], 16)]))
        else:
            pieces.append(str(text).replace("\u2581", " ").encode())
    named = {meta.get(f"tokenizer.ggml.{key}_token_id") for key in ("eos", "eot", "eom")}
    eog = {i for i in named if isinstance(i, int)}
    eog |= {i for i, (t, k) in enumerate(zip(texts, kinds, strict=True)) if k == _CONTROL and t in _EOG_TEXTS}
    return TokenTable(pieces=pieces, eog=frozenset(eog))


def aligned_reuse(held: list[int], ids: list[int], aligned_upto: int, n_batch: int) -> int:
    """How many leading tokens of ``ids`` may be kept from a state holding ``held``, of which the first
    ``aligned_upto`` were evaluated in whole ``n_batch`` chunks: the common prefix, at most that, never the whole
    prompt (its last position's logits are needed), rounded down to whole chunks."""
    common = 0
    for a, b in zip(held, ids, strict=False):
        if a != b:
            break
        common += 1
    keep = min(common, aligned_upto, len(ids) - 1)
    return max(keep - keep % n_batch, 0)


class OpenVinoEngine:
    """One OpenVINO context (a compiled model and its state), used by one request at a time."""

    def __init__(
        self, model_path: Path, n_ctx: int, n_threads: int, n_batch: int, n_threads_batch: int | None = None
    ) -> None:
        self.model_path = model_path
        self.model = model_path.name
        self.n_ctx = n_ctx
        self.n_threads = n_threads  # one stream of these threads, for prompts and generation alike
        self.n_batch = n_batch
        self.reuse_prompt = True
        self._logits: StatefulLogits | None = None
        self._tokenizer: object = None
        self._vocab: GgufVocab | None = None
        self._table: TokenTable | None = None
        self._held: list[int] = []  # the tokens the state holds
        self._aligned_upto = 0  # of those, the leading ones evaluated in whole n_batch chunks
        self._thread_lock = threading.Lock()  # a timed-out await does not stop its worker thread

    # -- model ---------------------------------------------------------------------------------------
    def _load(self) -> StatefulLogits:
        if self._logits is None:
            genai = require("openvino", "openvino_genai")
            vocab, table = read_gguf_vocab(self.model_path), read_token_table(self.model_path)
            folder = converted_model(self.model_path)
            try:
                self._tokenizer = genai.Tokenizer(str(folder))
            except RuntimeError as exc:
                raise ProviderError(f"OpenVINO cannot load the tokenizer of {self.model}: {exc}") from exc
            self._vocab, self._table = vocab, table
            self._logits = StatefulLogits(folder / "openvino_model.xml", self.n_threads)
        return self._logits

    def render_prompt(self, request: ChatRequest) -> str:
        """The chat template applied to the messages, plus the prefill when there is one."""
        self._load()
        assert self._vocab is not None
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        return self._vocab.template.render(messages) + (request.prefill or "")

    def tokenize(self, text: str) -> list[int]:
        """The token ids of ``text`` (no BOS added; control-token texts parsed)."""
        self._load()
        encoded = self._tokenizer.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]
        return [int(t) for t in np.asarray(encoded.input_ids.data)[0]]

    def close(self) -> None:
        """Free the compiled model (waiting for a generation still running in a worker thread)."""
        with self._thread_lock:
            self._logits = None
            self._held, self._aligned_upto = [], 0

    # -- generation (runs in a worker thread, under the lock) ----------------------------------------
    def generate(self, request: ChatRequest) -> Generated:
        """The completion of ``request`` (blocking: run it in a worker thread)."""
        with self._thread_lock:
            ids = self.tokenize(self.render_prompt(request))
            if len(ids) + request.max_tokens > self.n_ctx:
                raise ProviderError(
                    f"prompt of {len(ids)} tokens + max_tokens {request.max_tokens} exceeds the context "
                    f"window of {self.n_ctx} tokens of {self.model}"
                )
            reused, last = self._prepare(ids)
            if request.choices is not None:
                out = self._choose(request.choices, last, len(ids), request.top_logprobs)
            else:
                out = self._sample(request, last, len(ids))
            out.n_cached = reused
            return out

    def _prepare(self, ids: list[int]) -> tuple[int, np.ndarray]:
        """Evaluate ``ids`` in aligned chunks, keeping the aligned prefix an earlier prompt left; (tokens kept,
        the log-probabilities after the last one)."""
        logits = self._load()
        keep = aligned_reuse(self._held, ids, self._aligned_upto, self.n_batch) if self.reuse_prompt else 0
        logits.cut(keep)
        self._held = ids[:keep]
        row = np.empty(0)
        for start in range(keep, len(ids), self.n_batch):
            row = logits.feed(ids[start : start + self.n_batch])[-1]
        self._held = list(ids)
        self._aligned_upto = len(ids) - len(ids) % self.n_batch
        return keep, log_softmax(row)

    def _entry(self, token: int, lps: np.ndarray, top_k: int) -> TokenLogprob:
        assert self._table is not None
        pieces = self._table.pieces
        top: list[TopLogprob] = []
        if top_k > 0:
            best = np.argpartition(-lps, top_k)[:top_k]
            best = best[np.argsort(-lps[best], kind="stable")]
            top = [TopLogprob(token=pieces[t].decode("utf-8", "replace"), logprob=float(lps[t])) for t in best]
        return TokenLogprob(token=pieces[token].decode("utf-8", "replace"), logprob=float(lps[token]), top=top)

    def _choose(self, choices: list[str], first: np.ndarray, n_prompt: int, top_k: int) -> Generated:
        """Score every choice's token sequence; the most probable one is the output (greedy)."""
        logits = self._load()
        base = logits.position
        scores: dict[str, float] = {}
        heads: dict[str, int] = {}
        for choice in choices:
            cids = self.tokenize(choice)
            if not cids:
                raise ProviderError(f"choice {choice!r} is empty once tokenized")
            heads[choice] = cids[0]
            total = float(first[cids[0]])
            if len(cids) > 1:
                rows = logits.feed(cids[:-1], keep=len(cids) - 1)
                total += sum(float(log_softmax(row)[tok]) for row, tok in zip(rows, cids[1:], strict=True))
                logits.cut(base)
            scores[choice] = total
        best = max(scores, key=lambda c: scores[c])
        entry = self._entry(heads[best], first, top_k)
        return Generated(text=best, tokens=[entry], n_prompt=n_prompt, finish_reason="stop", choice_logprobs=scores)

    def _sample(self, request: ChatRequest, lps: np.ndarray, n_prompt: int) -> Generated:
        logits = self._load()
        assert self._table is not None
        rng = np.random.default_rng(request.seed)
        produced: list[TokenLogprob] = []
        buf, text, finish = b"", "", "length"
        for step in range(request.max_tokens):
            token = pick_token(lps, request.temperature, request.top_p, rng)
            if token in self._table.eog:
                finish = "stop"
                break
            produced.append(self._entry(token, lps, request.top_logprobs))
            buf += self._table.pieces[token]
            text = buf.decode("utf-8", "ignore")
            hit = min((i for s in request.stop if (i := text.find(s)) >= 0), default=-1)
            if hit >= 0:
                text, finish = text[:hit], "stop"
                produced = trim_tokens(produced, len(text))
                break
            if step + 1 == request.max_tokens or logits.position + 1 >= self.n_ctx:
                break
            lps = log_softmax(logits.feed([token])[-1])
            self._held.append(token)
        return Generated(text=text, tokens=produced, n_prompt=n_prompt, finish_reason=finish)
