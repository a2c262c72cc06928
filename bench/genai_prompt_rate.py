"""Does madrag add overhead around OpenVINO GenAI? Prompt rates side by side in one run, alternately.

Three runtimes evaluate the same prompts, one rep after the other (A B C A B C ...; each rep a fresh random text,
the same for all three, so no prefix cache holds it), each asked for one new token:

* ``genai gguf``: OpenVINO GenAI's own ``LLMPipeline`` on the shipped GGUF file, as its documentation loads one
  (GenAI's defaults on this CPU);
* ``genai f16 ir``: GenAI's ``ContinuousBatchingPipeline`` on the model madrag's runtime runs (the GGUF's F16 copy
  converted once, with madrag's compile settings and scheduler), called directly with the token ids;
* ``madrag``: ``LlamaCppProvider(runtime="openvino-genai")`` answering a ``ChatRequest`` as a debater's first call
  asks it (``logprobs``, ``top_logprobs=5``: the first token's alternatives are one more, cached, request), with
  everything madrag does around it (the chat template, tokenizing, the records' fields).

A thread beside them wakes every 10 ms: the longest it waited during madrag's calls is how long a pipeline step
held Python's GIL (the event loop of a run or of the web app waits as long).

The prompt rate is the prompt tokens over the wall time of the call; the medians of ``--reps`` and the median of the
paired ratios (madrag over each bare pipeline, rep by rep) are printed, each rep's figure beside them. Every
thread of the process is used (``--threads``, default this process's cores), as the embedded default runs.

Usage (from the repository root; needs ``pip install 'madrag[openvino]'``):
    python -m bench.genai_prompt_rate [--lengths 1024,2048] [--reps 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import threading
import time
from typing import Any

import numpy as np

from madrag.providers.base import ChatRequest, Message
from madrag.providers.genai import STEP_TOKENS, SharedPipeline, compile_properties
from madrag.providers.genai_model import converted_model
from madrag.providers.llamacpp import LlamaCppProvider, usable_cores
from madrag.providers.models import smollm2_gguf_path

WORDS = "the a essay student wrote rain bus late waited teacher class story reason because however".split()


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(100)) for _ in range(n_words))


def _sized_request(engine: Any, rng: random.Random, tokens: int) -> tuple[ChatRequest, list[int]]:
    """A debater-like request whose rendered prompt is about ``tokens`` long, and its token ids."""
    words = tokens // 3
    while True:
        request = ChatRequest(
            messages=[Message(role="user", content=_text(rng, words))], max_tokens=1, logprobs=True, top_logprobs=5
        )
        ids: list[int] = engine.tokenize(engine.render_prompt(request))
        if len(ids) >= tokens * 0.97:
            return request, ids
        words = int(words * tokens / len(ids)) + 1


class Ticker:
    """A thread that sleeps 10 ms at a time and keeps the longest gap between its wake-ups while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.longest = 0.0
        threading.Thread(target=self._tick, daemon=True).start()

    def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            time.sleep(0.01)
            now = time.perf_counter()
            if self.on:
                self.longest = max(self.longest, now - last)
            last = now


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", default="1024,2048", help="prompt lengths in tokens, comma-separated")
    p.add_argument("--reps", type=int, default=3, help="alternating reps per length")
    p.add_argument("--threads", type=int, default=usable_cores(), help="threads of every runtime")
    args = p.parse_args()
    import openvino as ov
    import openvino_genai as genai

    gguf = smollm2_gguf_path()
    folder = converted_model(gguf)
    provider = LlamaCppProvider(runtime="openvino-genai", slots=1, n_threads=args.threads)
    engine = provider._engines[0]
    own = genai.LLMPipeline(str(gguf), "CPU", INFERENCE_NUM_THREADS=args.threads)
    ir = SharedPipeline(folder, args.threads, cache_gb=1, batched_tokens=STEP_TOKENS)
    print(f"model {gguf.name}; converted {folder.name}; {args.threads} threads; openvino-genai {genai.__version__}")
    print(f"compile settings of the F16 IR and madrag: {compile_properties(args.threads)}")

    def bare_gguf(ids: list[int]) -> None:
        config = genai.GenerationConfig(max_new_tokens=1, apply_chat_template=False)
        own.generate(ov.Tensor(np.array([ids], dtype=np.int64)), config)

    def bare_ir(ids: list[int]) -> None:
        ir.run([(ids, ir.config(max_new_tokens=1, logprobs=1))])

    def through_madrag(request: ChatRequest) -> int:
        response = asyncio.run(provider.complete(request))
        assert response.tokens and len(response.tokens[0].top) == 5
        return int(response.usage.prompt_tokens or 0)

    ticker = Ticker()
    rng = random.Random(7)
    through_madrag(_sized_request(engine, rng, 64)[0])  # loads and warms every runtime once
    bare_gguf([1, 2, 3])
    bare_ir([1, 2, 3])
    for length in [int(x) for x in args.lengths.split(",")]:
        rates: dict[str, list[float]] = {"genai gguf": [], "genai f16 ir": [], "madrag": []}
        for _ in range(args.reps):
            request, ids = _sized_request(engine, rng, length)
            started = time.perf_counter()
            bare_gguf(ids)
            rates["genai gguf"].append(len(ids) / (time.perf_counter() - started))
            started = time.perf_counter()
            bare_ir(ids)
            rates["genai f16 ir"].append(len(ids) / (time.perf_counter() - started))
            started = time.perf_counter()
            ticker.on = True
            assert through_madrag(request) == len(ids)
            ticker.on = False
            rates["madrag"].append(len(ids) / (time.perf_counter() - started))
        print(f"\nprompt of ~{length} tokens, {args.reps} reps (tokens per second of wall clock)")
        for name, values in rates.items():
            each = " ".join(f"{v:.0f}" for v in values)
            print(f"  {name:<13} median {statistics.median(values):6.0f}   [{each}]")
        for bare in ("genai gguf", "genai f16 ir"):
            paired = [m / b for m, b in zip(rates["madrag"], rates[bare], strict=True)]
            each = " ".join(f"{r:.2f}" for r in paired)
            print(f"  madrag / {bare:<13} median {statistics.median(paired):.2f}   [{each}]")
    print(f"\nlongest wait of another thread during madrag's calls: {ticker.longest:.2f} s (steps of {STEP_TOKENS})")
    asyncio.run(provider.aclose())


if __name__ == "__main__":
    main()
