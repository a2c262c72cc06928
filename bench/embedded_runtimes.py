"""The embedded model's two runtimes side by side: xllamacpp (prebuilt wheel, the default) and llama-cpp-python.

For each runtime, with 1 slot and with --slots N: the model load (every slot's context) and Judge-sized calls on
real ASAP essays, each essay a Judge pair as the constrained Judge makes it: a rationale (greedy, --max-tokens,
top-5 logprobs) on a prompt of about --prompt-tokens tokens (the Advocate prompt of an essay plus other essays as
exemplars), then the score step (the rationale as prefill, choices 0-3). Both runtimes reuse the aligned
prompt prefix an earlier call evaluated; xllamacpp is also run with ``reuse_prompt = False`` (every prompt
evaluated anew), to show what the reuse saves. Runtimes alternate so that they see the same machine load;
compare the ratios. Usage (from the repository root):
    python -m bench.embedded_runtimes [--slots 2] [--n 4] [--prompt-tokens 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from bench.embedded_slots import ASAP, hardware

from madrag.agents.context import essay_values, role_messages
from madrag.agents.prompts import PromptLibrary
from madrag.data import load_asap
from madrag.providers.base import ChatRequest, Message
from madrag.providers.llamacpp import LlamaCppProvider
from madrag.rubric import load_rubric

CONFIGS = (("xllamacpp", True), ("llama-cpp-python", True), ("xllamacpp", False))


def judge_requests(n: int, prompt_tokens: int, max_tokens: int) -> list[ChatRequest]:
    """One Judge-sized rationale request per fold-0 set-7 essay (``n``); ~4 characters a token."""
    rubric = load_rubric(ASAP / "rubric_set7.json")
    essays = load_asap(ASAP / "training_set_rel3_sets7_8.tsv", rubric)
    evaluated, pool = [e for e in essays if e.fold == 0][:n], [e for e in essays if e.fold != 0]
    prompts, trait = PromptLibrary(), rubric.traits[0]
    out = []
    for i, essay in enumerate(evaluated):
        values = {**essay_values(prompts, essay, trait, "note", False), "DEBATE_SO_FAR": ""}
        messages = role_messages(prompts, "shared_prefix", "advocate_system", "advocate_user", values)
        exemplars, k = "", i * 7
        while len(messages[-1].content) + len(exemplars) < 4 * prompt_tokens:
            exemplars += f"\n\nExemplar essay:\n{pool[k % len(pool)].text}"
            k += 1
        last = Message(role="user", content=messages[-1].content + exemplars + "\n\nEnd with 'Final score: N'.")
        out.append(ChatRequest(messages=[*messages[:-1], last], max_tokens=max_tokens, logprobs=True, top_logprobs=5))
    return out


async def judge_pair(provider: LlamaCppProvider, request: ChatRequest) -> tuple[float, float, int]:
    """(rationale seconds, score-step seconds, prompt tokens) of one essay's Judge pair."""
    started = time.monotonic()
    rationale = await provider.complete(request)
    middle = time.monotonic()
    step = request.model_copy(
        update={"prefill": f"{rationale.text}\nFinal score: ", "max_tokens": 1, "choices": ["0", "1", "2", "3"]}
    )
    await provider.complete(step)
    return middle - started, time.monotonic() - middle, rationale.usage.prompt_tokens or 0


async def measure(runtime: str, reuse: bool, slots: int, reqs: list[ChatRequest]) -> dict[str, Any]:
    """Load seconds, and seconds per rationale / score step / essay with ``slots`` essays in flight."""
    provider = LlamaCppProvider(slots=slots, n_ctx=4096, runtime=runtime)  # type: ignore[arg-type]
    if runtime == "xllamacpp":  # llama-cpp-python always reuses
        for engine in provider._engines:
            engine.reuse_prompt = reuse  # type: ignore[attr-defined]
    started = time.monotonic()
    await asyncio.gather(*(asyncio.to_thread(e._load) for e in provider._engines))  # type: ignore[attr-defined]
    load = time.monotonic() - started
    lanes = asyncio.Semaphore(slots)  # as many essays in flight as slots: a call's seconds are its own, not a queue's

    async def lane(request: ChatRequest) -> tuple[float, float, int]:
        async with lanes:
            return await judge_pair(provider, request)

    started = time.monotonic()
    pairs = await asyncio.gather(*(lane(r) for r in reqs))
    wall = time.monotonic() - started
    await provider.aclose()
    return {
        "load_s": load,
        "rationale_s": sum(p[0] for p in pairs) / len(pairs),
        "score_step_s": sum(p[1] for p in pairs) / len(pairs),
        "essays_per_min": 60 * len(pairs) / wall,
        "prompt_tokens": sum(p[2] for p in pairs) / len(pairs),
    }


def main() -> None:
    """Measure every runtime with 1 and --slots slots, alternating, and print the table and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--n", type=int, default=4, help="essays (one Judge pair each)")
    parser.add_argument("--prompt-tokens", type=int, default=2000)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    reqs = judge_requests(args.n, args.prompt_tokens, args.max_tokens)
    print(f"embedded runtimes bench: {len(reqs)} Judge pairs, ~{args.prompt_tokens} prompt tokens, {args.max_tokens}")
    print(f"hardware: {hardware()}")
    rows: dict[tuple[str, bool, int], dict[str, Any]] = {}
    for slots in (1, args.slots):
        for runtime, reuse in CONFIGS:
            row = rows[(runtime, reuse, slots)] = asyncio.run(measure(runtime, reuse, slots, reqs))
            name = runtime + ("" if reuse else " (every prompt anew)")
            print(
                f"{name:30} slots={slots}: load {row['load_s']:.2f} s, rationale {row['rationale_s']:.2f} s/call, "
                f"score step {row['score_step_s']:.2f} s/call, {row['essays_per_min']:.2f} essays/min "
                f"({row['prompt_tokens']:.0f} prompt tokens)",
                flush=True,
            )
    for slots in (1, args.slots):
        xl, lcp = rows[("xllamacpp", True, slots)], rows[("llama-cpp-python", True, slots)]
        anew = rows[("xllamacpp", False, slots)]
        print(
            f"RESULT slots={slots}: xllamacpp / llama-cpp-python: load {xl['load_s'] / lcp['load_s']:.2f}x, "
            f"rationale {xl['rationale_s'] / lcp['rationale_s']:.2f}x, score step "
            f"{xl['score_step_s'] / lcp['score_step_s']:.2f}x, "
            f"essays/min {xl['essays_per_min'] / lcp['essays_per_min']:.2f}x; "
            f"xllamacpp reuse on / off: essays/min {xl['essays_per_min'] / anew['essays_per_min']:.2f}x"
        )
    print(f"hardware at the end: {hardware()}")


if __name__ == "__main__":
    main()
