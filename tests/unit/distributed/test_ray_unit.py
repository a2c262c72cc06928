"""The distributed run's parts without a cluster: the shipped bank, the plan, a worker's stream, the dispatcher.

The worker (:class:`ShardWorker`) and the dispatcher run in this process: a worker's ``score`` is the same
async generator Ray streams from, and the dispatcher talks to stand-in actors with the same ``.remote`` calls,
one of which dies mid-shard the way a killed Ray worker does (``ActorUnavailableError``).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import BagOfWordsEmbedder, keep_derived_scores, make_ctx, needs_ray

from madrag.agents.calls import CallContext
from madrag.agents.prompts import PromptLibrary
from madrag.cli.groups import implied_values
from madrag.data import Essay
from madrag.distributed.bank import ShippedBanks, ShippedEmbedder, snapshot, text_key
from madrag.distributed.dispatch import Dispatcher
from madrag.distributed.driver import ordered, worker_spec
from madrag.distributed.options import RayOptions, ray_options, ray_summary
from madrag.distributed.shard import Shard, known_records, make_shards, plan_run, shard_size
from madrag.distributed.worker import ShardWorker, WorkerSetup, prompt_library
from madrag.errors import ProviderError
from madrag.pipeline.final_scores import keeper
from madrag.pipeline.runner import run_scoring
from madrag.protocols import CONSENSUS_ABLATION, get_protocol
from madrag.protocols.base import TraitScore
from madrag.providers import ProviderSpec, managed
from madrag.providers.fake import FakeProvider, FakeReply
from madrag.records import AgentRecord
from madrag.retrieval.bank import ExemplarBank
from madrag.retrieval.folds import FoldBanks
from madrag.rubric import Rubric, Trait
from madrag.settings import ScoringSettings
from madrag.store import RunStore

LEVELS = {0: "none", 1: "some", 2: "good", 3: "strong"}
RUBRIC = Rubric(traits=[Trait(name=n, min=0, max=3, levels=LEVELS) for n in ("Ideas", "Organization", "Style")])
PROTOCOLS = ["MAD", "SA"]


def essay(i: int, fold: int = 0) -> Essay:
    rng = random.Random(i)
    words = " ".join(f"w{rng.randrange(40)}" for _ in range(30))
    scores = {t.name: [float((i + j) % 4)] for j, t in enumerate(RUBRIC.traits)}
    return Essay(id=f"e{i}", text=f"Essay {i}: {words}.", fold=fold, rater_scores=scores)


ESSAYS = [essay(i) for i in range(6)]


# -- options and small helpers -----------------------------------------------------------------------------------


def test_ray_without_a_value_means_a_local_instance() -> None:
    argv = ["score", "--ray", "--limit", "3", "--ray"]
    implied = {"--ray": "local"}
    assert implied_values(argv, implied) == ["score", "--ray", "local", "--limit", "3", "--ray", "local"]
    assert implied_values(["--ray", "10.0.0.1:6379"], implied) == ["--ray", "10.0.0.1:6379"]
    assert ray_options(None) is None
    assert ray_options("local", 3) == RayOptions(address=None, workers=3)
    assert ray_options("10.0.0.1:6379") == RayOptions(address="10.0.0.1:6379")


def test_runs_list_says_where_a_run_was_scored() -> None:
    assert ray_summary(None) == "local"
    assert ray_summary({"address": "local", "workers": 2, "nodes": 1}) == "local Ray: 2 workers, 1 node(s)"
    assert (
        ray_summary({"address": "10.0.0.1:6379", "workers": 8, "nodes": 4}) == "Ray 10.0.0.1:6379: 8 workers, 4 node(s)"
    )


def test_http_backend_concurrency_is_shared_by_the_workers() -> None:
    spec = ProviderSpec(kind="openai", model="m", base_url="http://127.0.0.1:1/v1", concurrency=128)
    backend = managed(spec, None)
    assert worker_spec(spec, backend, 3).concurrency == 43  # ceil(128 / 3): the cluster keeps ~128 in flight
    embedded = ProviderSpec(kind="fake", slots=2)
    assert worker_spec(embedded, managed(embedded, None), 3) == embedded  # a model per worker: its own slots


def test_shards_cover_every_essay_with_work_left_once() -> None:
    assert shard_size(essays_in_flight=16, n_essays=10_000, workers=4, shards_per_worker=2) == 64
    assert shard_size(essays_in_flight=16, n_essays=12, workers=2, shards_per_worker=2) == 2
    plan = plan_run_stub({e.id for e in ESSAYS[1:]})
    shards = make_shards(ESSAYS, plan, 2)
    assert [[e.id for e in s.essays] for s in shards] == [["e1", "e2"], ["e3", "e4"], ["e5"]]
    assert shards[0].units == 2 * 3 * len(PROTOCOLS)


def plan_run_stub(todo: set[str]) -> Any:
    from madrag.distributed.shard import Plan

    left = {p: RUBRIC.trait_names for p in PROTOCOLS}
    return Plan(finished={}, todo={e: dict(left) for e in todo}, partial=set())


# -- the bank, shipped -------------------------------------------------------------------------------------------


def test_shipped_bank_retrieves_what_the_stored_bank_retrieves(tmp_path: Path) -> None:
    pool = [essay(i, fold=1) for i in range(20, 44)]
    bank = ExemplarBank.build_or_load(pool, RUBRIC, BagOfWordsEmbedder(), tmp_path / "banks")
    shot = snapshot(bank)
    shipped = ShippedEmbedder(shot.embedder_name, fallback=BagOfWordsEmbedder)
    restored = shot.restore(shipped)
    assert restored.size == bank.size == len(pool) and restored.fingerprint == bank.fingerprint
    queries = [*ESSAYS[:3], pool[5]]  # a pool essay is never its own exemplar, in either bank
    shipped.add({text_key(e.text): bank.query_vector(e) for e in queries[:2]})
    for query in queries:
        for trait in RUBRIC.traits:
            want, got = bank.per_level(query, trait), restored.per_level(query, trait)
            assert [lvl.exemplar.essay_id if lvl.exemplar else None for lvl in got] == [
                lvl.exemplar.essay_id if lvl.exemplar else None for lvl in want
            ]
            for a, b in zip(got, want, strict=True):
                if a.exemplar and b.exemplar:
                    assert a.exemplar.distance == pytest.approx(b.exemplar.distance, abs=1e-5)
        assert [x.essay_id for x in restored.similar(query, 5)] == [x.essay_id for x in bank.similar(query, 5)]
    assert set(shipped.vectors) == {text_key(e.text) for e in queries}  # two shipped, two embedded on the worker


# -- the plan: finished, partial, untouched ----------------------------------------------------------------------


async def stored_run(tmp_path: Path, essays: list[Essay], keep: Callable[[AgentRecord], bool] | None = None) -> Any:
    """A run store holding ``essays`` scored by MAD and SA, or only the records ``keep`` selects (a run
    stopped part-way: e.g. an essay-trait's debate without its judge)."""
    scratch = make_ctx(tmp_path / "scratch", FakeProvider())
    await run_scoring(scratch, essays, RUBRIC, [get_protocol(p) for p in PROTOCOLS])
    store = RunStore(tmp_path / "store.sqlite")
    for record in scratch.store.records():  # type: ignore[attr-defined]
        if keep is None or keep(record):
            store.put(record)
    keep_derived_scores(store, RUBRIC, PROTOCOLS)  # the final scores of what it holds, as the stopped run kept them
    scratch.store.close()  # type: ignore[attr-defined]
    return store


def no_mad_judge_on(essay_id: str) -> Callable[[AgentRecord], bool]:
    """Every record but the MAD judges of ``essay_id`` (its debates and its SA call are there)."""
    return lambda r: not (r.essay_id == essay_id and r.protocol == "MAD")


async def test_plan_hands_out_only_unfinished_essay_traits(tmp_path: Path) -> None:
    store = await stored_run(tmp_path, ESSAYS[:3], keep=no_mad_judge_on("e2"))
    protocols = [get_protocol(p) for p in PROTOCOLS]
    plan = plan_run(store, ESSAYS, RUBRIC, protocols, ScoringSettings())
    assert set(plan.todo) == {"e2", "e3", "e4", "e5"}  # e0, e1 are finished
    assert plan.partial == {"e2"}  # its debates and its SA call are stored, no MAD judge
    assert plan.todo["e2"] == {"MAD": RUBRIC.trait_names}  # SA scored it already
    assert plan.todo["e3"] == {"MAD": RUBRIC.trait_names, "SA": RUBRIC.trait_names}
    assert len(plan.finished["e0"]) == len(PROTOCOLS) * len(RUBRIC.traits)
    assert {s.protocol for s in plan.finished["e2"]} == {"SA"}
    shard = Shard(index=0, essays=[ESSAYS[2]], todo={"e2": plan.todo["e2"]})
    known = known_records(store, shard, plan.partial)
    assert len(known) == 2 * len(RUBRIC.traits) + 1  # advocate + skeptic per trait, SA's one call
    store.close()


async def test_a_half_judged_ma_trait_is_not_finished(tmp_path: Path) -> None:
    settings = ScoringSettings(judges_per_trait=3)
    scratch = make_ctx(tmp_path / "scratch", FakeProvider(), settings=settings)
    await run_scoring(scratch, ESSAYS[:1], RUBRIC, [get_protocol("MA")])
    store = RunStore(tmp_path / "store.sqlite")
    for record in scratch.store.records():  # type: ignore[attr-defined]
        if not (record.trait == "Style" and record.index == 2):  # the third judge of Style is missing
            store.put(record)
    keep_derived_scores(store, RUBRIC, ["MA"])
    plan = plan_run(store, ESSAYS[:1], RUBRIC, [get_protocol("MA")], settings)
    assert plan.todo == {"e0": {"MA": ["Style"]}} and plan.partial == {"e0"}
    store.close()
    scratch.store.close()  # type: ignore[attr-defined]


# -- a worker's stream -------------------------------------------------------------------------------------------


def worker(latency_s: float = 0.0, protocols: list[str] = PROTOCOLS) -> ShardWorker:
    setup = WorkerSetup(
        run_id="r",
        rubric=RUBRIC,
        protocols=protocols,
        settings=ScoringSettings(),
        provider=ProviderSpec(kind="fake", fake_latency_s=latency_s),
    )
    return ShardWorker(setup, [])


async def collect(stream: AsyncIterator[list[tuple[str, Any]]]) -> list[tuple[str, Any]]:
    return [event async for batch in stream for event in batch]


async def test_worker_streams_records_then_each_essay_then_done() -> None:
    todo = {"e0": {"MAD": ["Style"]}, "e1": {"MAD": RUBRIC.trait_names, "SA": RUBRIC.trait_names}}
    events = await collect(worker().score(Shard(index=0, essays=ESSAYS[:2], todo=todo)))
    kinds = [k for k, _ in events]
    assert kinds[-1] == "done" and kinds.count("essay") == 2
    records = [p for k, p in events if k == "record"]
    for row, light in records:  # the store row carries the whole record, the light copy its identity and score
        full, brief = AgentRecord.model_validate_json(row[-1]), AgentRecord.model_validate_json(light)
        assert full.tokens and full.messages and brief.tokens is None and not brief.messages
        assert row[:6] == (full.key, full.essay_id, full.trait, full.protocol, full.role, full.round)
        assert brief.model_dump(exclude={"messages", "tokens", "context"}) == full.model_dump(
            exclude={"messages", "tokens", "context"}
        )
    assert len(records) == 3 + (3 * 3 + 1)  # e0: Style's debate and judge; e1: every MAD trait and SA's call
    first_essay = kinds.index("essay")
    e0_done = next(i for i, (k, p) in enumerate(events) if k == "essay" and p[0] == "e0")
    assert all(p[0][1] != "e0" for k, p in events[e0_done:] if k == "record")  # records come first
    scores = dict(p for k, p in events if k == "essay")
    assert {(s.protocol, s.trait) for s in scores["e0"]} == {("MAD", "Style")}
    assert len(scores["e1"]) == len(PROTOCOLS) * len(RUBRIC.traits)
    assert first_essay > 0 and events[-1][1]["made"] == len(records)


async def test_worker_continues_from_the_records_shipped_with_the_shard(tmp_path: Path) -> None:
    store = await stored_run(tmp_path, [ESSAYS[2]], keep=no_mad_judge_on("e2"))
    plan = plan_run(store, [ESSAYS[2]], RUBRIC, [get_protocol(p) for p in PROTOCOLS], ScoringSettings())
    shard = Shard(index=0, essays=[ESSAYS[2]], todo=plan.todo)
    shard.known = known_records(store, shard, plan.partial)
    events = await collect(worker().score(shard))
    made = [AgentRecord.model_validate_json(p[0][-1]) for k, p in events if k == "record"]
    assert sorted((r.protocol, r.role, r.trait) for r in made) == [
        ("MAD", "judge", t) for t in sorted(RUBRIC.trait_names)
    ]
    assert events[-1][1]["reused"] == 2 * len(RUBRIC.traits)  # the stored debate turns
    store.close()


# -- the dispatcher: redo a lost worker's shard, stop on a scoring error ----------------------------------------


class Method:
    """``actor.method.remote(...)`` of a stand-in actor."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.remote = fn


class LocalActor:
    """A worker in this process behind Ray's actor call syntax; ``die_after`` batches of its first shard it is
    lost (as a SIGKILLed Ray worker: ``ActorUnavailableError``), then answers again (restarted)."""

    def __init__(self, die_after: int | None = None, protocols: list[str] = PROTOCOLS) -> None:
        self.worker = worker(latency_s=0.01, protocols=protocols)
        self.die_after = die_after
        self.hello = Method(lambda: asyncio.sleep(0, {"pid": 1, "node": "n", "ip": "127.0.0.1"}))
        self.score = Method(self._score)
        self.shards: list[list[str]] = []

    async def _score(self, shard: Shard) -> AsyncIterator[Awaitable[list[tuple[str, Any]]]]:
        import ray

        self.shards.append([e.id for e in shard.essays])
        sent = 0
        async for batch in self.worker.score(shard):
            if self.die_after is not None and sent == self.die_after:
                self.die_after = None
                raise ray.exceptions.ActorUnavailableError("The actor is restarting", None)
            sent += 1
            yield asyncio.sleep(0, batch)


def dispatcher(
    ctx: CallContext, actors: list[LocalActor], done: list[str], protocols: list[str] = PROTOCOLS
) -> Dispatcher:
    needs_ray()  # the dispatcher reads Ray's exceptions (a lost worker) from the ray module: skipped without Ray
    plan = plan_run(ctx.store, ESSAYS, RUBRIC, [get_protocol(p) for p in protocols], ScoringSettings())  # type: ignore[arg-type]

    async def prepare(shard: Shard) -> None:
        shard.known = known_records(ctx.store, shard, {e.id for e in shard.essays})  # type: ignore[arg-type]

    def on_essay(essay: Essay, scores: list[TraitScore]) -> None:
        done.append(essay.id)

    return Dispatcher(
        ctx=ctx,
        store=ctx.store,  # type: ignore[arg-type]
        plan=plan,
        essays={e.id: e for e in ESSAYS},
        actors=actors,
        prepare=prepare,
        max_attempts=3,
        shards_per_worker=2,
        restart_wait_s=5.0,
        on_essay_done=on_essay,
        keep_scores=keeper(ctx.store, [get_protocol(p) for p in protocols]),
    )


async def test_a_lost_workers_shard_is_redone_and_every_record_is_stored_once(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, FakeProvider())
    actors, done = [LocalActor(die_after=1), LocalActor()], list[str]()
    job = dispatcher(ctx, actors, done)
    shards = make_shards(ESSAYS, job.plan, 2)
    progress = await job.run(shards)
    assert progress.redone == 1 and progress.shards_done == len(shards)
    keys = ctx.store.keys()  # type: ignore[attr-defined]
    per_essay = 3 * len(RUBRIC.traits) + 1  # MAD: advocate, skeptic, judge per trait; SA: one call
    assert len(keys) == ctx.stats.made == per_essay * len(ESSAYS)
    assert sorted(done) == sorted(e.id for e in ESSAYS) and Counter(done).most_common(1)[0][1] == 1
    scores = ordered(ESSAYS, job.plan, progress, RUBRIC, [get_protocol(p) for p in PROTOCOLS])
    assert [(s.essay_id, s.protocol) for s in scores][: 2 * len(RUBRIC.traits)] == [("e0", "MAD")] * 3 + [
        ("e0", "SA")
    ] * 3
    ctx.store.close()  # type: ignore[attr-defined]


async def test_a_scoring_error_in_a_worker_stops_the_run(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, FakeProvider())
    broken = LocalActor()
    broken.worker.setup = WorkerSetup(
        run_id="r", rubric=RUBRIC, protocols=["MAD"], settings=ScoringSettings(), provider=ProviderSpec(kind="fake")
    )
    broken.worker._backends = (managed_failing(), {})
    job = dispatcher(ctx, [broken], [])
    with pytest.raises(ProviderError, match="backend down"):
        await job.run(make_shards(ESSAYS, job.plan, 3))
    ctx.store.close()  # type: ignore[attr-defined]


def managed_failing() -> Any:
    from madrag.providers.policy import ManagedProvider, RetryPolicy

    return ManagedProvider(
        FakeProvider(script=lambda _r: FakeReply(text="", error=ProviderError("backend down"))), RetryPolicy(0)
    )


async def test_worker_embeds_its_shards_essays_in_one_batch_with_the_shipped_bank(tmp_path: Path) -> None:
    pool = [essay(i, fold=1) for i in range(20, 36)]
    bank = ExemplarBank.build_or_load(pool, RUBRIC, BagOfWordsEmbedder(), tmp_path / "banks")
    model = BagOfWordsEmbedder()
    setup = WorkerSetup(
        run_id="r", rubric=RUBRIC, protocols=["MADRAG"], settings=ScoringSettings(), provider=ProviderSpec(kind="fake")
    )
    worker = ShardWorker(setup, [])
    worker.embedder = ShippedEmbedder(bank.embedder.name, fallback=lambda: model)
    worker.bank = snapshot(bank).restore(worker.embedder)
    todo = {e.id: {"MADRAG": RUBRIC.trait_names} for e in ESSAYS[:3]}
    events = await collect(worker.score(Shard(index=0, essays=ESSAYS[:3], todo=todo)))
    assert (model.calls, model.texts_embedded) == (1, 3)  # one batch for the shard, none per retrieval
    judges = [AgentRecord.model_validate_json(p[0][-1]) for k, p in events if k == "record" and p[0][4] == "judge"]
    want = {(e.id, t.name): [x.exemplar.essay_id if x.exemplar else None for x in bank.per_level(e, t)]
            for e in ESSAYS[:3] for t in RUBRIC.traits}  # fmt: skip
    got = {(r.essay_id, r.trait): [x["exemplar"]["essay_id"] if x["exemplar"] else None for x in r.context["exemplars"]]
           for r in judges}  # fmt: skip
    assert got == want  # the judges saw the exemplars the driver's stored bank retrieves


def test_worker_prompts_are_the_drivers_texts() -> None:
    texts = {"advocate_system": "Argue for it.\n\n", "judge_user": "Score $TRAIT_NAME."}
    library = prompt_library(texts)
    assert {name: library.text(name) for name in texts} == texts  # exactly, trailing newlines included
    assert library.text("skeptic_system") == PromptLibrary().text("skeptic_system")  # not sent: the packaged one


async def test_consensus_judges_resumed_on_workers_make_the_records_of_a_local_run(tmp_path: Path) -> None:
    """ablate-consensus's six protocols (shared round-0 calls, rounds, whole-essay calls): a run stopped part-way
    and finished by (in-process) workers ends with exactly the records of an uninterrupted local run."""
    protocols = list(CONSENSUS_ABLATION)
    local = make_ctx(tmp_path / "local", FakeProvider())
    await run_scoring(local, ESSAYS, RUBRIC, [get_protocol(p) for p in protocols])
    want = {r.key: (r.prompt_hash, r.text) for r in local.store.records()}  # type: ignore[attr-defined]
    ctx = make_ctx(tmp_path / "ray", FakeProvider())
    for record in local.store.records():  # type: ignore[attr-defined]
        if record.essay_id in ("e0", "e1") or (record.essay_id == "e2" and record.round == 0):
            ctx.store.put(record)  # type: ignore[attr-defined]
    keep_derived_scores(ctx.store, RUBRIC, protocols)  # type: ignore[arg-type]
    before = ctx.store.count()  # type: ignore[attr-defined]
    job = dispatcher(ctx, [LocalActor(protocols=protocols), LocalActor(protocols=protocols)], [], protocols)
    assert set(job.plan.todo) == {"e2", "e3", "e4", "e5"} and job.plan.partial == {"e2"}
    await job.run(make_shards(ESSAYS, job.plan, 2))
    got = {r.key: (r.prompt_hash, r.text) for r in ctx.store.records()}  # type: ignore[attr-defined]
    assert got == want
    assert ctx.stats.made == len(want) - before  # nothing stored was made again
    local.store.close()  # type: ignore[attr-defined]
    ctx.store.close()  # type: ignore[attr-defined]


def test_cross_fold_banks_are_shipped_one_per_fold(tmp_path: Path) -> None:
    """``--fold each``: every fold's bank is shipped, and an essay is answered by the bank without its fold."""
    essays = [essay(i, fold=i % 3) for i in range(30)]
    pools = {f: [e for e in essays if e.fold != f] for f in range(3)}
    driver = FoldBanks.build_or_load(pools, RUBRIC, BagOfWordsEmbedder(), tmp_path / "banks")
    shipped = ShippedBanks.of(driver)
    assert set(shipped.banks) == {0, 1, 2} and shipped.embedder_name == driver.embedder.name
    worker_side = shipped.restore(ShippedEmbedder(shipped.embedder_name, fallback=BagOfWordsEmbedder))
    assert isinstance(worker_side, FoldBanks)
    for query in essays[:6]:
        for trait in RUBRIC.traits:
            want = [x.exemplar.essay_id if x.exemplar else None for x in driver.per_level(query, trait)]
            got = [x.exemplar.essay_id if x.exemplar else None for x in worker_side.per_level(query, trait)]
            assert got == want
            assert all(e is None or int(e[1:]) % 3 != query.fold for e in got)  # never its own fold
