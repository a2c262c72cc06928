"""Where the remaining difference between OpenVINO on the repaired Q4_1 IR and xllamacpp comes from: five models
compared pairwise on ``bench.openvino_logprobs``' prompts, xllamacpp on the shipped Q4_1 GGUF and on its F16 copy,
the OpenVINO IR + logits path on GenAI's conversion of the Q4_1 GGUF as GenAI makes it and repaired
(``bench.openvino_q41``), and on the F16 copy. Per prompt and pair: the score step's distribution over 1-6 apart
in total variation, and how many of ``--tokens`` greedy tokens agree before the first difference.

OpenVINO runs with ``DYNAMIC_QUANTIZATION_GROUP_SIZE`` 0 (its activations unrounded) and a KV cache in f16.

Usage (from the repository root; needs ``pip install openvino-genai``):
    python -m bench.openvino_q41_pairs [--tokens 24]
"""

from __future__ import annotations

import argparse
import itertools
import os
from typing import Any

import numpy as np
from bench import openvino_q41 as q41
from bench import openvino_runtime as ov
from bench.embedded_prompt_rate import convert
from bench.openvino_logprobs import SCORES, essays, request

from madrag.providers.models import smollm2_gguf_path
from madrag.providers.xllama import XLlamaEngine

PREFILL = "The essay explains its ideas.\nFinal score: "


def _llama(engine: XLlamaEngine, essay: str, n: int) -> tuple[np.ndarray, list[int]]:
    """(score-step distribution over SCORES, greedy token ids) from xllamacpp."""
    lps = engine.generate(request(essay, PREFILL)).choice_logprobs or {}
    dist = np.exp(np.array([lps[c] for c in SCORES]))
    ids = engine.tokenize(engine.render_prompt(request(essay, None)), special=True)
    body = {"prompt": ids, "max_tokens": n, "temperature": 0.0, "ignore_eos": True, "cache_prompt": False}
    content = engine._load()[0].handle_completions({**body, "n_probs": 1})["choices"][0]["logprobs"]["content"]
    return dist / dist.sum(), [int(c["id"]) for c in content]


def _openvino(logits: ov.Logits, engine: XLlamaEngine, essay: str, n: int) -> tuple[np.ndarray, list[int]]:
    """The same from the OpenVINO IR + logits path, on the ids xllamacpp's tokenizer gives."""
    ids = engine.tokenize(engine.render_prompt(request(essay, PREFILL)), special=True)
    choices = [engine.tokenize(c, special=False)[0] for c in SCORES]
    dist = np.exp(ov.log_softmax(logits.feed(ids, reset=True)[-1])[choices])
    row = logits.feed(engine.tokenize(engine.render_prompt(request(essay, None)), special=True), reset=True)[-1]
    tokens: list[int] = []
    for _ in range(n):
        tokens.append(int(np.argmax(row)))
        row = logits.feed([tokens[-1]])[-1]
    return dist / dist.sum(), tokens


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=24, help="greedy tokens compared per prompt")
    args = p.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with ov.Workdir() as tmp:
        q4 = smollm2_gguf_path()
        f16 = tmp / f"{q4.stem}-f16.gguf"
        convert(q4, f16, "f16")
        engines = {
            "xllamacpp Q4_1": XLlamaEngine(q4, 8192, 2, 512, 2),
            "xllamacpp F16": XLlamaEngine(f16, 8192, 2, 512, 2),
        }
        for engine in engines.values():
            engine.reuse_prompt = False
        (tmp / "q").mkdir()
        (tmp / "f").mkdir()
        q_xml, f_xml = ov.convert_ir(q4, tmp / "q"), ov.convert_ir(f16, tmp / "f")
        plain = {"DYNAMIC_QUANTIZATION_GROUP_SIZE": 0}
        models: dict[str, ov.Logits] = {
            "OpenVINO Q4_1 as converted": ov.Logits(q_xml, 2, "f16", plain),
            "OpenVINO Q4_1 repaired": ov.Logits(q_xml, 2, "f16", plain, lambda m: q41.exact_zero_points(m, q4)),
            "OpenVINO F16 copy": ov.Logits(f_xml, 2, "f16", plain),
        }
        tokenizer = engines["xllamacpp Q4_1"]
        for i, essay in enumerate(essays()):
            out: dict[str, Any] = {name: _llama(e, essay, args.tokens) for name, e in engines.items()}
            out |= {name: _openvino(m, tokenizer, essay, args.tokens) for name, m in models.items()}
            for a, b in itertools.combinations(out, 2):
                (da, ta), (db, tb) = out[a], out[b]
                agree = next((k for k in range(args.tokens) if ta[k] != tb[k]), args.tokens)
                print(
                    f"prompt {i}: {a:>26} vs {b:<26} score-step TVD {0.5 * np.abs(da - db).sum():.4f}, "
                    f"greedy {agree}/{args.tokens} tokens agree",
                    flush=True,
                )
        for engine in engines.values():
            engine.close()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
