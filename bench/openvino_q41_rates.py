"""One thread each, per CPU-second, alternately: xllamacpp on the shipped Q4_1 GGUF against the OpenVINO IR +
logits path on (a) GenAI's conversion of the same GGUF with its zero points repaired (``bench.openvino_q41``) and
(b) an F16 copy of the weights (what the prototype runtime ran). Prompt tokens per CPU-second at ``--length``
(OpenVINO's as one call and, as the prototype runtime evaluated prompts, in aligned 512-token chunks) and generated
tokens per CPU-second after a 256-token prompt, then the demo's recorded totals priced at these rates (as
``bench.embedded_prompt_rate --demo-totals`` prices them: split evenly, each prompt at the ``--length`` rate).

Each rep runs every runtime back to back on the same random token ids (A B C A B C); the ratios to xllamacpp are
the medians of each rep's ratio. What each compiled OpenVINO model's FullyConnected layers read is printed (the
weights' element type is what a decode step streams), with the resident memory each compiled model added (rough:
the process's resident size before and after compiling it).

Usage (from the repository root; needs ``pip install openvino-genai``):
    python -m bench.openvino_q41_rates [--length 1024] [--generated 32] [--reps 2] [--dynamic-quantization N]
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import openvino_q41 as q41
from bench import openvino_runtime as ov
from bench.embedded_prompt_rate import DEMO_GENERATED, DEMO_PROMPT, DEMO_REQUESTS, N_BATCH, convert, model_time
from bench.openvino_logprobs import runtime_weights

from madrag.providers.models import smollm2_gguf_path
from madrag.providers.xllama import XLlamaEngine

CHUNK = 512  # the prototype runtime's aligned prompt chunks
LLAMA = "xllamacpp Q4_1"
REPAIRED = "OpenVINO Q4_1 repaired"
COPY = "OpenVINO F16 copy"


def _resident_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _compiled(xml: Path, properties: dict[str, Any], transform: Any = None) -> ov.Logits:
    before = _resident_mb()
    logits = ov.Logits(xml, 1, "f16", properties, transform)
    print(f"  {xml.parent.name}: {runtime_weights(logits)}; +{_resident_mb() - before:.0f} MB resident", flush=True)
    return logits


def _chunked(logits: ov.Logits) -> Callable[[list[int], int], None]:
    """A prompt evaluated in aligned ``CHUNK``-token pieces, then one step's log-softmax (the prototype's way)."""

    def run(ids: list[int], n: int) -> None:
        del n
        for start in range(0, len(ids), CHUNK):
            row = logits.feed(ids[start : start + CHUNK], reset=start == 0)[-1]
        ov.log_softmax(row)

    return run


def _runners(model: Path, tmp: Path, properties: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """(generation runs: name -> run(ids, n tokens), extra prompt-only runs, the xllamacpp engine), one thread each."""
    engine = XLlamaEngine(model, 8192, 1, N_BATCH, 1)
    server = engine._load()[0]
    body = {"temperature": 0.0, "ignore_eos": True, "cache_prompt": False}

    def llama(ids: list[int], n: int) -> None:
        server.handle_completions({**body, "prompt": ids, "max_tokens": n})

    q_dir, f_dir = tmp / "q4_1-repaired", tmp / "f16-copy"
    q_dir.mkdir()
    f_dir.mkdir()
    f16 = tmp / f"{model.stem}-f16.gguf"
    convert(model, f16, "f16")
    q_xml, f_xml = ov.convert_ir(model, q_dir), ov.convert_ir(f16, f_dir)
    repaired = _compiled(q_xml, properties, lambda m: q41.exact_zero_points(m, model))
    copy = _compiled(f_xml, properties)
    runs = {LLAMA: llama, REPAIRED: repaired.greedy, COPY: copy.greedy}
    chunked = {f"{REPAIRED}, {CHUNK}-token chunks": _chunked(repaired), f"{COPY}, {CHUNK}-token chunks": _chunked(copy)}
    return runs, chunked, engine


def _cpu(run: Any, ids: list[int], n: int) -> float:
    start = time.process_time()
    run(ids, n)
    return time.process_time() - start


def _each(values: list[float], digits: int = 0) -> str:
    return " ".join(f"{x:.{digits}f}" for x in values)


def _paired(values: list[float], base: list[float]) -> float:
    return ov.median([a / b for a, b in zip(values, base, strict=True)])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--length", type=int, default=1024, help="the prompt length whose rate is measured")
    p.add_argument("--generated", type=int, default=32, help="tokens generated per generation rate")
    p.add_argument("--reps", type=int, default=2, help="alternating reps (medians kept)")
    p.add_argument(
        "--dynamic-quantization",
        type=int,
        default=None,
        help="DYNAMIC_QUANTIZATION_GROUP_SIZE for both OpenVINO models (default: the plugin's)",
    )
    args = p.parse_args()
    properties: dict[str, Any] = {}
    if args.dynamic_quantization is not None:
        properties["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = args.dynamic_quantization
    rng = random.Random(0)
    print(f"load average at start: {_each(list(os.getloadavg()), 2)}", flush=True)
    with ov.Workdir() as tmp:
        runs, chunked, engine = _runners(smollm2_gguf_path(), tmp, properties)
        prompt: dict[str, list[float]] = {name: [] for name in [*runs, *chunked]}
        generation: dict[str, list[float]] = {name: [] for name in runs}
        for run in [*runs.values(), *chunked.values()]:  # warm up: first-inference compilation is not the rate
            _cpu(run, [rng.randrange(1000, 40000) for _ in range(64)], 2)
        for rep in range(args.reps):
            ids = [rng.randrange(1000, 40000) for _ in range(args.length)]
            short = ids[:256]
            for name, run in runs.items():
                prompt[name].append(args.length / _cpu(run, ids, 1))
                first = _cpu(run, short, 1)
                generation[name].append(args.generated / (_cpu(run, short, args.generated + 1) - first))
            for name, run in chunked.items():
                prompt[name].append(args.length / _cpu(run, ids, 1))
            print(f"  rep {rep + 1} done, load average {_each(list(os.getloadavg()), 2)}", flush=True)
        engine.close()
    requests = [(DEMO_PROMPT / DEMO_REQUESTS, DEMO_GENERATED / DEMO_REQUESTS)] * DEMO_REQUESTS
    print(
        f"the demo's recorded totals, split evenly: {DEMO_REQUESTS} requests, {DEMO_PROMPT:,} prompt tokens to "
        f"evaluate, {DEMO_GENERATED:,} generated; one thread each, per CPU-second, {args.reps} alternating reps"
    )
    base_p, base_g = prompt[LLAMA], generation[LLAMA]
    base_time = model_time(requests, {args.length: ov.median(base_p)}, ov.median(base_g))
    for name in prompt:
        gen_name = name.split(",")[0]  # a chunked prompt path generates as its model does
        p_rate, g_rate = ov.median(prompt[name]), ov.median(generation[gen_name])
        seconds = model_time(requests, {args.length: p_rate}, g_rate)
        print(
            f"{name:<40} prompt {p_rate:.0f} tok per CPU-s at {args.length} [{_each(prompt[name])}] "
            f"({_paired(prompt[name], base_p):.2f}x xllamacpp's, paired); "
            f"generation {g_rate:.1f} tok per CPU-s [{_each(generation[gen_name], 1)}] "
            f"({_paired(generation[gen_name], base_g):.2f}x); "
            f"the demo's model time {seconds:.0f} CPU-s ({seconds / base_time:.2f}x)",
            flush=True,
        )
    print(f"load average at end: {_each(list(os.getloadavg()), 2)}")


if __name__ == "__main__":
    main()
