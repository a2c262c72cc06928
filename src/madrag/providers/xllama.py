"""The embedded runtime on ``xllamacpp``: llama.cpp's server code in-process, from a prebuilt wheel (nothing to
compile at install, unlike ``llama-cpp-python``). Same engine, same GGUF file, same prompt text as the
``llama-cpp-python`` runtime (:mod:`madrag.providers.llamacpp`), and the same contract:

* the chat template is the GGUF's, rendered as llama-cpp-python renders it (:mod:`madrag.providers.embedded`);
* a request is one ``handle_completions`` call on the prompt's token ids (the template's text plus the
  prefill, special tokens parsed), with a neutral sampler chain: temperature then top-p, nothing else (no
  top-k, min-p or penalties). Logprobs and top alternatives come from the full-vocabulary distribution before
  temperature (llama.cpp's ``n_probs``), as the other runtime's do. Flash attention is off: with it on, the
  logprobs differ from the other runtime's by up to 0.2 on CPU; off, by ~1e-4;
* greedy decoding gives the other runtime's tokens. Sampling (temperature > 0) uses llama.cpp's own seeded
  sampler, not numpy's: a seed gives the same text every time, but not the other runtime's text;
* ``choices``: the distribution after the prompt in full (``n_probs`` = the vocabulary) gives each
  single-token choice its log-probability; a longer choice is generated under a grammar of its exact token ids
  (``<[id]>``), whose reported logprobs stay the unconstrained ones: their sum is its log-probability;
* prompt-prefix reuse, restricted as the other runtime restricts it, so that the same request gives the same
  numbers whatever ran before: llama.cpp's results may depend on how a prompt is split into batches, so only
  a prefix of whole ``n_batch`` chunks that an earlier prompt evaluated as a fresh evaluation would is reused
  (the server is first made to drop the rest of its cache by a one-token request, whose reported reuse is
  checked; the rest is then evaluated in the same aligned chunks as from scratch). ``reuse_prompt = False``
  evaluates every prompt anew (bench/embedded_runtimes.py measures the difference). The tokens reused are the
  response's cached prompt tokens (``usage.cached_prompt_tokens``), as an OpenAI-compatible server reports its own.

Token ids come from the in-process server's ``/tokenize`` (on its loopback port, behind a key of the engine's
own): xllamacpp exposes no tokenizer call, and the choices must be split into exactly the tokens the model
reads.
"""

from __future__ import annotations

import json
import secrets
import urllib.request
from pathlib import Path
from typing import Any

from madrag.errors import ProviderError
from madrag.extras import require
from madrag.providers.base import ChatRequest, TokenLogprob, TopLogprob
from madrag.providers.embedded import (
    LOAD_LOCK,
    EngineContext,
    Generated,
    GgufVocab,
    StopScan,
    common_prefix,
    read_gguf_vocab,
)

# every sampler but temperature and top-p out of the chain
_NEUTRAL: dict[str, Any] = {
    "samplers": ["temperature", "top_p"],
    "top_k": 0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "xtc_probability": 0.0,
    "mirostat": 0,
}
# the loopback call never goes through an HTTP proxy of the environment
_LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _text(entry: dict[str, Any]) -> str:
    return bytes(entry["bytes"]).decode("utf-8", "replace")


def _entry(entry: dict[str, Any], top_k: int) -> TokenLogprob:
    top = [TopLogprob(token=_text(t), logprob=float(t["logprob"])) for t in entry["top_logprobs"][:top_k]]
    return TokenLogprob(token=_text(entry), logprob=float(entry["logprob"]), top=top)


class XLlamaEngine(EngineContext):
    """One llama.cpp context (an in-process ``xllamacpp.Server`` with one slot), used by one request at a time."""

    def __init__(
        self, model_path: Path, n_ctx: int, n_threads: int, n_batch: int, n_threads_batch: int | None = None
    ) -> None:
        super().__init__(model_path, n_ctx, n_threads, n_batch, n_threads_batch)
        self.reuse_prompt = True  # aligned prefix reuse (see the module's docstring)
        self._cached: list[int] | None = None  # the prompt whose KV cache the server holds, evaluated aligned
        self._prompt_reused: int | None = None  # leading prompt tokens the current request took from that cache
        self._server: Any = None
        self._vocab: GgufVocab | None = None
        # the in-process server also listens on a loopback port (madrag uses it to tokenize): a key of this
        # engine's own keeps other local processes and web pages from using the model through it
        self._key = secrets.token_urlsafe(24)

    # -- model ---------------------------------------------------------------------------------------
    def _params(self, xllamacpp: Any) -> Any:
        from madrag.providers.models import xllamacpp_needs_amx_workaround

        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path)
        params.n_ctx = self.n_ctx
        params.n_parallel = 1
        params.n_batch = params.n_ubatch = self.n_batch
        params.cpuparams.n_threads = self.n_threads
        params.cpuparams_batch.n_threads = self.n_threads_batch
        params.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.cache_ram_mib = 0  # no host-memory prompt cache: only the context's own, reused aligned
        params.n_threads_http = 1
        params.warmup = False
        params.verbosity = -1
        params.no_extra_bufts = xllamacpp_needs_amx_workaround()
        params.api_keys = [self._key]
        return params

    def _load(self) -> tuple[Any, GgufVocab]:
        if self._server is None or self._vocab is None:
            xllamacpp = require("embedded", "xllamacpp")
            vocab = read_gguf_vocab(self.model_path)
            try:
                with LOAD_LOCK:
                    server = xllamacpp.Server(self._params(xllamacpp))
            except (ValueError, RuntimeError) as exc:
                raise ProviderError(f"cannot load model {self.model_path}: {exc}") from exc
            self._server, self._vocab = server, vocab
        return self._server, self._vocab

    def _render(self, messages: list[dict[str, str]]) -> str:
        return self._load()[1].template.render(messages)

    def tokenize(self, text: str, special: bool) -> list[int]:
        """The token ids of ``text`` (no BOS added; control-token texts parsed when ``special``)."""
        server, _ = self._load()
        body = json.dumps({"content": text, "add_special": False, "parse_special": special}).encode()
        req = urllib.request.Request(
            f"{server.listening_address}/tokenize",
            data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._key}"},
        )
        try:
            with _LOCAL.open(req, timeout=60) as resp:
                return [int(t) for t in json.loads(resp.read())["tokens"]]
        except (OSError, ValueError, KeyError) as exc:
            raise ProviderError(f"xllamacpp could not tokenize: {exc}") from exc

    def close(self) -> None:
        """Free the model context (waiting for a generation still running in a worker thread)."""
        with self._thread_lock:
            self._server = None
            self._cached = None

    # -- generation (runs in a worker thread, under the lock) ----------------------------------------
    def _generate_locked(self, request: ChatRequest) -> Generated:
        ids = self.tokenize(self.render_prompt(request), special=True)
        self.check_fits(len(ids), request)
        self._prompt_reused = None
        if request.choices is not None:
            out = self._choose(ids, request.choices, request.top_logprobs)
        else:
            out = self._sample(ids, request)
        out.n_cached = self._prompt_reused
        return out

    def _aligned_reuse(self, ids: list[int]) -> int:
        """Leave the server's cache holding at most the aligned prefix of ``ids`` an earlier prompt evaluated;
        how many leading tokens the request may reuse (0: evaluate it anew)."""
        if not self.reuse_prompt or not self._cached:
            return 0
        keep = min(common_prefix(self._cached, ids), len(ids) - 1)
        keep -= keep % self.n_batch
        if keep == 0:
            return 0
        server, _ = self._load()
        other = ids[keep] - 1 if ids[keep] > 0 else ids[keep] + 1  # any token but the next one
        probe = {"prompt": [*ids[:keep], other], "max_tokens": 1, "temperature": 0.0, "cache_prompt": True}
        out = server.handle_completions({**_NEUTRAL, **probe})
        reused = ((out.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
        return keep if reused == keep else 0

    def _send(self, body: dict[str, Any], callback: Any = None) -> Any:
        """One request to the server, reusing what :meth:`_aligned_reuse` allows."""
        ids: list[int] = body["prompt"]
        reuse = self._aligned_reuse(ids)
        if self._prompt_reused is None:  # the request's first evaluation of its prompt (a choice's are extra)
            self._prompt_reused = reuse
        full = {**_NEUTRAL, **body, "cache_prompt": reuse > 0}
        self._cached = None
        server, _ = self._load()
        out = server.handle_completions(full) if callback is None else server.handle_completions(full, callback)
        if not (isinstance(out, dict) and "error" in out):
            self._cached = list(ids)
        return out

    def _complete(self, body: dict[str, Any]) -> dict[str, Any]:
        out = self._send(body)
        if "error" in out:
            error = out["error"]
            raise ProviderError(f"llama.cpp refused the request: {error.get('message', error)}")
        choice: dict[str, Any] = out["choices"][0]
        return choice

    def _sample(self, ids: list[int], request: ChatRequest) -> Generated:
        """Generate, streaming: stop sequences are found here, in the decoded text as the other runtime finds
        them (llama.cpp's own stop handling drops a guessed number of tokens from the logprobs)."""
        body: dict[str, Any] = {
            "prompt": ids,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "n_probs": max(1, request.top_logprobs),
            "stream": True,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        run = _StopScan(request.stop, request.top_logprobs)
        self._send(body, run.chunk)
        return run.result(len(ids))

    def _choose(self, ids: list[int], choices: list[str], top_k: int) -> Generated:
        """Score every choice's token sequence; the most probable one is the output (greedy)."""
        _, vocab = self._load()
        first = self._complete({"prompt": ids, "max_tokens": 1, "temperature": 0.0, "n_probs": vocab.n_vocab})
        ranked = first["logprobs"]["content"][0]["top_logprobs"]
        dist = {int(e["id"]): e for e in ranked}
        scores: dict[str, float] = {}
        firsts: dict[str, int] = {}
        for choice in choices:
            cids = self.tokenize(choice, special=False)
            if not cids:
                raise ProviderError(f"choice {choice!r} is empty once tokenized")
            firsts[choice] = cids[0]
            scores[choice] = self._forced(ids, cids) if len(cids) > 1 else self._lookup(dist, cids[0])
        best = max(scores, key=lambda c: scores[c])
        head = dist.get(firsts[best])
        top = [TopLogprob(token=_text(e), logprob=float(e["logprob"])) for e in ranked[:top_k]]
        token = _text(head) if head is not None else best
        entry = TokenLogprob(token=token, logprob=self._lookup(dist, firsts[best]), top=top)
        return Generated(text=best, tokens=[entry], n_prompt=len(ids), finish_reason="stop", choice_logprobs=scores)

    @staticmethod
    def _lookup(dist: dict[int, dict[str, Any]], token: int) -> float:
        entry = dist.get(token)
        return float(entry["logprob"]) if entry is not None else float("-inf")

    def _forced(self, ids: list[int], cids: list[int]) -> float:
        """The log-probability of the token sequence ``cids`` after ``ids``: generated under a grammar that
        admits only those tokens, each reported with its unconstrained log-probability."""
        grammar = "root ::= " + " ".join(f"<[{t}]>" for t in cids)
        body = {"prompt": ids, "max_tokens": len(cids), "temperature": 0.0, "n_probs": 1, "grammar": grammar}
        entries = (self._complete(body).get("logprobs") or {}).get("content") or []
        if [int(e["id"]) for e in entries[: len(cids)]] != cids:
            raise ProviderError("llama.cpp did not follow the grammar of a choice's tokens")
        return sum(float(e["logprob"]) for e in entries[: len(cids)])


class _StopScan(StopScan):
    """The streamed chunks of one generation: its tokens, its text, where it stops."""

    def __init__(self, stop: list[str], top_k: int) -> None:
        super().__init__(stop)
        self.top_k = top_k
        self.error: str | None = None

    def chunk(self, chunk: dict[str, Any]) -> bool:
        """Take one streamed chunk; True stops the generation (a stop sequence was generated)."""
        if "error" in chunk:
            self.error = str(chunk["error"].get("message", chunk["error"]))
            return True
        choice = (chunk.get("choices") or [{}])[0]
        for entry in (choice.get("logprobs") or {}).get("content") or []:
            if self.add(_entry(entry, self.top_k), bytes(entry["bytes"])):
                return True
        if choice.get("finish_reason") == "stop" and self.tokens and not self.tokens[-1].token:
            # llama.cpp lists the end-of-generation token (an empty piece); the other runtime does not
            self.tokens.pop()
            self.finish = "stop"
        return False

    def result(self, n_prompt: int) -> Generated:
        """The generation, once the stream has ended."""
        if self.error is not None:
            raise ProviderError(f"llama.cpp refused the request: {self.error}")
        return super().result(n_prompt)
