"""The embedded runtime on OpenVINO GenAI (``runtime="openvino-genai"``, the default; the ``embedded`` extra): the
same GGUF file and prompt text as the llama.cpp runtimes, run by GenAI's own continuous-batching pipeline (paged
attention, a prefix cache, the slots' requests batched into one model call per step) on the model
:mod:`madrag.providers.genai_model` converts it to (the GGUF's F16 copy, once, cached).

What each record field is here, and how it differs from the llama.cpp runtimes':

* a generated token's log-probability: GenAI's own (``logprobs=1``), from the full distribution before
  temperature, as llama.cpp's ``n_probs`` gives it;
* the **top alternatives**: GenAI reports the chosen token only (``logprobs > 1`` is treated as 1), so they are
  computed where madrag reads them: at the **first generated token** (the debaters' first-token confidence) and
  at **every generated token that is a number** (where a Judge's score is read), each by a one-step beam search
  of width ``top_logprobs`` over the prompt and the tokens before it (GenAI's beam scores are the tokens'
  log-probabilities; the prefix comes from the pipeline's cache). The other tokens' alternatives are left empty,
  and the response says so (``raw["top_logprobs_at"]``);
* ``choices``: each choice is generated under a grammar admitting only its text (GenAI's structured output, all
  the choices batched over the cached prompt); GenAI reports the unconstrained log-probabilities (checked against
  the beam's), as llama.cpp's grammar does, so their sum is the choice's log-probability. A choice the model
  spelled in other tokens than its own (possible for a text of several tokens) is left out of
  ``choice_logprobs``: missing, counted in ``raw["choices_missing"]``;
* sampling: GenAI's seeded sampler (temperature, top-p): a seed gives the same text each time, not llama.cpp's;
* prompt reuse: GenAI's prefix cache (the tokens of an earlier prompt or answer). Unlike the llama.cpp runtimes'
  aligned reuse, a cached prefix or a request batched beside another can move a log-probability by about 1e-3
  (measured: docs/results/openvino-embedded.md); the tokens reused per request are not reported by GenAI
  (``cached_prompt_tokens`` is None: unknown).

The slots of a provider share one pipeline on every core: each slot is one request at a time, and the pipeline
steps all the slots' requests together. A step holds Python's GIL while it computes (:data:`STEP_TOKENS` bounds it).
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from madrag.errors import ProviderError
from madrag.extras import require
from madrag.providers.base import ChatRequest, TokenLogprob, TopLogprob
from madrag.providers.embedded import LOAD_LOCK, EngineContext, Generated, GgufVocab, StopScan, read_gguf_vocab
from madrag.providers.genai_model import TokenTable, converted_model, read_token_table

STEP_TOKENS = 256
"""The most prompt tokens one pipeline step evaluates (GenAI's ``max_num_batched_tokens``). A step holds Python's
GIL (GenAI's ``step`` binding does not release it), so this bounds how long other threads, the event loop among
them, wait: up to 0.82 s measured on 2 cores, against 1.7 s with 512 (docs/results/genai-runtime.txt)."""
_REGEX_SPECIAL = frozenset("\\.^$|?*+()[]{}/-")
TOP_AT = "first token and number tokens"
"""Where a response's tokens carry their top alternatives (``raw["top_logprobs_at"]``)."""
RECORDS = {
    "top_logprobs_at": TOP_AT,
    "cached_prompt_tokens": "not reported (unknown)",
    "choices": "each generated under a grammar of its text; one spelled in other tokens is missing",
}
"""What this runtime's records hold differently from llama.cpp's, as a run's stored backend description says."""


def compile_properties(threads: int) -> dict[str, Any]:
    """The CPU plugin's settings: ``threads`` threads, computing in f32 (OpenVINO's default on a CPU with bf16
    would be bf16: another model's numbers) with the KV cache in f16 (its default u8 would change them too)."""
    return {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f16"}


class SharedPipeline:
    """One GenAI continuous-batching pipeline of a converted model, used by every slot: requests are added
    from any thread, and whichever thread waits for its own steps the pipeline for all of them."""

    def __init__(self, folder: Path, threads: int, cache_gb: int, batched_tokens: int) -> None:
        genai = require("embedded", "openvino_genai")
        self._ov = require("embedded", "openvino")
        scheduler = genai.SchedulerConfig()
        scheduler.enable_prefix_caching = True
        scheduler.cache_size = cache_gb
        scheduler.max_num_batched_tokens = batched_tokens
        try:
            with LOAD_LOCK:
                self.pipe = genai.ContinuousBatchingPipeline(str(folder), scheduler, "CPU", compile_properties(threads))
        except RuntimeError as exc:
            raise ProviderError(f"OpenVINO GenAI cannot load {folder}: {exc}") from exc
        self.tokenizer = self.pipe.get_tokenizer()
        self._running = genai.GenerationStatus.RUNNING
        self._genai = genai
        self._step_lock = threading.Lock()
        self._add_lock = threading.Lock()
        self._ids = itertools.count(1)

    def config(self, **fields: Any) -> Any:
        """A generation config with ``fields``, the prompt taken as it is (no chat template applied)."""
        config = self._genai.GenerationConfig()
        config.apply_chat_template = False
        for name, value in fields.items():
            setattr(config, name, value)
        return config

    def only(self, text: str) -> Any:
        """A structured-output grammar that admits exactly ``text``."""
        return self._genai.StructuredOutputConfig(regex="".join(f"\\{c}" if c in _REGEX_SPECIAL else c for c in text))

    def run(self, requests: Sequence[tuple[list[int], Any]]) -> list[list[Any]]:
        """Each ``(token ids, config)`` request's outputs, once all of them have finished."""
        with self._add_lock:
            handles = [
                self.pipe.add_request(next(self._ids), self._ov.Tensor(np.array([ids], dtype=np.int64)), config)
                for ids, config in requests
            ]
        while True:
            with self._step_lock:
                if all(h.get_status() != self._running for h in handles):
                    break
                try:
                    self.pipe.step()
                except RuntimeError as exc:
                    raise ProviderError(f"OpenVINO GenAI failed a step: {exc}") from exc
        outputs = []
        for handle in handles:
            status = handle.get_status()
            if status != self._genai.GenerationStatus.FINISHED:
                raise ProviderError(f"OpenVINO GenAI did not finish a request: {status.name}")
            outputs.append(handle.read_all())
        return outputs


_PIPELINES: dict[tuple[Path, int], SharedPipeline] = {}
_PIPELINES_LOCK = threading.Lock()


def shared_pipeline(folder: Path, threads: int) -> SharedPipeline:
    """The process's one pipeline of ``folder`` on ``threads`` threads (made the first time)."""
    with _PIPELINES_LOCK:
        key = (folder, threads)
        if key not in _PIPELINES:
            _PIPELINES[key] = SharedPipeline(folder, threads, cache_gb=1, batched_tokens=STEP_TOKENS)
        return _PIPELINES[key]


class GenAIEngine(EngineContext):
    """One slot of the embedded model on OpenVINO GenAI: one request at a time, on the provider's shared
    pipeline (``n_threads`` is the slot's share of the cores; the pipeline runs on all the slots' threads)."""

    def __init__(
        self, model_path: Path, n_ctx: int, n_threads: int, n_batch: int, n_threads_batch: int | None = None
    ) -> None:
        super().__init__(model_path, n_ctx, n_threads, n_batch, n_threads_batch)
        self._pipeline: SharedPipeline | None = None
        self._vocab: GgufVocab | None = None
        self._table: TokenTable | None = None

    def _load(self) -> tuple[SharedPipeline, GgufVocab, TokenTable]:
        if self._pipeline is None or self._vocab is None or self._table is None:
            vocab, table = read_gguf_vocab(self.model_path), read_token_table(self.model_path)
            folder = converted_model(self.model_path)
            self._pipeline = shared_pipeline(folder, self.n_threads * self.slot_count)
            self._vocab, self._table = vocab, table
        return self._pipeline, self._vocab, self._table

    def _render(self, messages: list[dict[str, str]]) -> str:
        return self._load()[1].template.render(messages)

    def tokenize(self, text: str) -> list[int]:
        """The token ids of ``text`` (no BOS added; control-token texts parsed as llama.cpp parses a prompt's)."""
        encoded = self._load()[0].tokenizer.encode(text, add_special_tokens=False)
        return [int(t) for t in np.asarray(encoded.input_ids.data)[0]]

    def close(self) -> None:
        """Let go of the pipeline (the process keeps it for the next provider of the same model)."""
        with self._thread_lock:
            self._pipeline = None

    # -- generation (runs in a worker thread, under the lock) ----------------------------------------
    def _generate_locked(self, request: ChatRequest) -> Generated:
        ids = self.tokenize(self.render_prompt(request))
        self.check_fits(len(ids), request)
        if request.choices is not None:
            return self._choose(ids, request.choices, request.top_logprobs)
        return self._sample(ids, request)

    def _sample(self, ids: list[int], request: ChatRequest) -> Generated:
        pipeline, _, table = self._load()
        fields: dict[str, Any] = {"max_new_tokens": request.max_tokens, "logprobs": 1}
        if request.temperature > 0:
            seed = request.seed if request.seed is not None else secrets.randbits(31)
            fields.update(do_sample=True, temperature=request.temperature, top_p=request.top_p, rng_seed=seed)
        fields["stop_token_ids"] = set(table.eog)
        if request.stop:
            fields.update(stop_strings=set(request.stop), include_stop_str_in_output=True)
        out = pipeline.run([(ids, pipeline.config(**fields))])[0][0]
        scan = StopScan(request.stop)
        generated: list[int] = []
        for token, logprob in zip(out.generated_ids, out.generated_log_probs, strict=True):
            if token in table.eog:
                scan.finish = "stop"
                break
            generated.append(int(token))
            if scan.add(TokenLogprob(token=table.text(token), logprob=float(logprob)), table.pieces[token]):
                break
        result = scan.result(len(ids))
        if request.top_logprobs > 0 and result.tokens:
            at = [0] + [i for i, t in enumerate(result.tokens) if i and t.token.strip().isdigit()]
            tops = self._alternatives([ids + generated[:i] for i in at], request.top_logprobs)
            for i, ranked in zip(at, tops, strict=True):
                result.tokens[i] = result.tokens[i].model_copy(update={"top": self._top(ranked, request.top_logprobs)})
            result.notes["top_logprobs_at"] = TOP_AT
        return result

    def _alternatives(self, prefixes: list[list[int]], k: int) -> list[list[tuple[int, float]]]:
        """The ``k`` most probable next tokens after each prefix, as (token id, log-probability), most probable
        first (one-step beam searches, run together)."""
        pipeline, _, _ = self._load()
        width = max(k, 2)  # GenAI's beam search needs two beams
        config = pipeline.config(max_new_tokens=1, num_beams=width, num_return_sequences=width, logprobs=1)
        outputs = pipeline.run([(p, config) for p in prefixes])
        return [[(int(o.generated_ids[0]), float(o.score)) for o in outs if o.generated_ids][:k] for outs in outputs]

    def _top(self, ranked: list[tuple[int, float]], k: int) -> list[TopLogprob]:
        table = self._load()[2]
        return [TopLogprob(token=table.text(t), logprob=lp) for t, lp in ranked[:k]]

    def _choose(self, ids: list[int], choices: list[str], top_k: int) -> Generated:
        """Score every choice's token sequence after the prompt; the most probable one is the output. Each choice
        is generated under a grammar that admits only its text (GenAI's structured output), whose reported
        log-probabilities stay the unconstrained ones (as llama.cpp's grammar keeps them): their sum is its
        log-probability when the tokens are the choice's own; a choice the model spelled in other tokens is left
        out (missing, counted)."""
        pipeline, _, table = self._load()
        tokenized: dict[str, list[int]] = {}
        requests = []
        for choice in choices:
            cids = self.tokenize(choice)
            if not cids:
                raise ProviderError(f"choice {choice!r} is empty once tokenized")
            tokenized[choice] = cids
            only = pipeline.only(choice)
            requests.append((ids, pipeline.config(max_new_tokens=len(cids), logprobs=1, structured_output_config=only)))
        scores: dict[str, float] = {}
        firsts: dict[str, float] = {}
        for (choice, cids), outs in zip(tokenized.items(), pipeline.run(requests), strict=True):
            if [int(t) for t in outs[0].generated_ids] == cids:
                scores[choice] = float(sum(outs[0].generated_log_probs))
                firsts[choice] = float(outs[0].generated_log_probs[0])
        if not scores:
            raise ProviderError("OpenVINO GenAI gave no choice a log-probability")
        best = max(scores, key=lambda c: scores[c])
        ranked = self._alternatives([ids], top_k)[0] if top_k > 0 else []
        head = TokenLogprob(token=table.text(tokenized[best][0]), logprob=firsts[best], top=self._top(ranked, top_k))
        return Generated(
            text=best,
            tokens=[head],
            n_prompt=len(ids),
            finish_reason="stop",
            choice_logprobs=scores,
            notes={"choices_missing": len(choices) - len(scores)},
        )
