"""What bounds the embedded model's time: its prompt-evaluation and generation rates on this machine.

The embedded default is measured as madrag builds it (``LlamaCppProvider``: SmolLM2-135M Q4_1 on xllamacpp,
``slots`` contexts, each with its share of the cores for generation and prompt batches, ``n_batch`` 512, flash
attention off): every slot evaluates a prompt of 256 to 2048 tokens at once, as the demo keeps them busy, and
its rate is the prompt tokens of all of them over the wall time; then each generates 128 tokens. Beside it, one
context with every core (a lone request's rate). The prompt rates are the best of ``--reps`` evaluations.

With ``--run-dir`` the run's own requests (their recorded prompt and completion tokens) are priced at these rates:
the time the model alone needs for that run, whatever the rest of madrag does (``madrag demo`` writes
``runs/demo``). A request's prompt tokens that its record says were reused from the context's cache (the aligned
prefix an earlier request of the same context evaluated) are not priced; a record that does not say (made before
the embedded runtimes reported it) is priced in full and counted.

What-ifs, each measured in the same run:

* ``--torch``: the same architecture (read from the GGUF header) in PyTorch with random weights (speed only, the
  scores would not be the model's), on every core: prompt rate with SDPA attention, and generation with its KV
  cache; then each embedded rate as a fraction of torch's at each length, side by side;
* ``--per-core``: one thread each, llama.cpp's and torch's prompt tokens per second of the process's CPU time: the
  kernels' own speed, which other work on a shared machine does not change (a loaded machine's wall-clock rates
  do move);
* ``--formats f16,q8_0``: the same weights dequantised to F16, or requantised to Q8_0, written to a temporary
  GGUF (needs the ``gguf`` package, in ``.[dev]``); does the weight format bound the rate? With ``--per-core``
  also per CPU-second, each format beside the shipped Q4_1 (what a noisy machine's wall clock cannot show);

``--openvino`` (needs ``pip install openvino-genai``, see bench/openvino_runtime.py) measures instead xllamacpp and
OpenVINO on the same GGUF, alternately (A B C A B C: each rep's prompt is the same random ids for every runtime;
the medians and the medians of the paired ratios are printed, each rep's figure beside them): one xllamacpp
context with every core, OpenVINO GenAI's ``LLMPipeline``, and the IR GenAI converts the GGUF to, run by the
OpenVINO runtime with its logits (what a runtime recording top-k alternatives would run). Prompt rates at
``--lengths``, then generation (``--generated`` tokens after a 256-token prompt, twice each). With ``--per-core``
instead: one thread each, prompt tokens per CPU-second; with ``--at-once`` instead: ``slots`` prompts of 1,024
tokens at once, the embedded default against GenAI's continuous batching. ``--demo-totals`` prices the demo's
recorded requests (their totals split evenly) where no ``--run-dir`` is at hand.

Usage (from the repository root):
    python -m bench.embedded_prompt_rate [--run-dir runs/demo] [--torch] [--per-core] [--formats f16,q8_0]
    python -m bench.embedded_prompt_rate --openvino [--lengths 1024,2048] [--reps 2] [--per-core | --at-once]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import openvino_runtime as ov
from bench.embedded_slots import hardware

from madrag.providers.builtin import LlamaCppOptions
from madrag.providers.embedded import read_gguf_metadata
from madrag.providers.genai_model import dequantize_gguf
from madrag.providers.llamacpp import usable_cores
from madrag.providers.models import smollm2_gguf_path
from madrag.providers.xllama import XLlamaEngine

LENGTHS = (256, 512, 1024, 2048)
GENERATED = 128
N_BATCH = 512  # madrag's (LlamaCppProvider's n_batch)
# madrag demo's requests as recorded (docs/results/embedded-prompt-rate-demo.txt, the "after" run): 32 requests of
# 24 calls, 39,262 prompt tokens of which 12,288 were reused from the context's cache, 3,560 generated
DEMO_REQUESTS, DEMO_PROMPT, DEMO_GENERATED = 32, 26_974, 3_560


def _random_ids(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(1000, 40000) for _ in range(n)]


def _at_once(servers: list[Any], bodies: list[dict[str, Any]]) -> tuple[float, list[dict[str, Any]]]:
    """Wall seconds for every server to answer its body, all at once (one thread each), and the answers."""
    out: list[dict[str, Any]] = [{} for _ in servers]

    def answer(i: int) -> None:
        out[i] = servers[i].handle_completions(bodies[i])

    threads = [threading.Thread(target=answer, args=(i,)) for i in range(len(servers))]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start, out


def llama_rates(path: Path, threads: int, reps: int, contexts: int = 1) -> tuple[dict[int, float], float]:
    """Prompt tokens/s per prompt length (best of ``reps``; ``contexts`` prompts evaluated at once, their tokens
    over the wall time) and generated tokens/s (the contexts' together, by llama.cpp's timings), on the in-process
    servers madrag's xllamacpp engine loads, each with ``threads`` for generation and for prompt batches."""
    engines = [XLlamaEngine(path, 8192, threads, N_BATCH, threads) for _ in range(contexts)]
    servers = [engine._load()[0] for engine in engines]
    rng = random.Random(0)
    rates: dict[int, float] = {}
    for n in LENGTHS:
        bodies = [
            {"prompt": _random_ids(rng, n), "max_tokens": 1, "temperature": 0.0, "cache_prompt": False} for _ in servers
        ]
        rates[n] = max(contexts * n / _at_once(servers, bodies)[0] for _ in range(reps))
    bodies = [
        {"prompt": _random_ids(rng, 500), "max_tokens": GENERATED, "temperature": 0.0, "cache_prompt": False}
        for _ in servers
    ]
    answers = _at_once(servers, [{**b, "ignore_eos": True} for b in bodies])[1]
    generation = sum(float(a["timings"]["predicted_per_second"]) for a in answers)
    del servers
    for engine in engines:
        engine.close()
    return rates, generation


def per_core_llama(path: Path) -> dict[int, float]:
    """One context with one thread: prompt tokens per second of this process's CPU time, best of 2."""
    engine = XLlamaEngine(path, 8192, 1, N_BATCH, 1)
    server, _ = engine._load()
    rng = random.Random(0)
    rates: dict[int, float] = {}
    for n in LENGTHS:
        body = {"prompt": _random_ids(rng, n), "max_tokens": 1, "temperature": 0.0, "cache_prompt": False}
        best = 0.0
        for _ in range(2):
            start = time.process_time()
            server.handle_completions(body)
            best = max(best, n / (time.process_time() - start))
        rates[n] = best
    del server
    engine.close()
    return rates


def convert(src: Path, dst: Path, kind: str) -> None:
    """``src``'s tensors dequantised to F16 (exact for Q4_1's values) or requantised to Q8_0, metadata kept: the
    conversion madrag's OpenVINO GenAI runtime makes (its F16 copy)."""
    dequantize_gguf(src, dst, kind)


def torch_model(path: Path, threads: int) -> Any:
    """The GGUF's architecture in PyTorch, random weights, warmed up, on ``threads`` threads."""
    import warnings

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    warnings.filterwarnings("ignore", category=FutureWarning)  # past_key_values' rename, not this bench's concern

    meta = read_gguf_metadata(path, ("llama.", "tokenizer.ggml.tokens"))
    vocab = len(meta["tokenizer.ggml.tokens"])
    torch.set_num_threads(threads)
    config = LlamaConfig(  # type: ignore[call-arg]
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
    model: Any = LlamaForCausalLM(config)
    model.eval()
    with torch.inference_mode():
        model(torch.randint(1000, 40000, (1, 64)), logits_to_keep=1)
    return model


def torch_prompt(model: Any, n: int, clock: Any = time.perf_counter) -> float:
    """Prompt tokens per second of ``clock`` for one random prompt of ``n`` tokens."""
    import torch

    with torch.inference_mode():
        ids = torch.randint(1000, 40000, (1, n))
        start = clock()
        model(ids, logits_to_keep=1)
        return float(n / (clock() - start))


def torch_rates(path: Path, threads: int, reps: int) -> tuple[dict[int, float], float]:
    """The same architecture in PyTorch, random weights: prompt tokens/s per length (best of ``reps``),
    generated tokens/s."""
    import torch

    model = torch_model(path, threads)
    rates = {n: max(torch_prompt(model, n) for _ in range(reps)) for n in LENGTHS}
    with torch.inference_mode():
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
        usage, n = record.usage, max(1, record.answers)
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


def ratios(label: str, rates: dict[int, float], torch: dict[int, float]) -> None:
    shown = ", ".join(f"{n}: {rates[n] / torch[n]:.2f}" for n in LENGTHS)
    print(f"  {label:<32} / torch's, by length {{{shown}}}", flush=True)


def per_core(model: Path, formats: list[str]) -> None:
    """llama.cpp's and torch's prompt tokens per CPU-second on one thread each, and their ratio; then llama.cpp's
    on the same weights in each of ``formats`` and its ratio to the shipped Q4_1's."""
    llama = per_core_llama(model)
    for kind in formats:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"model-{kind}.gguf"
            convert(model, path, kind)
            rates = per_core_llama(path)
        shown = ", ".join(f"{n}: {r:.0f} ({r / llama[n]:.2f}x)" for n, r in rates.items())
        print(f"{'llama.cpp, 1 thread, ' + kind.upper():<34} per CPU-second (/ Q4_1's) {{{shown}}}", flush=True)
    net = torch_model(model, 1)
    torch = {n: max(torch_prompt(net, n, time.process_time) for _ in range(2)) for n in LENGTHS}
    for label, rates in (("llama.cpp, 1 thread", llama), ("torch, 1 thread", torch)):
        shown = ", ".join(f"{n}: {r:.0f}" for n, r in rates.items())
        print(f"{label:<34} prompt tokens per CPU-second by length {{{shown}}}", flush=True)
    ratios("llama.cpp per core", llama, torch)


def _llama_seconds(server: Any, clock: Any = time.perf_counter) -> Any:
    def seconds(ids: list[int]) -> float:
        start = clock()
        server.handle_completions({"prompt": ids, "max_tokens": 1, "temperature": 0.0, "cache_prompt": False})
        return float(clock() - start)

    return seconds


def _median_rates(samples: dict[int, list[float]]) -> dict[int, float]:
    return {n: ov.median(v) for n, v in samples.items()}


def _ov_model(model: Path, tmp: Path, weights: str) -> Path:
    """The GGUF OpenVINO reads: madrag's, or its weights converted (xllamacpp keeps madrag's)."""
    if not weights:
        return model
    converted = tmp / f"{model.stem}-{weights}.gguf"
    convert(model, converted, weights)
    print(f"OpenVINO reads {converted.name} (weights converted); xllamacpp {model.name}", flush=True)
    return converted


def openvino_side(model: Path, args: argparse.Namespace, slots: int, requests: list[tuple[float, float]]) -> None:
    """xllamacpp and OpenVINO (GenAI's pipeline; the converted IR with its logits) on the same GGUF, measured
    alternately: prompt rates by length, generation, several requests at once, one thread per CPU-second."""
    lengths = tuple(int(n) for n in args.lengths.split(",") if n)
    rng = random.Random(0)
    engine = XLlamaEngine(model, 8192, args.threads, N_BATCH, args.threads)
    server = engine._load()[0]
    with ov.Workdir() as tmp:
        ov_path = _ov_model(model, tmp, args.ov_weights)
        xml = ov.convert_ir(ov_path, tmp)
        if args.per_core or args.at_once:  # instead of the wall-clock rates
            if args.per_core:
                _per_core_side((model, ov_path), xml, args, rng, lengths, requests)
            if args.at_once:
                _at_once_side((model, ov_path), args, slots, rng)
            return
        genai = ov.GenAI(ov_path, args.threads, args.kv_precision)
        logits = ov.Logits(xml, args.threads, args.kv_precision)
        runners = {"xllamacpp": _llama_seconds(server), "genai": genai.prompt_seconds, "logits": logits.prompt_seconds}
        for seconds in runners.values():  # warm up: first-inference compilation is not the rate
            seconds(_random_ids(rng, 64))
        labels = {
            "xllamacpp": f"xllamacpp, one context, {args.threads} thr",
            "genai": f"OpenVINO GenAI, {args.threads} thr",
            "logits": f"OpenVINO IR + logits, {args.threads} thr",
        }
        wall = ov.alternate(runners, lengths, args.reps, rng) if lengths else {}
        for name, samples in wall.items():
            ov.show(labels[name], samples, "prompt tok/s")
        for name in ("genai", "logits") if wall else ():
            ov.show_ratios(labels[name], wall[name], wall["xllamacpp"])
        if args.generated:
            generation = _generation_side(server, genai, logits, args.generated, rng)
            for name, rates in generation.items():
                each = " ".join(f"{x:.0f}" for x in rates)
                line = f"{labels[name]:<34} generation {ov.median(rates):.0f} tok/s [{each}]"
                if requests and wall:
                    seconds = model_time(requests, _median_rates(wall[name]), ov.median(rates))
                    line += f"; the run's model time {seconds:.0f} s"
                print(line, flush=True)
    del server
    engine.close()


def _generation_side(server: Any, genai: Any, logits: Any, n: int, rng: random.Random) -> dict[str, list[float]]:
    """Generated tokens/s of each runtime after one 256-token prompt, twice each, alternately."""
    ids = _random_ids(rng, 256)
    rates: dict[str, list[float]] = {"xllamacpp": [], "genai": [], "logits": []}
    body = {"prompt": ids, "max_tokens": n, "temperature": 0.0, "ignore_eos": True, "cache_prompt": False}
    for _ in range(2):
        rates["xllamacpp"].append(float(server.handle_completions(body)["timings"]["predicted_per_second"]))
        rates["genai"].append(genai.generation_rate(ids, n))
        rates["logits"].append(logits.generation_rate(ids, n))
    return rates


def _at_once_side(models: tuple[Path, Path], args: argparse.Namespace, slots: int, rng: random.Random) -> None:
    """``slots`` prompts of 1024 tokens at once: madrag's embedded default (a context per slot, the cores shared)
    against GenAI's continuous batching on every core, alternately."""
    share = max(args.threads // slots, 1)
    engines = [XLlamaEngine(models[0], 8192, share, N_BATCH, share) for _ in range(slots)]
    servers = [e._load()[0] for e in engines]
    batched = ov.Batched(models[1], args.threads, args.kv_precision)
    n = 1024
    rates: dict[str, list[float]] = {"default": [], "batched": []}
    batched.seconds([_random_ids(rng, 64)], 1)
    for _ in range(args.reps):
        prompts = [_random_ids(rng, n) for _ in range(slots)]
        bodies = [{"prompt": p, "max_tokens": 1, "temperature": 0.0, "cache_prompt": False} for p in prompts]
        rates["default"].append(slots * n / _at_once(servers, bodies)[0])
        rates["batched"].append(slots * n / batched.seconds(prompts, 1))
    labels = {"default": f"embedded default: {slots} x {share} thr", "batched": "GenAI continuous batching"}
    for key, label in labels.items():
        shown = " ".join(f"{x:.0f}" for x in rates[key])
        print(f"{label:<34} {slots} prompts of {n} at once: {ov.median(rates[key]):.0f} tok/s [{shown}]", flush=True)
    del servers, batched
    for e in engines:
        e.close()


def _per_core_side(
    models: tuple[Path, Path],
    xml: Path,
    args: argparse.Namespace,
    rng: random.Random,
    lengths: Any,
    requests: list[tuple[float, float]],
) -> None:
    """One thread each: prompt tokens per second of this process's CPU time (what load does not change)."""
    engine = XLlamaEngine(models[0], 8192, 1, N_BATCH, 1)
    server = engine._load()[0]
    genai = ov.GenAI(models[1], 1, args.kv_precision)
    logits = ov.Logits(xml, 1, args.kv_precision)
    runners = {
        "xllamacpp": _llama_seconds(server, time.process_time),
        "genai": lambda ids: genai.prompt_seconds(ids, time.process_time),
        "logits": lambda ids: logits.prompt_seconds(ids, time.process_time),
    }
    for seconds in runners.values():
        seconds(_random_ids(rng, 64))
    cpu = ov.alternate(runners, lengths, args.reps, rng) if lengths else {}
    for name, samples in cpu.items():
        ov.show(f"{name}, 1 thread", samples, "prompt tok per CPU-s")
    for name in ("genai", "logits") if cpu else ():
        ov.show_ratios(f"{name}, 1 thread", cpu[name], cpu["xllamacpp"])
    if args.generated:
        generation = _per_core_generation(server, genai, logits, args, rng)
        for name, samples in cpu.items() if requests else ():
            seconds = model_time(requests, _median_rates(samples), ov.median(generation[name]))
            print(f"{name + ', 1 thread':<34} the run's model time {seconds:.0f} CPU-s", flush=True)
    engine.close()


def _per_core_generation(
    server: Any, genai: Any, logits: Any, args: argparse.Namespace, rng: random.Random
) -> dict[str, list[float]]:
    """One thread each: generated tokens per CPU-second after a 256-token prompt (the CPU time of the prompt and
    ``--generated`` + 1 tokens less that of the prompt and 1 token), alternately."""
    body = {"temperature": 0.0, "ignore_eos": True, "cache_prompt": False}
    runs = {
        "xllamacpp": lambda ids, n: server.handle_completions({**body, "prompt": ids, "max_tokens": n}),
        "genai": genai.complete,
        "logits": logits.greedy,
    }
    rates: dict[str, list[float]] = {name: [] for name in runs}
    n = args.generated
    for _ in range(args.reps):
        ids = _random_ids(rng, 256)
        for name, run in runs.items():
            start = time.process_time()
            run(ids, 1)
            prompt = time.process_time() - start
            start = time.process_time()
            run(ids, n + 1)
            rates[name].append(n / (time.process_time() - start - prompt))
    for name, values in rates.items():
        each = " ".join(f"{x:.0f}" for x in values)
        print(f"{name + ', 1 thread':<34} generation {ov.median(values):.0f} tok per CPU-s [{each}]", flush=True)
    return rates


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run-dir", type=Path, help="a run of the embedded model to price at these rates")
    p.add_argument("--formats", default="", help="what-if weight formats, comma-separated: f16, q8_0")
    p.add_argument("--torch", action="store_true", help="also the same architecture in PyTorch (random weights)")
    p.add_argument("--per-core", action="store_true", help="also (with --openvino: instead) one thread each, per CPU-s")
    p.add_argument("--threads", type=int, default=usable_cores(), help="the cores (default: this process's)")
    p.add_argument("--reps", type=int, default=2, help="evaluations per length (best kept; --openvino: median)")
    p.add_argument("--openvino", action="store_true", help="instead: xllamacpp and OpenVINO side by side, alternately")
    p.add_argument(
        "--ov-weights",
        default="",
        choices=("", "f16", "q8_0"),
        help="with --openvino: OpenVINO reads the weights as f16 or q8_0",
    )
    p.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="with --openvino: the prompt lengths")
    p.add_argument("--generated", type=int, default=GENERATED, help="with --openvino: tokens generated per rate")
    p.add_argument("--at-once", action="store_true", help="with --openvino: several prompts at once instead")
    p.add_argument("--kv-precision", default="f16", help="with --openvino: OpenVINO's KV cache (f16, u8, f32)")
    p.add_argument("--demo-totals", action="store_true", help="price the recorded demo's totals (no --run-dir)")
    args = p.parse_args()
    model = smollm2_gguf_path()
    slots = LlamaCppOptions().slots
    share = max(args.threads // slots, 1)  # as LlamaCppProvider shares the cores
    print("embedded model prompt and generation rates")
    print(f"hardware: {hardware()}; {args.threads} cores used")
    kept = f"median of {args.reps} alternating reps" if args.openvino else f"best of {args.reps}"
    print(f"model: {model.name}; n_batch {N_BATCH}, flash attention off; prompts of random ids; {kept}")
    requests: list[tuple[float, float]] = []
    if args.run_dir:
        requests = run_requests(args.run_dir)
        prompt, done = sum(r[0] for r in requests), sum(r[1] for r in requests)
        print(
            f"run {args.run_dir}: {len(requests)} requests, "
            f"{prompt:,.0f} prompt tokens to evaluate, {done:,.0f} generated"
        )
    elif args.demo_totals:
        requests = [(DEMO_PROMPT / DEMO_REQUESTS, DEMO_GENERATED / DEMO_REQUESTS)] * DEMO_REQUESTS
        print(
            f"the demo's recorded totals (docs/results/embedded-prompt-rate-demo.txt), split evenly: {DEMO_REQUESTS} "
            f"requests, {DEMO_PROMPT:,} prompt tokens to evaluate, {DEMO_GENERATED:,} generated"
        )
    if args.openvino:
        print(f"OpenVINO KV cache precision {args.kv_precision}")
        openvino_side(model, args, slots, requests)
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return
    default = llama_rates(model, share, args.reps, slots)
    report(f"embedded default: {slots} x {share} thr", *default, requests)
    alone = llama_rates(model, args.threads, args.reps)
    report(f"one context, {args.threads} threads", *alone, requests)
    formats = [k for k in args.formats.split(",") if k]
    for kind in formats:
        if kind not in ("f16", "q8_0"):
            sys.exit(f"unknown format {kind!r}: f16 or q8_0")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"model-{kind}.gguf"
            convert(model, path, kind)
            report(f"one context, weights as {kind.upper()}", *llama_rates(path, args.threads, args.reps), requests)
    if args.torch:
        torch = torch_rates(model, args.threads, args.reps)
        report(f"torch, {args.threads} threads (random w.)", *torch, requests)
        ratios("embedded default", default[0], torch[0])
        ratios("one context", alone[0], torch[0])
    if args.per_core:
        per_core(model, formats)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
