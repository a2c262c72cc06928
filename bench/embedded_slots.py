"""Embedded model throughput: one context (one call at a time) vs several parallel slots, side by side.

Runs the same Advocate-style requests on real ASAP essays through LlamaCppProvider with --slots 1 and with
--slots N (the CPU threads are split between the slots), all requests submitted at once, and prints calls/s,
generated tokens/s and the ratio, with the hardware. Usage: python bench/embedded_slots.py [--slots 2] [--n 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import time
from pathlib import Path

from madrag.agents.context import essay_values, role_messages
from madrag.agents.prompts import PromptLibrary
from madrag.data import load_asap
from madrag.data.shipped import find_asap_dir
from madrag.providers.base import ChatRequest
from madrag.providers.llamacpp import LlamaCppProvider
from madrag.rubric import load_rubric

ASAP = find_asap_dir()  # $MADRAG_ASAP_DIR, else the copy shipped in the package


def hardware() -> str:
    """The CPU model, core count and load average."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{cpu}, {os.cpu_count()} cores; load average {load}"


def requests(n: int, max_tokens: int) -> list[ChatRequest]:
    """One Advocate request (shared-prefix layout, logprobs) per fold-0 set-7 essay, ``n`` of them."""
    rubric = load_rubric(ASAP / "rubric_set7.json")
    essays = [e for e in load_asap(ASAP / "training_set_rel3_sets7_8.tsv", rubric) if e.fold == 0][:n]
    prompts = PromptLibrary()
    trait = rubric.traits[0]
    out = []
    for i, essay in enumerate(essays):
        values = {**essay_values(prompts, essay, trait, "note", False), "DEBATE_SO_FAR": ""}
        messages = role_messages(prompts, "shared_prefix", "advocate_system", "advocate_user", values)
        out.append(ChatRequest(messages=messages, temperature=0.7, seed=i, max_tokens=max_tokens, logprobs=True))
    return out


async def measure(slots: int, reqs: list[ChatRequest]) -> tuple[float, int]:
    """(seconds, generated tokens) for ``reqs`` all submitted at once to a provider with ``slots`` slots."""
    provider = LlamaCppProvider(slots=slots, n_ctx=4096)
    await asyncio.gather(*(provider.complete(r.model_copy(update={"max_tokens": 1})) for r in reqs[:slots]))  # load
    started = time.monotonic()
    results = await asyncio.gather(*(provider.complete(r) for r in reqs))
    elapsed = time.monotonic() - started
    await provider.aclose()
    return elapsed, sum(r.usage.completion_tokens or 0 for r in results)  # llama.cpp always counts


def main() -> None:
    """Measure one slot and ``--slots`` slots and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--n", type=int, default=8, help="requests (one per essay)")
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    reqs = requests(args.n, args.max_tokens)
    print(f"embedded model slots bench: {len(reqs)} Advocate requests, {args.max_tokens} tokens each")
    print(f"hardware: {hardware()}")
    rows = []
    for slots in (1, args.slots):
        elapsed, tokens = asyncio.run(measure(slots, reqs))
        rows.append((slots, elapsed, tokens))
        print(
            f"slots={slots}: {elapsed:.1f} s, {len(reqs) / elapsed:.2f} calls/s, {tokens / elapsed:.1f} generated tok/s"
        )
    base, multi = rows[0][1], rows[1][1]
    print(f"RESULT slots={args.slots} vs one at a time: {base / multi:.2f}x calls/s; hardware: {hardware()}")


if __name__ == "__main__":
    main()
