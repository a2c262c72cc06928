"""What bounds the embedded model's time: its prompt-evaluation and generation rates on this machine.

The embedded default (SmolLM2-135M Q4_1 on xllamacpp, madrag's settings: one context, the machine's cores,
``n_batch`` 512, flash attention off) evaluates prompts of 256 to 2048 tokens and generates 128 tokens; the rates
come from llama.cpp's own timings (prompt tokens per second of evaluation, generated tokens per second).

With ``--run-dir`` the run's own requests (their recorded prompt and completion tokens) are priced at these rates:
the time the model alone needs for that run, whatever the rest of madrag does (``madrag demo`` writes
``runs/demo``). A request's prompt tokens that its record says were reused from the context's cache (the aligned
prefix an earlier request of the same context evaluated) are not priced; a record that does not say (made before
the embedded runtimes reported it) is priced in full and counted.

What-ifs, each measured in the same run:

* ``--formats f16,q8_0``: the same weights dequantised (exact) to F16, or requantised to Q8_0, written to a
  temporary GGUF (needs the ``gguf`` package, in ``.[dev]``); does the weight format bound the rate?
* ``--torch``: the same architecture (read from the GGUF header) in PyTorch with random weights (speed only, the
  scores would not be the model's): prompt rate with SDPA attention, and generation with its KV cache.

Usage (from the repository root):
    python -m bench.embedded_prompt_rate [--run-dir runs/demo] [--formats f16,q8_0] [--torch]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from bench.embedded_slots import hardware

from madrag.providers.embedded import read_gguf_metadata
from madrag.providers.models import smollm2_gguf_path
from madrag.providers.xllama import XLlamaEngine

LENGTHS = (256, 512, 1024, 2048)
GENERATED = 128
N_BATCH = 512  # madrag's (LlamaCppProvider's n_batch)


def llama_rates(path: Path, threads: int, reps: int) -> tuple[dict[int, float], float]:
    """Prompt tokens/s per prompt length (best of ``reps``) and generated tokens/s, by llama.cpp's timings, on the
    in-process server madrag's xllamacpp engine loads (its settings, all ``threads`` for one context)."""
    engine = XLlamaEngine(path, n_ctx=8192, n_threads=threads, n_batch=N_BATCH, n_threads_batch=threads)
    server, _ = engine._load()
    rng = random.Random(0)
    rates: dict[int, float] = {}
    for n in LENGTHS:
        ids = [rng.randrange(1000, 40000) for _ in range(n)]
        body = {"prompt": ids, "max_tokens": 1, "temperature": 0.0, "cache_prompt": False}
        rates[n] = max(float(server.handle_completions(body)["timings"]["prompt_per_second"]) for _ in range(reps))
    ids = [rng.randrange(1000, 40000) for _ in range(500)]
    body = {"prompt": ids, "max_tokens": GENERATED, "temperature": 0.0, "cache_prompt": False, "ignore_eos": True}
    generation = float(server.handle_completions(body)["timings"]["predicted_per_second"])
    del server
    engine.close()
    return rates, generation


def convert(src: Path, dst: Path, kind: str) -> None:
    """``src``'s tensors dequantised to F16 (exact for Q4_1's values) or requantised to Q8_0, metadata kept."""
    import gguf
    import numpy as np
    from gguf.quants import dequantize, quantize

    reader = gguf.GGUFReader(src)
    writer = gguf.GGUFWriter(dst, reader.fields["general.architecture"].contents())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        kind_of = field.types[0]
        sub = field.types[-1] if kind_of == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), kind_of, sub_type=sub)
    plain = (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
    for t in reader.tensors:
        if t.tensor_type in plain:
            writer.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
            continue
        values = dequantize(t.data, t.tensor_type).reshape([int(x) for x in reversed(t.shape.tolist())])
        if kind == "f16":
            writer.add_tensor(t.name, values.astype(np.float16))
        else:
            q8 = quantize(values.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(t.name, q8, raw_shape=q8.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def torch_rates(path: Path, threads: int) -> tuple[dict[int, float], float]:
    """The same architecture in PyTorch, random weights: prompt tokens/s per length, generated tokens/s."""
    import warnings

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    warnings.filterwarnings("ignore", category=FutureWarning)  # past_key_values' rename, not this bench's concern

    meta = read_gguf_metadata(path, ("llama.", "tokenizer.ggml.tokens"))
    vocab = len(meta["tokenizer.ggml.tokens"])
    torch.set_num_threads(threads)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=meta["llama.embedding_length"],
        intermediate_size=meta["llama.feed_forward_length"],
        num_hidden_layers=meta["llama.block_count"],
        num_attention_heads=meta["llama.attention.head_count"],
        num_key_value_heads=meta["llama.attention.head_count_kv"],
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    model = LlamaForCausalLM(config).eval()
    rates: dict[int, float] = {}
    with torch.inference_mode():
        model(torch.randint(1000, 40000, (1, 64)), logits_to_keep=1)
        for n in LENGTHS:
            ids = torch.randint(1000, 40000, (1, n))
            start = time.perf_counter()
            model(ids, logits_to_keep=1)
            rates[n] = n / (time.perf_counter() - start)
        out = model(torch.randint(1000, 40000, (1, 500)), use_cache=True, logits_to_keep=1)
        cache, token = out.past_key_values, torch.tensor([[5]])
        start = time.perf_counter()
        for _ in range(GENERATED):
            cache = model(token, past_key_values=cache, use_cache=True).past_key_values
        generation = GENERATED / (time.perf_counter() - start)
    return rates, generation


def rate_at(rates: dict[int, float], n: float) -> float:
    """The prompt rate at length ``n``, linear between the measured lengths (the nearest end beyond them)."""
    points = sorted(rates)
    if n <= points[0]:
        return rates[points[0]]
    for lo, hi in itertools.pairwise(points):
        if n <= hi:
            return rates[lo] + (rates[hi] - rates[lo]) * (n - lo) / (hi - lo)
    return rates[points[-1]]


def run_requests(run_dir: Path) -> list[tuple[float, float]]:
    """(prompt tokens evaluated, completion tokens) per request of the run's records (a record's sums split evenly
    over its requests; its reused prompt tokens left out where it says); records without usage are left out, and
    counted."""
    from madrag.store import RunStore

    store = RunStore(run_dir / "store.sqlite", read_only=True)
    out: list[tuple[float, float]] = []
    unknown = unsaid = reused = 0
    for record in store.records():
        usage, n = record.usage, max(1, record.requests)
        if usage.prompt_tokens is None or usage.completion_tokens is None:
            unknown += 1
            continue
        cached = usage.cached_prompt_tokens
        if cached is None:
            unsaid += 1
            cached = 0
        reused += cached
        out.extend([((usage.prompt_tokens - cached) / n, usage.completion_tokens / n)] * n)
    store.close()
    print(f"  prompt tokens reused from the context's cache (not priced): {reused:,}")
    if unsaid:
        print(f"  {unsaid} records do not say how many prompt tokens were reused: priced in full")
    if unknown:
        print(f"  {unknown} records without token counts left out")
    return out


def model_time(requests: list[tuple[float, float]], rates: dict[int, float], generation: float) -> float:
    """Seconds to evaluate every request's prompt and generate its completion at these rates."""
    return sum(p / rate_at(rates, p) + c / generation for p, c in requests)


def report(label: str, rates: dict[int, float], generation: float, requests: list[tuple[float, float]]) -> None:
    prompt = ", ".join(f"{n}: {r:.0f}" for n, r in rates.items())
    line = f"{label:<34} prompt tok/s by length {{{prompt}}}; generation {generation:.0f} tok/s"
    if requests:
        line += f"; the run's model time {model_time(requests, rates, generation):.0f} s"
    print(line, flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run-dir", type=Path, help="a run of the embedded model to price at these rates")
    p.add_argument("--formats", default="", help="what-if weight formats, comma-separated: f16, q8_0")
    p.add_argument("--torch", action="store_true", help="also the same architecture in PyTorch (random weights)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--reps", type=int, default=2, help="prompt evaluations per length (the best is kept)")
    args = p.parse_args()
    model = smollm2_gguf_path()
    print("embedded model prompt and generation rates")
    print(f"hardware: {hardware()}")
    print(f"model: {model.name}; {args.threads} threads, n_batch {N_BATCH}, flash attention off; prompts of random ids")
    requests: list[tuple[float, float]] = []
    if args.run_dir:
        requests = run_requests(args.run_dir)
        prompt, done = sum(r[0] for r in requests), sum(r[1] for r in requests)
        print(
            f"run {args.run_dir}: {len(requests)} requests, "
            f"{prompt:,.0f} prompt tokens to evaluate, {done:,.0f} generated"
        )
    report(f"xllamacpp {model.name}", *llama_rates(model, args.threads, args.reps), requests)
    for kind in [k for k in args.formats.split(",") if k]:
        if kind not in ("f16", "q8_0"):
            sys.exit(f"unknown format {kind!r}: f16 or q8_0")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"model-{kind}.gguf"
            convert(model, path, kind)
            report(f"xllamacpp, weights as {kind.upper()}", *llama_rates(path, args.threads, args.reps), requests)
    if args.torch:
        report("torch (same shapes, random weights)", *torch_rates(model, args.threads), requests)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
