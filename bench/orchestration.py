"""Orchestration throughput: madrag's runner vs the seed's one-essay-at-a-time loop, against a real HTTP server.

Every run goes through the real pipeline (``run_scoring`` -> protocol -> recorded agent calls -> SQLite run store
with ``synchronous=FULL``, each call awaiting the commit of its record by the store's writer thread) with
``OpenAICompatProvider`` talking HTTP to the stub OpenAI-compatible server
(``madrag.testing.stub_server``, its own process on 127.0.0.1) that serves ``--capacity`` requests in parallel,
each answered ``--latency`` seconds after it took a slot (the answer is composed within that time, as a real
server generates within its latency); requests beyond capacity wait in its queue.

* madrag: ``run_scoring`` with its default essay concurrency (derived from the provider's concurrency and the
  number of traits), or ``--essay-concurrency``; once per HTTP client (``--clients``, default all three, side
  by side: ``aiohttp``, madrag's client, and the references it was chosen over (``tests/reference_clients.py``):
  ``httpx``, the same requests on httpx2, and ``openai``, the openai package's client).
* seed A.1 baseline: ``run_scoring(essay_concurrency=1)``: one essay at a time, its traits in parallel through
  ``asyncio.gather`` inside the protocol - the orchestration of the MADRAG paper's Appendix A.1 on the same code path
  (with the first client).

Then each client's CPU per call alone (no pipeline, no record writes): the run's recorded Advocate, Skeptic and
Judge requests replayed through ``provider.complete`` with as many in flight as the run had, against the same
stub; and sequentially against a zero-latency stub, beside bare httpx + json and bare aiohttp + orjson (floors).

Ideal: each essay-trait is an independent chain of 3 sequential calls (Advocate -> Skeptic -> Judge), so with
D chains, C slots and latency L the server can do at most min(C, D)/L calls/s, and the makespan is at least
L * max(3, ceil(3D / C)).

Usage: ``.venv/bin/python bench/orchestration.py [--essays 200 --traits 4 --capacity 32 --latency 0.25]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from madrag.agents.calls import CallContext
from madrag.agents.prompts import PromptLibrary
from madrag.data import Essay, load_asap, split_by_fold
from madrag.data.shipped import find_asap_dir
from madrag.pipeline.runner import auto_essay_concurrency, essay_width, run_scoring, tuned_gc
from madrag.protocols import get_protocol
from madrag.providers.base import ChatRequest
from madrag.providers.openai_compat import OpenAICompatProvider
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.records import AgentRecord
from madrag.retrieval.bank import Exemplar, LevelExemplar
from madrag.rubric import Rubric, Trait, load_rubric
from madrag.settings import ScoringSettings
from madrag.store import RunStore
from madrag.testing.stub_answers import MODEL, StubConfig
from madrag.testing.stub_server import StubServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the reference clients live beside the tests
from tests.reference_clients import ClientKind, factory

CALLS_PER_CHAIN = 3
ROLES = ("advocate", "skeptic", "judge")
REPO = Path(__file__).resolve().parents[1]


# -- workload -------------------------------------------------------------------------------------------------


def asap_dir() -> Path:
    """The ASAP folder: $MADRAG_ASAP_DIR, else the copy shipped in the package."""
    return find_asap_dir()


def widen_rubric(rubric: Rubric, n_traits: int) -> Rubric:
    """The first ``n_traits`` traits; beyond the rubric's own, copies named ``<trait>#2`` etc."""
    base = rubric.traits
    traits: list[Trait] = []
    for i in range(n_traits):
        trait = base[i % len(base)]
        copy = i // len(base)
        traits.append(trait if copy == 0 else trait.model_copy(update={"name": f"{trait.name}#{copy + 1}"}))
    return rubric.model_copy(update={"traits": traits})


def take_essays(pool: list[Essay], n: int) -> list[Essay]:
    """``n`` essays, cycling through ``pool`` with ``-r<k>`` id suffixes when more are needed."""
    out = []
    for i in range(n):
        essay = pool[i % len(pool)]
        rep = i // len(pool)
        out.append(essay if rep == 0 else essay.model_copy(update={"id": f"{essay.id}-r{rep}"}))
    return out


class LevelBank:
    """MADRAG's exemplar bank stand-in: per score level, the first pool essay with that reference score."""

    def __init__(self, pool: list[Essay], rubric: Rubric) -> None:
        self._by_level: dict[tuple[str, int], Essay] = {}
        for trait in rubric.traits:
            for essay in pool:
                ref = essay.reference(trait)
                if ref is not None:
                    self._by_level.setdefault((trait.name, ref), essay)

    def per_level(self, essay: Essay, trait: Trait) -> list[LevelExemplar]:
        """Per score: the pool's first essay with that reference (never ``essay``), or None."""
        out = []
        for score in trait.scores:
            match = self._by_level.get((trait.name, score))
            ex = None
            if match is not None and match.id != essay.id:
                ex = Exemplar(essay_id=match.id, text=match.text, scores={}, distance=0.1, similarity=0.9)
            out.append(LevelExemplar(trait=trait.name, score=score, exemplar=ex))
        return out


# -- instrumentation ------------------------------------------------------------------------------------------


class TimedStore(RunStore):
    """The real run store, timing each ``aput``: how long a call waits for its record to be committed (JSON
    serialisation, then INSERT + the fsync of its commit in the writer thread while the event loop runs on)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.put_times: list[float] = []

    async def aput(self, record: AgentRecord) -> bool:
        """The store's ``aput``, timed."""
        start = time.perf_counter()
        try:
            return await super().aput(record)
        finally:
            self.put_times.append(time.perf_counter() - start)


async def watch_loop_lag(lags: list[float], period_s: float = 0.01) -> None:
    """Record how late the event loop wakes a 10 ms sleeper (runs until cancelled)."""
    while True:
        start = time.perf_counter()
        await asyncio.sleep(period_s)
        lags.append(time.perf_counter() - start - period_s)


def vm_kb(field_name: str) -> int:
    """A ``VmXXX`` field of this process's /proc status in kB (0 when absent)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


# -- one run --------------------------------------------------------------------------------------------------

VARIANTS = {
    "madrag": "madrag runner, default essay concurrency",
    "seed": "seed A.1: one essay at a time, its traits in parallel",
}


CLIENTS: tuple[ClientKind, ...] = ("aiohttp", "httpx", "openai")


@dataclass
class RunResult:
    """What one timed run measured: throughput, concurrency, records, CPU, write waits, loop lags, samples."""

    variant: str
    client: ClientKind
    essays: int
    essay_concurrency: int
    wall_s: float
    requests: int
    max_in_flight: int
    records: int
    unique_keys: int
    cpu_s: float
    put_times: list[float] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    samples: list[AgentRecord] = field(default_factory=list)
    client_only_s: float | None = None  # client CPU s per provider.complete alone (client_only_cpu)

    @property
    def rate(self) -> float:
        """Calls per second of wall time."""
        return self.requests / self.wall_s


def make_context(
    variant: str, client_kind: ClientKind, store: RunStore, args: argparse.Namespace, url: str, bank: LevelBank
) -> CallContext:
    """A call context over the stub server through ``client_kind``: run id ``variant``, default settings, two
    retries, the level bank."""
    client = OpenAICompatProvider(
        MODEL, base_url=url, max_concurrency=args.capacity, timeout_s=60.0, http=factory(client_kind)
    )
    return CallContext(
        run_id=variant,
        provider=ManagedProvider(client, RetryPolicy(retries=2, base_delay_s=0.5, timeout_s=60.0)),
        store=store,
        prompts=PromptLibrary(),
        settings=ScoringSettings(),
        bank=bank,  # type: ignore[arg-type]
    )


async def score_once(
    variant: str,
    client_kind: ClientKind,
    essays: list[Essay],
    rubric: Rubric,
    args: argparse.Namespace,
    server: StubServer,
    bank: LevelBank,
) -> RunResult:
    """One timed ``run_scoring`` over a fresh run store and a fresh HTTP client of ``client_kind``."""
    concurrency = 1 if variant == "seed" else args.essay_concurrency
    protocols = [get_protocol(args.protocol)]
    used = concurrency or auto_essay_concurrency(args.capacity, essay_width(protocols, len(rubric.traits)))
    with tempfile.TemporaryDirectory(prefix="madrag-bench-", dir=args.tmp) as tmp:
        path = Path(tmp) / "store.sqlite"
        store = TimedStore(path)
        ctx = make_context(variant, client_kind, store, args, server.base_url, bank)
        lags: list[float] = []
        watcher = asyncio.create_task(watch_loop_lag(lags))
        server.reset_stats()
        cpu0, t0 = time.process_time(), time.perf_counter()
        try:
            coro = run_scoring(ctx, essays, rubric, protocols, essay_concurrency=concurrency)
            await asyncio.wait_for(coro, args.max_seconds)
        finally:
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            watcher.cancel()
            await ctx.provider.aclose()
        stats = server.stats()
        keys = list(store.keys())
        samples = [r for role in ROLES for r in itertools.islice(store.records(role=role), 1)]
        store.close()
    return RunResult(
        variant, client_kind, len(essays), used, wall, stats.requests, stats.max_in_flight, len(keys),
        len(set(keys)), cpu, store.put_times, lags, samples,
    )  # fmt: skip


# -- where the client's time goes -----------------------------------------------------------------------------


async def cpu_per_call(provider: OpenAICompatProvider, request: ChatRequest, n: int) -> float:
    """Client CPU seconds per ``provider.complete`` of ``request`` (after one warm-up call)."""
    await provider.complete(request)
    start = time.process_time()
    for _ in range(n):
        await provider.complete(request)
    return (time.process_time() - start) / n


async def raw_cpu_per_call(url: str, request: ChatRequest, n: int) -> float:
    """Client CPU seconds per bare httpx POST of the same body (the floor under the provider's cost)."""
    body = OpenAICompatProvider(MODEL, base_url=url).request_kwargs(request)
    async with httpx.AsyncClient(timeout=60.0) as client:
        start = time.process_time()
        for _ in range(n):
            (await client.post(f"{url}/chat/completions", json=body)).json()
        return (time.process_time() - start) / n


async def raw_aiohttp_cpu_per_call(url: str, request: ChatRequest, n: int) -> float:
    """Client CPU seconds per bare aiohttp POST of the same body, orjson both ways (the aiohttp floor)."""
    import aiohttp
    import orjson

    body = orjson.dumps(OpenAICompatProvider(MODEL, base_url=url).request_kwargs(request))
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:
        start = time.process_time()
        for _ in range(n):
            async with session.post(f"{url}/chat/completions", data=body, headers=headers) as answer:
                orjson.loads(await answer.read())
        return (time.process_time() - start) / n


async def client_only_cpu(kind: ClientKind, samples: list[AgentRecord], n: int, width: int, url: str) -> float:
    """Client CPU seconds per ``provider.complete`` alone (no pipeline, no record writes): ``n`` calls cycling
    through the recorded requests, ``width`` workers each making its share one after another (each response
    dropped once it arrives, as a run does once it is recorded), after one warm-up call of each request."""
    requests = [ChatRequest(messages=r.messages, **_request_settings(r)) for r in samples]
    provider = OpenAICompatProvider(MODEL, base_url=url, max_concurrency=width, http=factory(kind))

    async def worker(first: int) -> None:
        for i in range(first, n, width):
            await provider.complete(requests[i % len(requests)])

    try:
        await asyncio.gather(*(provider.complete(r) for r in requests))
        start = time.process_time()
        await asyncio.gather(*(worker(w) for w in range(width)))
        return (time.process_time() - start) / n
    finally:
        await provider.aclose()


def put_cost(record: AgentRecord, n: int, tmp: str | None) -> tuple[float, float]:
    """(CPU s, wall s) per synchronous ``RunStore.put`` of ``record`` (real store: WAL, synchronous=FULL)."""
    with tempfile.TemporaryDirectory(prefix="madrag-bench-", dir=tmp) as folder:
        store = RunStore(Path(folder) / "store.sqlite")
        cpu0, t0 = time.process_time(), time.perf_counter()
        for i in range(n):
            store.put(record.model_copy(update={"key": f"{record.key}#{i}"}))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
        store.close()
    return cpu / n, wall / n


async def aput_cost(record: AgentRecord, n: int, tmp: str | None) -> tuple[float, float, float]:
    """(event-loop thread CPU s, writer thread CPU s, caller's wait s) per ``RunStore.aput`` of ``record``,
    one at a time (no group commit)."""
    copies = [record.model_copy(update={"key": f"{record.key}#{i}"}) for i in range(n + 1)]
    with tempfile.TemporaryDirectory(prefix="madrag-bench-", dir=tmp) as folder:
        store = RunStore(Path(folder) / "store.sqlite")
        await store.aput(copies[0])  # starts the writer thread
        own0, cpu0, t0 = time.thread_time(), time.process_time(), time.perf_counter()
        for copy in copies[1:]:
            await store.aput(copy)
        own, cpu, wall = time.thread_time() - own0, time.process_time() - cpu0, time.perf_counter() - t0
        store.close()
    return own / n, (cpu - own) / n, wall / n


async def overhead_breakdown(samples: list[AgentRecord], args: argparse.Namespace, n: int = 40) -> list[str]:
    """Per-call client cost of one recorded Advocate and one Judge request, replayed sequentially against a
    zero-latency stub: ``OpenAICompatProvider`` as madrag uses it and bare HTTP + JSON; and one run-store write,
    synchronous (``put``) and as the pipeline makes it (``aput``, committed by the writer thread)."""
    config = StubConfig(1, 0.0, debater_tokens=args.debater_tokens, judge_tokens=args.judge_tokens)
    lines = [
        f"where the client's time goes (sequential replay of recorded requests, {n} calls each, no latency, "
        "GC tuned as in a run):"
    ]
    with StubServer(config) as quick, tuned_gc():
        for record in samples:
            request = ChatRequest(messages=record.messages, **_request_settings(record))
            costs = []
            for kind in args.clients:
                real = OpenAICompatProvider(MODEL, base_url=quick.base_url, max_concurrency=1, http=factory(kind))
                try:
                    costs.append(f"{1000 * await cpu_per_call(real, request, n):.2f} ms ({kind})")
                finally:
                    await real.aclose()
            t_raw = await raw_cpu_per_call(quick.base_url, request, n)
            t_aio = await raw_aiohttp_cpu_per_call(quick.base_url, request, n)
            put_cpu, put_wall = put_cost(record, n, args.tmp)
            loop_cpu, writer_cpu, wait = await aput_cost(record, n, args.tmp)
            lines.append(
                f"  {record.role:<9} ({len(record.tokens or [])} tokens x top-{request.top_logprobs} logprobs): "
                f"client CPU per call {', '.join(costs)}, {1000 * t_raw:.2f} ms (bare httpx + json), "
                f"{1000 * t_aio:.2f} ms (bare aiohttp + orjson); "
                f"store.put CPU {1000 * put_cpu:.2f} ms, wall {1000 * put_wall:.2f} ms (blocking); "
                f"store.aput (as used): event-loop CPU {1000 * loop_cpu:.2f} ms, writer-thread CPU "
                f"{1000 * writer_cpu:.2f} ms, the call waits {1000 * wait:.2f} ms for the commit (the loop does not)"
            )
    return lines


def _request_settings(record: AgentRecord) -> dict[str, Any]:
    """A recorded call's request settings (what it was sent and a constrained step's settings left out)."""
    return {k: v for k, v in record.settings.items() if k not in ("sent", "score_step", "score_steps")}


# -- report ---------------------------------------------------------------------------------------------------


def hardware() -> str:
    """CPU model, cores, RAM, OS and Python version."""
    model = "unknown CPU"
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo", encoding="ascii") as fh:
        mem_kb = int(fh.readline().split()[1])
    return (
        f"{model}, {os.cpu_count()} cores, {mem_kb / 2**20:.1f} GiB RAM; {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}"
    )


def load_average() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def ideal(chains: int, capacity: int, latency: float) -> tuple[float, float]:
    """(calls/s, makespan lower bound in s) for ``chains`` independent 3-call chains on ``capacity`` slots."""
    rate = min(capacity, chains) / latency
    makespan = latency * max(CALLS_PER_CHAIN, math.ceil(CALLS_PER_CHAIN * chains / capacity))
    return rate, makespan


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank; 0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def describe_run(r: RunResult, n_traits: int, args: argparse.Namespace) -> list[str]:
    """The report lines of one run: throughput against the ideal, CPU, record-write waits, loop lag."""
    chains = r.essays * n_traits
    in_flight = min(r.essay_concurrency * n_traits, chains)
    full_rate, bound = ideal(chains, args.capacity, args.latency)
    own_rate = min(args.capacity, in_flight) / args.latency
    puts, lags = r.put_times, r.lags
    ok = "ok" if r.records == r.unique_keys == CALLS_PER_CHAIN * chains else "MISMATCH"
    return [
        f"[{r.variant}, client {r.client}] {VARIANTS[r.variant]}: {r.essays} essays x {n_traits} traits, "
        f"{r.essay_concurrency} essay(s) in flight (<= {in_flight} chains; ceiling {own_rate:.1f} calls/s)",
        f"  calls {r.requests}, records {r.records} ({r.unique_keys} unique keys, 3 per essay-trait: {ok}), "
        f"server max concurrency {r.max_in_flight}/{args.capacity}",
        f"  wall {r.wall_s:.2f} s (bound {bound:.2f} s): {r.rate:.1f} calls/s = {100 * r.rate / full_rate:.1f}% "
        f"of the ideal {full_rate:.1f} calls/s",
        f"  client CPU {r.cpu_s:.2f} s ({100 * r.cpu_s / r.wall_s:.0f}% of one core, "
        f"{1000 * r.cpu_s / max(r.requests, 1):.2f} ms/call); record writes {len(puts)}, the call waiting for "
        f"the commit (off the event loop): mean {1000 * statistics.fmean(puts or [0]):.2f} ms, p99 "
        f"{1000 * pct(puts, 0.99):.2f} ms; event-loop lag p50 "
        f"{1000 * pct(lags, 0.5):.1f} ms, p99 {1000 * pct(lags, 0.99):.1f} ms, max {1000 * max(lags or [0]):.1f} ms",
        f"  client-side ceiling: one event loop on a free core could issue at most {r.requests / r.cpu_s:.0f} calls/s "
        f"at this CPU cost (requests / client CPU, the writer thread's included)",
    ]


def summary(runs: dict[str, RunResult], n_traits: int, args: argparse.Namespace) -> list[str]:
    """The RESULT lines: each client's madrag rate against the ideal and its client CPU per call, and the
    speed-up over the seed baseline."""
    lines = []
    for name, run in runs.items():
        if run.variant != "madrag":
            continue
        rate, _ = ideal(run.essays * n_traits, args.capacity, args.latency)
        alone = "" if run.client_only_s is None else f"; client-only CPU {1000 * run.client_only_s:.2f} ms/call"
        lines.append(
            f"RESULT {name}: {run.rate:.1f} calls/s = {100 * run.rate / rate:.1f}% of the ideal {rate:.1f} calls/s; "
            f"run CPU {1000 * run.cpu_s / max(run.requests, 1):.2f} ms/call ({100 * run.cpu_s / run.wall_s:.0f}% "
            f"of one core; pipeline and record writes included){alone}"
        )
    if "seed" in runs:
        base, ours = runs["seed"], runs[f"madrag[{runs['seed'].client}]"]
        lines.append(f"RESULT seed A.1 baseline: {base.rate:.1f} calls/s; madrag speed-up {ours.rate / base.rate:.2f}x")
    return lines


# -- main -----------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The bench's options, checked."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--essays", type=int, default=200, help="essays to score (ASAP set 7, fold 0)")
    p.add_argument("--traits", type=int, default=4, help="traits per essay (set 7 has 4; more are copies)")
    p.add_argument("--capacity", type=int, default=32, help="server slots = client max_concurrency")
    p.add_argument("--latency", type=float, default=0.25, help="seconds per request at the server")
    p.add_argument("--protocol", default="MADRAG", choices=["MADRAG", "MAD"], help="debate protocol")
    p.add_argument("--essay-concurrency", type=int, default=None, help="madrag run: essays in flight (default auto)")
    p.add_argument("--baseline-essays", type=int, default=None, help="essays for the seed baseline (default all)")
    p.add_argument("--no-baseline", action="store_true", help="skip the seed-style baseline")
    p.add_argument("--debater-tokens", type=int, default=150, help="words per Advocate/Skeptic answer")
    p.add_argument("--judge-tokens", type=int, default=60, help="words per Judge rationale")
    p.add_argument("--max-seconds", type=float, default=900.0, help="time limit of each run")
    p.add_argument("--tmp", default=None, help="folder for the run stores (default: the system temp dir)")
    p.add_argument("--client-calls", type=int, default=960, help="calls per client of the client-only replay")
    p.add_argument(
        "--clients", default=",".join(CLIENTS), help=f"HTTP clients to compare, comma-separated ({', '.join(CLIENTS)})"
    )
    args = p.parse_args(argv)
    args.clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if not args.clients or any(c not in CLIENTS for c in args.clients):
        p.error(f"--clients takes a comma-separated list of {', '.join(CLIENTS)}")
    if min(args.essays, args.traits, args.capacity) < 1 or args.latency <= 0:
        p.error("--essays, --traits and --capacity must be >= 1 and --latency > 0")
    return args


async def bench(args: argparse.Namespace) -> None:
    """Start the stub, run every variant over the same essays and print the report."""
    data = asap_dir()
    rubric = widen_rubric(load_rubric(data / "rubric_set7.json"), args.traits)
    split = split_by_fold(load_asap(data / "training_set_rel3_sets7_8.tsv", load_rubric(data / "rubric_set7.json")), 0)
    essays = take_essays(split.eval, args.essays)
    bank = LevelBank(split.pool, rubric)
    config = StubConfig(args.capacity, args.latency, debater_tokens=args.debater_tokens, judge_tokens=args.judge_tokens)
    chains = len(essays) * len(rubric.traits)
    rate, bound = ideal(chains, args.capacity, args.latency)
    print("madrag orchestration bench")
    print(f"hardware: {hardware()}; load average at start {load_average()}")
    print(
        f"workload: {len(essays)} essays x {len(rubric.traits)} traits of ASAP set 7 (fold 0), protocol "
        f"{args.protocol}: Advocate -> Skeptic -> Judge per trait"
        + (
            ", the Judge given one exemplar per score level from an in-memory stub bank"
            if args.protocol == "MADRAG"
            else ""
        )
    )
    print(
        f"backend: stub OpenAI-compatible HTTP server on 127.0.0.1 (own process), C = {args.capacity} slots, "
        f"L = {args.latency:g} s from taking a slot to answering, top-5 logprobs, "
        f"{args.debater_tokens}/{args.judge_tokens}-word debater/judge answers; "
        f"client OpenAICompatProvider(max_concurrency={args.capacity}, client={'|'.join(args.clients)}), "
        "no response cache; "
        "run store SQLite WAL synchronous=FULL, records committed by its writer thread (records arriving together "
        "share a commit), each call resuming once its record is committed"
    )
    print(
        f"ideal: D = {len(essays)} x {len(rubric.traits)} = {chains} independent {CALLS_PER_CHAIN}-call chains; "
        f"min(C, D)/L = min({args.capacity}, {chains})/{args.latency:g} = {rate:.1f} calls/s; "
        f"makespan >= L*max({CALLS_PER_CHAIN}, ceil({CALLS_PER_CHAIN}D/C)) = {bound:.2f} s"
    )
    runs: dict[str, RunResult] = {}
    with StubServer(config) as server:
        for kind in args.clients:
            run = runs[f"madrag[{kind}]"] = await score_once("madrag", kind, essays, rubric, args, server, bank)
            print("\n".join(describe_run(run, len(rubric.traits), args)), flush=True)
        if not args.no_baseline:
            n_base = min(args.baseline_essays or len(essays), len(essays))
            runs["seed"] = await score_once("seed", args.clients[0], essays[:n_base], rubric, args, server, bank)
            print("\n".join(describe_run(runs["seed"], len(rubric.traits), args)), flush=True)
        print(
            f"client-only CPU per call (provider.complete alone, no pipeline, no record writes: {args.client_calls} "
            f"calls of the run's recorded {'/'.join(ROLES)} requests, {args.capacity} in flight, the same stub, "
            "GC tuned as in a run):",
            flush=True,
        )
        with tuned_gc():  # as in a run
            for kind in args.clients:
                run = runs[f"madrag[{kind}]"]
                run.client_only_s = await client_only_cpu(
                    kind, run.samples, args.client_calls, args.capacity, server.base_url
                )
                print(f"  {kind:<8} {1000 * run.client_only_s:.2f} ms/call", flush=True)
        server_rss = server.stats().peak_rss_kb
    print("\n".join(await overhead_breakdown(runs[f"madrag[{args.clients[0]}]"].samples, args)))
    print("\n".join(summary(runs, len(rubric.traits), args)))
    print(
        f"peak RSS: bench process {vm_kb('VmHWM') / 1024:.0f} MB (VmHWM over all runs), stub server "
        f"{server_rss / 1024:.0f} MB; load average at end {load_average()}"
    )


if __name__ == "__main__":
    asyncio.run(bench(parse_args()))
