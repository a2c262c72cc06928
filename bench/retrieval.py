"""Benchmark the exemplar bank: build and open times, per-essay retrieval latency with the real MiniLM, and the
same questions put to Chroma (the MADRAG paper's vector store) side by side.

Builds the bank of an ASAP set's whole retrieval pool (folds 1-4; fold 0 is scored) in madrag's SQLite store and
then, for ``--n-queries`` fold-0 essays, times procedure 2 over all traits and all levels (``per_level_all``) with
the query's vector looked up (the vector cache: shipped or stored vectors, else MiniLM) and given (precomputed),
and MiniLM's embedding of the essay alone. A second ``build_or_load`` shows the reuse path. The same contents are
written to a Chroma collection (cosine space, as madrag's banks were kept before), and side by side in the same
run:

* the store write (create + add, in each store's batches) and the bank's open (a fresh process: import, open,
  read the collection into memory) from Chroma and from the SQLite store;
* the same procedure-2 queries sent through Chroma's own ``collection.query`` (its HNSW index, approximate), timed
  pair by pair against the in-memory exact search, and the answers compared (differing ids, and how many of those
  are ties: equally near to 1e-6); the same for procedure 1 (top 5: differing lists, and how many of those miss a
  nearer essay);
* the install weight chromadb adds: the installed distributions only it needs (its dependency closure less that
  of the core install and the rest of the ``embedded`` extra), their files' size and count.

The pool's vectors come from the vector store / the shipped vectors (``--no-shipped``: embed them).
Run: ``.venv/bin/python bench/retrieval.py --set 7 --n-queries 100``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from madrag.data import load_asap, split_by_fold
from madrag.data.shipped import find_asap_dir
from madrag.retrieval import ExemplarBank, MiniLMEmbedder, score_key
from madrag.retrieval.bank_store import bank_name
from madrag.retrieval.sqlite_banks import MAX_BATCH, SqliteBanks
from madrag.retrieval.vectors import VECTORS_FILE, CachingEmbedder
from madrag.rubric import load_rubric

REPO = Path(__file__).resolve().parents[1]
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
        f"{label:<42} mean {ms.mean():8.1f} ms  p50 {np.percentile(ms, 50):8.1f} ms  "
        f"p95 {np.percentile(ms, 95):8.1f} ms  (n={len(ms)})"
    )


def chroma_client(folder: Path) -> Any:
    """A persistent Chroma client with telemetry off (how madrag opened its banks' Chroma store)."""
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(folder.resolve()), settings=Settings(anonymized_telemetry=False))


def write_chroma(folder: Path, name: str, contents: dict[str, Any]) -> Any:
    """The bank's contents as a Chroma collection in cosine space, added in Chroma's largest batches."""
    client = chroma_client(folder)
    collection = client.create_collection(name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
    step = int(client.get_max_batch_size())
    for at in range(0, len(contents["ids"]), step):
        collection.add(
            ids=contents["ids"][at : at + step],
            embeddings=contents["embeddings"][at : at + step],
            documents=contents["documents"][at : at + step],
            metadatas=contents["metadatas"][at : at + step],
        )
    return collection


def write_sqlite(folder: Path, name: str, contents: dict[str, Any]) -> None:
    """The bank's contents in madrag's SQLite store, added in its batches (what a bank build writes)."""
    collection = SqliteBanks(folder).create_collection(name, metadata={"size": len(contents["ids"])})
    for at in range(0, len(contents["ids"]), MAX_BATCH):
        collection.add(
            ids=contents["ids"][at : at + MAX_BATCH],
            embeddings=contents["embeddings"][at : at + MAX_BATCH],
            documents=contents["documents"][at : at + MAX_BATCH],
            metadatas=contents["metadatas"][at : at + MAX_BATCH],
        )


_OPEN = {
    "sqlite": (
        "from madrag.retrieval.sqlite_banks import SqliteBanks as S; client = S(folder)",
        "client.get_collection(name)",
    ),
    "chroma": (
        "import chromadb; from chromadb.config import Settings; "
        "client = chromadb.PersistentClient(path=str(folder), settings=Settings(anonymized_telemetry=False))",
        "client.get_collection(name, embedding_function=None)",
    ),
}


def cold_open(store: str, folder: Path, name: str) -> dict[str, float]:
    """Open the bank in a fresh interpreter: seconds to import the store's client, to open it, and to read the
    collection into memory (madrag's ArrayCollection)."""
    client, get = _OPEN[store]
    code = (
        "import json, sys, time; from pathlib import Path; t0 = time.perf_counter(); "
        "from madrag.retrieval.memory import ArrayCollection; "
        f"folder, name = Path(sys.argv[1]), sys.argv[2]; t1 = time.perf_counter(); {client}; "
        f"t2 = time.perf_counter(); got = {get}.get(include=['documents', 'metadatas', 'embeddings']); "
        "n = ArrayCollection.from_contents(got).count(); t3 = time.perf_counter(); "
        "print(json.dumps({'import': t2 - t0, 'open': t3 - t2, 'essays': n}))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code, str(folder), name], env=env, capture_output=True, check=True)
    return dict(json.loads(out.stdout.decode().strip().splitlines()[-1]))


def closure(names: list[str], stop: set[str] | None = None) -> set[str]:
    """The installed distributions ``names`` need, themselves included (requirements whose markers hold without
    extras), not following into ``stop``."""
    seen: set[str] = set()
    todo = [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen or name in (stop or set()):
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def installed_bytes(name: str) -> tuple[int, int]:
    """Size and number of an installed distribution's files (its RECORD)."""
    files = [f.locate() for f in metadata.distribution(name).files or []]
    present = [Path(str(f)) for f in files if Path(str(f)).is_file()]
    return sum(f.stat().st_size for f in present), len(present)


def install_weight() -> str:
    """What chromadb adds to an install of madrag's core and ``embedded`` extra, from this environment."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    others = [Requirement(r).name for r in project["dependencies"] + project["optional-dependencies"]["embedded"]]
    rest = closure([n for n in others if canonicalize_name(n) not in {"chromadb", "madrag"}])
    only = sorted(closure(["chromadb"]) - rest)
    sizes = {n: installed_bytes(n) for n in only}
    total = sum(b for b, _ in sizes.values()) / 1e6
    files = sum(f for _, f in sizes.values())
    largest = sorted(sizes, key=lambda n: -sizes[n][0])[:8]
    top = ", ".join(f"{n} {sizes[n][0] / 1e6:.0f}" for n in largest)
    return (
        f"chromadb {metadata.version('chromadb')} adds {len(only)} installed distributions beyond the core and the "
        f"rest of the embedded extra: {total:.0f} MB in {files} files (largest, MB: {top})"
    )


def chroma_per_level(
    collection: Any, essay_id: str, vector: list[float], rubric: Any
) -> list[tuple[str, float] | None]:
    """Procedure 2 for every trait and level as Chroma queries (one per level): the nearest id and its distance."""
    found: list[tuple[str, float] | None] = []
    for trait in rubric.traits:
        for level in trait.scores:
            where = {"$and": [{score_key(trait.name): {"$eq": level}}, {"essay_id": {"$ne": essay_id}}]}
            got = collection.query(query_embeddings=[vector], n_results=1, where=where, include=["distances"])
            found.append((got["ids"][0][0], float(got["distances"][0][0])) if got["ids"][0] else None)
    return found


def stores(bank: ExemplarBank, folder: Path, repeats: int) -> Any:
    """Write the bank's contents to Chroma and to the SQLite store, open each from a fresh process, print the
    times; returns the Chroma collection."""
    contents = bank.contents()
    name = bank_name(bank.fingerprint)
    t0 = time.perf_counter()
    write_sqlite(folder / "sqlite", name, contents)
    sqlite_write = time.perf_counter() - t0
    t0 = time.perf_counter()
    collection = write_chroma(folder / "chroma", name, contents)
    chroma_write = time.perf_counter() - t0
    print(
        f"store write, {len(contents['ids'])} essays (create + add): "
        f"SQLite {sqlite_write:.2f} s, Chroma {chroma_write:.2f} s"
    )
    for store in ("sqlite", "chroma"):
        runs = [cold_open(store, folder / store, name) for _ in range(repeats)]
        imp = statistics.median(r["import"] for r in runs)
        opened = statistics.median(r["open"] for r in runs)
        print(
            f"bank open from {store:<6} in a fresh process (median of {repeats}): import {imp:.2f} s, "
            f"open + read into memory {opened:.3f} s, total {imp + opened:.2f} s"
        )
    return collection


def run(essay_set: int, n_queries: int, cache_dir: Path, shipped: bool = True, repeats: int = 3) -> None:
    """Build (or reuse) the set's bank and time retrieval for ``n_queries`` fold-0 essays, madrag's against
    Chroma's."""
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
    bank = ExemplarBank.build_or_load(split.pool, rubric, embedder, cache_dir / "banks")
    build = time.perf_counter() - t0
    state = "built" if bank.built_now else "reused (already in cache dir)"
    print(f"bank {state} (SQLite store): {build:.1f} s, {len(split.pool) / build:.1f} essays/s, size {bank.size}")
    shipped_n, stored_n = embedder.from_shipped, embedder.from_store
    print(f"pool vectors: {embedder.texts_embedded} embedded, {shipped_n} shipped, {stored_n} stored")
    t0 = time.perf_counter()
    again = ExemplarBank.build_or_load(split.pool, rubric, embedder, cache_dir / "banks")
    print(f"second build_or_load (SQLite store): {time.perf_counter() - t0:.2f} s (built_now={again.built_now})")
    chroma = stores(bank, cache_dir / "compare", repeats)

    queries = split.eval[:n_queries]
    with_embed, without_embed, embed_only, via_chroma, ratios = [], [], [], [], []
    top_ours, top_chroma = [], []
    differ = ties = compared = top_differ = top_missed = 0
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
        mine = [lv.exemplar for t in rubric.traits for lv in ours[t.name]]
        for a, b in zip(mine, theirs, strict=True):
            compared += 1
            if (a.essay_id if a else None) != (b[0] if b else None):
                differ += 1
                ties += a is not None and b is not None and abs(a.distance - b[1]) <= 1e-6
        t0 = time.perf_counter()
        exact = bank.similar(essay, 5, query_vector=vector)
        top_ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        got = chroma.query(query_embeddings=[listed], n_results=5, where={"essay_id": {"$ne": essay.id}})
        top_chroma.append(time.perf_counter() - t0)
        if [x.essay_id for x in exact] != got["ids"][0]:
            top_differ += 1
            # the same distances in another order is a tie; a larger distance, a nearer essay Chroma missed
            top_missed += any(b - a.distance > 1e-6 for a, b in zip(exact, got["distances"][0], strict=True))
        t0 = time.perf_counter()
        model.embed([essay.text])
        embed_only.append(time.perf_counter() - t0)
    levels = sum(len(t.scores) for t in rubric.traits)
    print(f"procedure 2 per essay ({len(rubric.traits)} traits, {levels} level queries):")
    print(summary("per_level_all incl. query vector lookup", with_embed))
    print(summary("per_level_all, query vector given", without_embed))
    print(summary("query embedding alone (MiniLM)", embed_only))
    print(summary("same queries via Chroma collection.query", via_chroma))
    print(
        f"Chroma / in-memory, pair by pair: median {statistics.median(ratios):.1f}x "
        f"(min {min(ratios):.1f}x, max {max(ratios):.1f}x)"
    )
    print(f"procedure 2 answers differing from Chroma's: {differ} of {compared} (of which ties to 1e-6: {ties})")
    print(summary("procedure 1 (top 5), in memory", top_ours))
    print(summary("procedure 1 (top 5), Chroma", top_chroma))
    print(
        f"procedure 1 top-5 lists differing from Chroma's: {top_differ} of {len(queries)} "
        f"(of which Chroma missed a nearer essay: {top_missed}; the rest are ties to 1e-6 in another order)"
    )
    print(install_weight())
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
    parser.add_argument("--repeats", type=int, default=3, help="fresh-process opens of each store (median)")
    args = parser.parse_args()
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    if args.cache_dir is not None:
        run(args.essay_set, args.n_queries, args.cache_dir, shipped=not args.no_shipped, repeats=args.repeats)
        return
    with tempfile.TemporaryDirectory(prefix="madrag-bench-") as tmp:
        run(args.essay_set, args.n_queries, Path(tmp), shipped=not args.no_shipped, repeats=args.repeats)


if __name__ == "__main__":
    main()
