"""Do OpenVINO's logits give the records xllamacpp gives? The same Judge-like prompts (the chat template rendered
and tokenized as madrag's xllamacpp engine does) through both runtimes:

* the score step (``Final score: `` then one of 1-6, as the constrained Judge asks it): each choice's
  log-probability, the score each picks (the most probable choice) and the distribution over the choices
  normalised (what ``choice_distribution`` records), compared by total variation distance;
* greedy generation (temperature 0) of ``--tokens`` tokens after the prompt with the top 5 alternatives at each
  step (the first-token log-probability and alternatives the confidence features read): the same tokens? the
  same top-5 ids? the largest log-probability difference.

OpenVINO here is the IR OpenVINO GenAI converts the GGUF to, run by the OpenVINO runtime with every step's logits
(``bench.openvino_runtime.Logits``). Needs ``pip install openvino-genai``.

Usage (from the repository root):
    python -m bench.openvino_logprobs [--kv-precision f16] [--tokens 24] [--weights f16]
        [--zero-points f16] [--activations llama-cpp] [--dynamic-quantization N] [--inference-precision f32]
        [--cpu-property KEY=VALUE]

``--zero-points f16`` repairs the IR of a Q4_1 GGUF before it is compiled (``bench.openvino_q41``: GenAI's integer
zero points replaced by each block's exact ``-m / d``); ``--activations llama-cpp`` rounds every weight product's
activations to 8 bits per block of 32 as llama.cpp does (a check of where the remaining difference comes from, not
a fast path); the other options are CPU plugin settings.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from bench import openvino_q41 as q41
from bench import openvino_runtime as ov
from bench.embedded_prompt_rate import convert

from madrag.providers.base import ChatRequest, Message
from madrag.providers.models import smollm2_gguf_path
from madrag.providers.xllama import XLlamaEngine

SCORES = [str(s) for s in range(1, 7)]
SYSTEM = "You are an experienced teacher scoring student essays for the trait Ideas on a scale of 1 to 6."


def essays() -> list[str]:
    """Paragraphs of this repository's docs as stand-in essays (any fixed English text serves)."""
    text = (Path(__file__).parent.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    paragraphs = [p.strip() for p in text.split("\n\n") if len(p.strip()) > 400]
    return [p[:1500] for p in paragraphs[:4]]


def request(essay: str, prefill: str | None) -> ChatRequest:
    user = f"Essay:\n{essay}\n\nExplain briefly, then end with 'Final score: N'."
    return ChatRequest(
        messages=[Message(role="system", content=SYSTEM), Message(role="user", content=user)],
        temperature=0.0,
        max_tokens=1,
        top_logprobs=5,
        prefill=prefill,
        choices=SCORES if prefill else None,
    )


def score_step(engine: XLlamaEngine, logits: ov.Logits, essay: str) -> tuple[bool, float, float]:
    """(same score, total variation distance of the normalised distributions, largest |logprob difference|)."""
    req = request(essay, "The essay explains its ideas.\nFinal score: ")
    ours = engine.generate(req).choice_logprobs or {}
    ids = engine.tokenize(engine.render_prompt(req), special=True)
    lps = ov.log_softmax(logits.feed(ids, reset=True)[-1])
    theirs: dict[str, float] = {}
    for choice in SCORES:
        cids = engine.tokenize(choice, special=False)
        if len(cids) != 1:
            raise SystemExit(f"score {choice!r} is {len(cids)} tokens: this check reads single-token scores")
        theirs[choice] = float(lps[cids[0]])
    a = np.exp(np.array([ours[c] for c in SCORES]))
    b = np.exp(np.array([theirs[c] for c in SCORES]))
    tvd = 0.5 * float(np.abs(a / a.sum() - b / b.sum()).sum())
    worst = max(abs(ours[c] - theirs[c]) for c in SCORES)
    return max(ours, key=lambda c: ours[c]) == max(theirs, key=lambda c: theirs[c]), tvd, worst


def greedy(engine: XLlamaEngine, logits: ov.Logits, essay: str, n: int) -> tuple[int, int, float]:
    """(steps until the greedy tokens first differ (n if never), steps whose top-5 ids agree as sets up to there,
    largest |logprob difference| of the chosen tokens up to there)."""
    ids = engine.tokenize(engine.render_prompt(request(essay, None)), special=True)
    server = engine._load()[0]
    body = {"prompt": ids, "max_tokens": n, "temperature": 0.0, "n_probs": 5, "ignore_eos": True}
    content = server.handle_completions({**body, "cache_prompt": False})["choices"][0]["logprobs"]["content"]
    row = logits.feed(ids, reset=True)[-1]
    same_top = 0
    worst = 0.0
    for step, entry in enumerate(content):
        lps = ov.log_softmax(row)
        token = int(np.argmax(lps))
        if token != int(entry["id"]):
            return step, same_top, worst
        top = {int(i) for i in np.argsort(-lps)[:5]}
        same_top += top == {int(t["id"]) for t in entry["top_logprobs"][:5]}
        worst = max(worst, abs(float(lps[token]) - float(entry["logprob"])))
        row = logits.feed([token])[-1]
    return len(content), same_top, worst


def cpu_properties(args: argparse.Namespace) -> dict[str, object]:
    out: dict[str, object] = {}
    if args.dynamic_quantization is not None:
        out["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = args.dynamic_quantization
    if args.inference_precision:
        out["INFERENCE_PRECISION_HINT"] = args.inference_precision
    for item in args.cpu_property:
        key, _, value = item.partition("=")
        out[key] = int(value) if value.isdigit() else value
    return out


def runtime_weights(logits: ov.Logits) -> str:
    """What the compiled model's FullyConnected layers read: their inputs' element types (activations, weights,
    bias, scales, zero points), counted."""
    counts: dict[str, int] = {}
    for node in logits.compiled.get_runtime_model().get_ordered_ops():
        if node.get_rt_info()["layerType"].astype(str) == "FullyConnected":
            kind = "/".join(i.get_element_type().get_type_name() for i in node.inputs())
            counts[kind] = counts.get(kind, 0) + 1
    dq = logits.compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE")
    return f"FullyConnected weights {counts}; DYNAMIC_QUANTIZATION_GROUP_SIZE {dq}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kv-precision", default="f16", help="OpenVINO's KV cache precision (f16, u8, f32)")
    p.add_argument(
        "--weights",
        default="",
        choices=("", "f16", "q8_0"),
        help="the GGUF's weights converted first: f16 or q8_0 (both runtimes)",
    )
    p.add_argument("--tokens", type=int, default=24, help="greedy tokens compared per prompt")
    p.add_argument(
        "--zero-points",
        default="converted",
        choices=("converted", "f16"),
        help="a Q4_1 model's zero points: as GenAI converts them (integers) or each block's exact -m/d in f16",
    )
    p.add_argument(
        "--activations",
        default="f32",
        choices=("f32", "llama-cpp"),
        help="the weight products' activations: as the plugin runs them, or rounded as llama.cpp rounds them",
    )
    p.add_argument(
        "--dynamic-quantization",
        type=int,
        default=None,
        help="DYNAMIC_QUANTIZATION_GROUP_SIZE (0 disables; default: the plugin's)",
    )
    p.add_argument("--inference-precision", default="", help="INFERENCE_PRECISION_HINT (f32, bf16, f16)")
    p.add_argument("--cpu-property", action="append", default=[], help="any further CPU property, KEY=VALUE")
    args = p.parse_args()
    with ov.Workdir() as tmp:
        model = smollm2_gguf_path()
        if args.weights:
            converted = tmp / f"{model.stem}-{args.weights}.gguf"
            convert(model, converted, args.weights)
            model = converted
        engine = XLlamaEngine(model, 8192, 2, 512, 2)
        engine.reuse_prompt = False
        properties = cpu_properties(args)
        print(
            f"model {model.name}; OpenVINO KV cache {args.kv_precision}, zero points {args.zero_points}, "
            f"activations {args.activations}, "
            f"properties {properties}; xllamacpp as madrag builds it"
        )
        source = model

        def transform(m: object) -> None:
            if args.zero_points == "f16":
                print(f"  zero points of {q41.exact_zero_points(m, source)} int4 weights made exact", flush=True)
            if args.activations == "llama-cpp":
                print(f"  activations of {q41.llama_cpp_activations(m)} weight products rounded", flush=True)

        logits = ov.Logits(ov.convert_ir(model, tmp), 2, args.kv_precision, properties, transform)
        print(f"  compiled: {runtime_weights(logits)}", flush=True)
        for i, essay in enumerate(essays()):
            same, tvd, worst = score_step(engine, logits, essay)
            agree, top, lp = greedy(engine, logits, essay, args.tokens)
            print(
                f"prompt {i}: score step: same score {same}, distribution TVD {tvd:.4f}, max |dlogprob| {worst:.3f}; "
                f"greedy: {agree}/{args.tokens} tokens agree, top-5 sets equal at {top}, "
                f"max |dlogprob| {lp:.3f}",
                flush=True,
            )
    engine.close()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
