"""Benchmark the exemplar bank: index build time and per-essay retrieval latency with the real MiniLM.

Builds the bank of an ASAP set's whole retrieval pool (folds 1-4; fold 0 is scored) and then, for
``--n-queries`` fold-0 essays, times procedure 2 over all traits and all levels (``per_level_all``) with the
query embedding included (a fresh essay) and excluded (vector precomputed). A second ``build_or_load`` shows
the reuse path. Side by side in the same run, the same procedure-2 queries sent to the bank's Chroma collection
(how every bank answered before banks were held in memory) give the before/after ratio, and the answers are
compared. The pool's vectors come from the vector store / the shipped vectors (``--no-shipped``: embed them).
Run: ``.venv/bin/python bench/retrieval.py --set 7 --n-queries 20``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from madrag.data import load_asap, split_by_fold
from madrag.data.shipped import find_asap_dir
from madrag.retrieval import ExemplarBank, MiniLMEmbedder, score_key
from madrag.retrieval.bank_store import bank_name, open_client
from madrag.retrieval.vectors import VECTORS_FILE, CachingEmbedder
from madrag.rubric import load_rubric

DATA = find_asap_dir()  # $MADRAG_ASAP_DIR, else the copy shipped in the package


def hardware() -> str:
    """CPU model, cores, RAM and torch threads, as one line."""
    import torch

    cpu = platform.processor() or "unknown CPU"
    ram_gib = 0.0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram_gib = int(line.split()[1]) / 2**20
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = torch.get_num_threads()
    return f"{cpu}; {cores} cores; {ram_gib:.1f} GiB RAM; torch {torch.__version__}, {threads} threads; {load()}"


def load() -> str:
    """The 1-minute load average: other processes on a small machine distort every timing here."""
    return f"load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "load average n/a"


def summary(label: str, seconds: list[float]) -> str:
    """Mean, median and 95th percentile of ``seconds`` in ms, labelled."""
    ms = np.array(seconds) * 1000
    return (
        f"{label:<34} mean {ms.mean():8.1f} ms  p50 {np.percentile(ms, 50):8.1f} ms  "
        f"p95 {np.percentile(ms, 95):8.1f} ms  (n={len(ms)})"
    )


def chroma_per_level(collection: object, essay_id: str, vector: list[float], rubric: object) -> list[str | None]:
    """Procedure 2 for every trait and level as Chroma queries (one per level), the nearest id of each."""
    found: list[str | None] = []
    for trait in rubric.traits:  # type: ignore[attr-defined]
        for level in trait.scores:
            where = {"$and": [{score_key(trait.name): {"$eq": level}}, {"essay_id": {"$ne": essay_id}}]}
            got = collection.query(query_embeddings=[vector], n_results=1, where=where)  # type: ignore[attr-defined]
            found.append(got["ids"][0][0] if got["ids"][0] else None)
    return found


def run(essay_set: int, n_queries: int, cache_dir: Path, shipped: bool = True) -> None:
    """Build (or reuse) the set's bank and time retrieval for ``n_queries`` fold-0 essays."""
    rubric = load_rubric(DATA / f"rubric_set{essay_set}.json")
    split = split_by_fold(load_asap(DATA / "training_set_rel3_sets7_8.tsv", rubric), eval_fold=0)
    model = MiniLMEmbedder()
    embedder = CachingEmbedder(model, cache_dir / VECTORS_FILE, shipped=shipped)
    print(f"hardware: {hardware()}")
    print(f"ASAP set {essay_set}: pool {len(split.pool)} essays (folds 1-4), queries from fold 0")
    t0 = time.perf_counter()
    _ = embedder.dim  # load the model outside the timed build
    print(f"model load: {time.perf_counter() - t0:.1f} s")

    t0 = time.perf_counter()
    bank = ExemplarBank.build_or_load(split.pool, rubric, embedder, cache_dir)
    build = time.perf_counter() - t0
    state = "built" if bank.built_now else "reused (already in cache dir)"
    print(f"index {state}: {build:.1f} s, {len(split.pool) / build:.1f} essays/s, size {bank.size}")
    shipped_n, stored_n = embedder.from_shipped, embedder.from_store
    print(f"pool vectors: {embedder.texts_embedded} embedded, {shipped_n} shipped, {stored_n} stored")
    t0 = time.perf_counter()
    again = ExemplarBank.build_or_load(split.pool, rubric, embedder, cache_dir)
    print(f"second build_or_load: {time.perf_counter() - t0:.2f} s (built_now={again.built_now})")

    queries = split.eval[:n_queries]
    chroma = open_client(cache_dir).get_collection(bank_name(bank.fingerprint), embedding_function=None)
    with_embed, without_embed, embed_only, via_chroma, ratios = [], [], [], [], []
    differ = 0
    for essay in queries:
        t0 = time.perf_counter()
        bank.per_level_all(essay)  # embeds the query (not cached yet) + all traits x all levels
        with_embed.append(time.perf_counter() - t0)
        vector = bank.query_vector(essay)
        t0 = time.perf_counter()
        ours = bank.per_level_all(essay, query_vector=vector)
        without_embed.append(time.perf_counter() - t0)
        listed = [float(x) for x in vector]
        t0 = time.perf_counter()
        theirs = chroma_per_level(chroma, essay.id, listed, rubric)
        via_chroma.append(time.perf_counter() - t0)
        ratios.append(via_chroma[-1] / without_embed[-1])
        mine = [lv.exemplar.essay_id if lv.exemplar else None for t in rubric.traits for lv in ours[t.name]]
        differ += sum(a != b for a, b in zip(mine, theirs, strict=True))
        t0 = time.perf_counter()
        model.embed([essay.text])
        embed_only.append(time.perf_counter() - t0)
    levels = sum(len(t.scores) for t in rubric.traits)
    print(f"retrieval per essay ({len(rubric.traits)} traits, {levels} level queries):")
    print(summary("per_level_all incl. query embedding", with_embed))
    print(summary("per_level_all excl. query embedding", without_embed))
    print(summary("query embedding alone", embed_only))
    print(summary("same queries sent to Chroma (before)", via_chroma))
    print(
        f"Chroma / in-memory, pair by pair: median {statistics.median(ratios):.1f}x "
        f"(min {min(ratios):.1f}x, max {max(ratios):.1f}x); answers differing: {differ}"
    )
    print(f"after the run: {load()}")
    if hasattr(model, "windows"):  # the windows embedder (--embedder minilm-windows) embeds several per essay
        print(f"mean windows per query essay: {statistics.mean(len(model.windows(e.text)) for e in queries):.2f}")


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=int, choices=(7, 8), default=7, dest="essay_set")
    parser.add_argument("--n-queries", type=int, default=20)
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: a fresh temporary directory")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--no-shipped", action="store_true", help="embed the pool instead of the shipped vectors")
    args = parser.parse_args()
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    if args.cache_dir is not None:
        run(args.essay_set, args.n_queries, args.cache_dir, shipped=not args.no_shipped)
        return
    with tempfile.TemporaryDirectory(prefix="madrag-bench-") as tmp:
        run(args.essay_set, args.n_queries, Path(tmp), shipped=not args.no_shipped)


if __name__ == "__main__":
    main()
