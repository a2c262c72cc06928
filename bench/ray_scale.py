"""Scale-out bench: one process vs Ray with 1 and 2 workers, against two stub endpoints, in one run.

Every variant runs the real job (:func:`madrag.pipeline.job.execute`: data file, protocol, run store) with the
same workload - ``--essays`` ASAP set-7 essays x 4 traits with MAD (Advocate -> Skeptic -> Judge) - against the
same two stub OpenAI-compatible servers (``madrag.testing.stub_server``, own processes on 127.0.0.1), each with
``--capacity`` slots answering ``--latency`` s after a request takes a slot, given to madrag as two
``--base-url`` endpoints of one model (``--concurrency`` = capacity per endpoint):

* ``local``: the runner in this process;
* ``ray:N``: ``--ray`` with N workers on a local Ray instance (this process is the driver and the run store's
  one writer; the workers score shards with the same runner and stream their records to it).

Reported per variant: calls/s over the scoring phase (Ray's start-up excluded, reported apart) and its share of
the ideal min(2 x capacity, chains) / latency; client CPU per call (this process, plus the Ray workers'); and
that every record is in the store once. Then where a call's client CPU goes, with the before/after of the two
costs cut (decoding an answer; the driver's work per streamed record) measured side by side, and the driver's
write rate, which bounds a cluster's calls/s however many workers it has.

Usage: ``.venv/bin/python bench/ray_scale.py [--essays 150 --capacity 128 --latency 0.25 --workers 1,2]``.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import platform
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pydantic_core

from madrag.data import load_asap, split_by_fold
from madrag.data.shipped import find_asap_dir
from madrag.distributed.options import RayOptions
from madrag.pipeline.hooks import RunHooks
from madrag.pipeline.job import ScoreJob, execute
from madrag.pipeline.runner import tuned_gc
from madrag.providers import ProviderSpec
from madrag.providers.base import ChatRequest
from madrag.providers.openai_compat import OpenAICompatProvider
from madrag.records import AgentRecord
from madrag.rubric import load_rubric
from madrag.store import RunStore
from madrag.store.writer import record_row
from madrag.testing.stub_server import MODEL, StubServer

REPO = Path(__file__).resolve().parents[1]
CALLS_PER_CHAIN = 3
TRAITS = 4


def asap_dir() -> Path:
    """The ASAP folder: $MADRAG_ASAP_DIR, else the copy shipped in the package."""
    return find_asap_dir()


def write_essays(n: int, folder: Path) -> tuple[Path, Path]:
    """(a CSV of ``n`` set-7 fold-0 essays, cycled with ``-r<k>`` ids when more are needed; the rubric)."""
    asap = asap_dir()
    rubric = load_rubric(asap / "rubric_set7.json")
    pool = split_by_fold(load_asap(asap / "training_set_rel3_sets7_8.tsv", rubric), 0).eval
    path = folder / "essays.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["id", "text"])
        for i in range(n):
            essay = pool[i % len(pool)]
            out.writerow([essay.id if i < len(pool) else f"{essay.id}-r{i // len(pool)}", essay.text])
    return path, asap / "rubric_set7.json"


# -- one variant ------------------------------------------------------------------------------------------------


@dataclass
class Variant:
    name: str
    workers: int  # 0: this process
    calls: int
    records: int
    unique: int
    scoring_s: float
    startup_s: float
    driver_cpu_s: float
    worker_cpu_s: float | None

    @property
    def rate(self) -> float:
        """Calls per second over the scoring phase."""
        return self.calls / self.scoring_s

    @property
    def cpu_per_call_ms(self) -> float | None:
        """Client CPU (this process and the workers) per call, in ms; None when a worker did not report."""
        if self.worker_cpu_s is None:
            return None
        return 1000 * (self.driver_cpu_s + self.worker_cpu_s) / self.calls


def run_variant(workers: int, data: Path, rubric: Path, stubs: list[StubServer], args: argparse.Namespace) -> Variant:
    """Score the workload once (fresh run store); time the scoring phase and the client's CPU."""
    for stub in stubs:
        stub.reset_stats()
    marks: dict[str, tuple[float, float]] = {}

    class Marks(RunHooks):
        def on_stage(self, message: str) -> None:
            if message.startswith("scoring "):
                marks["scoring"] = (time.perf_counter(), time.process_time())

    with tempfile.TemporaryDirectory(prefix="madrag-ray-bench-", dir=args.tmp) as tmp:
        job = ScoreJob(
            data=data,
            rubric=rubric,
            run_dir=Path(tmp) / "run",
            eval_fold=None,
            protocols=["MAD"],
            provider=ProviderSpec(
                kind="openai",
                model=MODEL,
                base_url=stubs[0].base_url,
                extra_base_urls=[s.base_url for s in stubs[1:]],
                concurrency=args.capacity,
                retries=2,
                timeout_s=120.0,
            ),
            response_cache=False,
            ray=RayOptions(workers=workers) if workers else None,
        )
        t0 = time.perf_counter()
        asyncio.run(execute(job, Marks()))
        end, cpu_end = time.perf_counter(), time.process_time()
        store = RunStore(job.run_dir / "store.sqlite")
        keys, info = store.keys(), store.get_meta("ray") or {}
        records = store.count()
        store.close()
    calls = sum(s.stats().requests for s in stubs)
    if workers:
        scoring_s = float(info["scoring_s"])
        return Variant(
            f"ray:{workers}", workers, calls, records, len(keys), scoring_s, end - t0 - scoring_s,
            float(info["driver_cpu_s"]), info.get("worker_cpu_s"),
        )  # fmt: skip
    wall0, cpu0 = marks["scoring"]
    return Variant("local", 0, calls, records, len(keys), end - wall0, wall0 - t0, cpu_end - cpu0, 0.0)


def describe(v: Variant, chains: int, args: argparse.Namespace) -> list[str]:
    """The report lines of one variant."""
    slots = len(args.endpoints) * args.capacity
    ideal = min(slots, chains) / args.latency
    ok = "ok" if v.records == v.unique == CALLS_PER_CHAIN * chains else "MISMATCH"
    where = "this process" if not v.workers else f"{v.workers} Ray worker(s) + this process as driver"
    cpu = v.cpu_per_call_ms
    cpu_text = "n/a" if cpu is None else f"{cpu:.2f} ms/call"
    workers = "" if not v.workers else f", workers {v.worker_cpu_s:.1f} s" if v.worker_cpu_s is not None else ""
    return [
        f"[{v.name}] {where}",
        f"  calls {v.calls}, records {v.records} ({v.unique} unique, 3 per essay-trait: {ok})",
        f"  scoring {v.scoring_s:.2f} s: {v.rate:.1f} calls/s = {100 * v.rate / ideal:.1f}% of the ideal {ideal:.0f} "
        f"calls/s (start-up before it, Ray's included: {v.startup_s:.1f} s)",
        f"  client CPU {cpu_text} (driver {v.driver_cpu_s:.1f} s{workers})",
    ]


# -- where a call's CPU goes, and the two cuts ------------------------------------------------------------------


def per_ms(fn: object, n: int) -> float:
    """CPU ms per call of ``fn()``, over ``n`` calls."""
    start = time.process_time()
    for _ in range(n):
        fn()  # type: ignore[operator]
    return 1000 * (time.process_time() - start) / n


async def call_cpu_ms(provider: OpenAICompatProvider, request: ChatRequest, n: int) -> float:
    """CPU ms per sequential provider call of ``request`` (after one warm-up call)."""
    await provider.complete(request)
    start = time.process_time()
    for _ in range(n):
        await provider.complete(request)
    return 1000 * (time.process_time() - start) / n


async def driver_rows_per_s(records: list[AgentRecord], folder: Path, old: bool) -> tuple[float, float]:
    """(records/s, driver CPU ms per record) writing streamed records as the driver does: now, the rows the
    workers serialised (plus the light copy progress gets); before, parsing every full record and serialising
    it again. Records go in batches of 50 (the size of a busy stream's batch), each batch one group commit."""
    blobs = [r.model_dump_json() for r in records]
    rows = [record_row(r) for r in records]
    lights = [r.model_dump_json(exclude={"messages", "tokens", "context"}) for r in records]
    store = RunStore(folder / ("old.sqlite" if old else "new.sqlite"))
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for i in range(0, len(records), 50):
        if old:
            batch = [AgentRecord.model_validate_json(b) for b in blobs[i : i + 50]]
            await asyncio.gather(*(store.aput(r) for r in batch))
        else:
            await asyncio.gather(*(store.aput_row(r) for r in rows[i : i + 50]))
            for light in lights[i : i + 50]:
                AgentRecord.model_validate_json(light)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    store.close()
    return len(records) / wall, 1000 * cpu / len(records)


async def costs(folder: Path, n: int) -> list[str]:
    """One recorded Advocate request replayed against a zero-latency stub."""
    lines = [
        "where a call's client CPU goes (one Advocate call: 150 words, top-5 logprobs; sequential, no latency, GC "
        "tuned as in a run):"
    ]
    with StubServer(capacity=4, latency_s=0.0) as stub:
        provider = OpenAICompatProvider(MODEL, base_url=stub.base_url, max_concurrency=4)
        data = Path(folder) / "data"
        data.mkdir()
        csv_path, rubric = write_essays(1, data)
        job = ScoreJob(
            data=csv_path, rubric=rubric, run_dir=Path(folder) / "one", eval_fold=None, protocols=["MAD"],
            provider=ProviderSpec(kind="openai", model=MODEL, base_url=stub.base_url), response_cache=False,
        )  # fmt: skip
        await execute(job)
        store = RunStore(job.run_dir / "store.sqlite")
        sample = next(store.records(role="advocate"))
        records = list(store.records())
        store.close()
        request = ChatRequest(messages=sample.messages, **sample.settings)
        body = httpx.post(f"{stub.base_url}/chat/completions", json=provider.request_kwargs(request)).content
        whole = await call_cpu_ms(provider, request, n)
        await provider.aclose()
    loads, from_json = per_ms(lambda: json.loads(body), n), per_ms(lambda: pydantic_core.from_json(body), n)
    tokens = per_ms(lambda: provider._to_response(request, body, 0.0), n) - from_json
    row = per_ms(lambda: record_row(sample), n)
    lines += [
        f"  provider call {whole:.2f} ms CPU in all (HTTP client, decoding, checks); of which decoding the "
        f"{len(body) // 1024} KiB answer: before {loads:.2f} ms (json.loads), after {from_json:.2f} ms "
        f"(pydantic_core.from_json): {whole + loads - from_json:.2f} -> {whole:.2f} ms per call",
        f"  building the {len(sample.tokens or [])} checked tokens with their alternatives: {tokens:.2f} ms; "
        f"serialising the record for the store: {row:.2f} ms",
    ]
    many = [records[i % len(records)].model_copy(update={"key": f"k{i}"}) for i in range(2000)]
    old_rate, old_cpu = await driver_rows_per_s(many, folder, old=True)
    new_rate, new_cpu = await driver_rows_per_s(many, folder, old=False)
    lines += [
        f"the driver's work per streamed record ({len(many)} records of a MAD run, batches of 50, SQLite WAL "
        "synchronous=FULL):",
        f"  before (parse the full record, serialise it again): {old_cpu:.2f} ms CPU, {old_rate:.0f} records/s",
        f"  after (write the worker's row, parse its light copy): {new_cpu:.2f} ms CPU, {new_rate:.0f} records/s "
        "= the most calls/s one driver can take in, whatever the number of workers",
    ]
    return lines


def embedding_costs(data: Path, n_batch: int = 64, n_single: int = 16) -> list[str]:
    """Query embeddings on the driver or on the workers: MiniLM's start-up, and its CPU per essay in one batch
    (a shard's essays) and one at a time."""
    from madrag.retrieval.embedder import MiniLMEmbedder

    with data.open(encoding="utf-8") as fh:
        texts = [row["text"] for row in csv.DictReader(fh)]
    model = MiniLMEmbedder()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    model.embed(texts[:1])
    load_wall, load_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    cpu0 = time.process_time()
    model.embed(texts[1 : 1 + n_batch])
    batch = (time.process_time() - cpu0) / n_batch
    cpu0 = time.process_time()
    for text in texts[1 + n_batch : 1 + n_batch + n_single]:
        model.embed([text])
    single = (time.process_time() - cpu0) / n_single
    calls = TRAITS * CALLS_PER_CHAIN  # MADRAG's calls per essay
    return [
        "query embeddings (all-MiniLM-L6-v2 over 256-piece windows, ASAP essays):",
        f"  loading the model: {load_wall:.1f} s ({load_cpu:.1f} s CPU), once per process that embeds",
        f"  CPU per essay: {1000 * batch:.0f} ms in a batch of {n_batch}, {1000 * single:.0f} ms one at a time",
        f"  on the driver (one batch per shard) a driver core embeds {1 / batch:.1f} essays/s = "
        f"{calls / batch:.0f} MADRAG calls/s at most, for the whole cluster; on the workers (the default) each "
        f"adds {1000 * batch / calls:.1f} ms of CPU per call and the cap grows with the workers",
    ]


# -- main -------------------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--essays", type=int, default=150, help="essays to score (ASAP set 7), 4 traits each")
    p.add_argument("--capacity", type=int, default=128, help="slots of each stub endpoint = --concurrency")
    p.add_argument("--latency", type=float, default=0.25, help="seconds per request at a stub")
    p.add_argument("--endpoints", type=int, default=2, help="stub endpoints (--base-url given this many times)")
    p.add_argument("--workers", default="1,2", help="Ray worker counts to run, comma-separated")
    p.add_argument("--replays", type=int, default=100, help="sequential calls for the per-call costs")
    p.add_argument("--tmp", default=None, help="folder for run stores (default: the system temp dir)")
    p.add_argument("--embeddings", action="store_true", help="also measure query embeddings (loads MiniLM)")
    p.add_argument("--only-embeddings", action="store_true", help="measure only the query embeddings")
    args = p.parse_args()
    args.endpoints = list(range(args.endpoints))
    return args


def main() -> None:
    """Run every variant, then the per-call costs; print the report."""
    args = parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
    print("madrag scale-out bench (one process vs Ray)")
    print(f"machine: {model}, {os.cpu_count()} cores; Python {platform.python_version()}; load average at start "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    chains = args.essays * TRAITS
    slots = len(args.endpoints) * args.capacity
    with tempfile.TemporaryDirectory(prefix="madrag-ray-bench-", dir=args.tmp) as tmp:
        data, rubric = write_essays(args.essays, Path(tmp))
        if args.only_embeddings:
            print("\n".join(embedding_costs(data)))
            print(f"load average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            return
        print(
            f"workload: {args.essays} essays x {TRAITS} traits (ASAP set 7), MAD: {chains} chains of 3 calls; "
            f"backends: {len(args.endpoints)} stub endpoints x {args.capacity} slots, L = {args.latency:g} s, "
            f"top-5 logprobs; ideal min({slots}, {chains}) / {args.latency:g} = "
            f"{min(slots, chains) / args.latency:.0f} calls/s"
        )
        stubs = [StubServer(capacity=args.capacity, latency_s=args.latency).start() for _ in args.endpoints]
        try:
            variants = [run_variant(0, data, rubric, stubs, args)]
            for n in (int(x) for x in args.workers.split(",") if x.strip()):
                variants.append(run_variant(n, data, rubric, stubs, args))
        finally:
            for stub in stubs:
                stub.stop()
        for v in variants:
            print("\n".join(describe(v, chains, args)))
        with tuned_gc():  # as during a run
            print("\n".join(asyncio.run(costs(Path(tmp), args.replays))))
        if args.embeddings:
            print("\n".join(embedding_costs(data)))
    base = variants[0]
    for v in variants:
        cpu = v.cpu_per_call_ms
        print(
            f"RESULT {v.name}: {v.rate:.1f} calls/s ({v.rate / base.rate:.2f}x local), client CPU "
            + ("n/a" if cpu is None else f"{cpu:.2f} ms/call")
        )
    print(f"load average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
