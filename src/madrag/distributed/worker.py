"""A Ray worker: scores shards with the same async runner, protocols and agent calls as a local run.

:class:`ShardWorker` is a Ray actor (one per worker slot of the cluster). It builds its backends once, restores
the exemplar bank shipped through the object store once, and then scores shard after shard, several at a time,
through :func:`madrag.pipeline.runner.run_scoring`. The only difference from a local run is the store its
calls write to: a :class:`ShardStore` that knows the records the shard's essays already had and, instead of
writing SQLite, streams every new record to the driver (Ray's streaming generators), which is the run's one
writer. A shard's stream is a sequence of event batches: ``("record", (row, light json))`` for each finished
call (serialised here once: the driver writes the row as it is),
``("essay", (essay id, scores))`` once an essay's scores are complete (after its records), and one final
``("done", statistics)``.

A call that uses up its retries becomes a failed record, streamed like any other (its key is the call's
``|failed|`` key), and the shard goes on: the statistics count the shard's ``failed_calls``. The run's
``--max-failures`` is the driver's to keep, cluster-wide: a shard stops starting calls once its own failures
reach it, or once the driver says the cluster's have (:meth:`ShardWorker.halt`); its calls in flight finish,
and its statistics then say ``stopped``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from madrag.agents.calls import CallContext, FailureBudget
from madrag.agents.prompts import PromptLibrary
from madrag.data.essay import Essay
from madrag.distributed.bank import ShippedBanks, ShippedEmbedder
from madrag.distributed.shard import Shard
from madrag.errors import TooManyFailures
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.protocols.base import ScoringProtocol, TraitScore
from madrag.providers import ManagedProvider, ProviderSpec, managed
from madrag.records import AgentRecord
from madrag.retrieval.choice import make_embedder
from madrag.retrieval.openai_embedder import EmbeddingEndpoint
from madrag.rubric import Rubric
from madrag.settings import ScoringSettings
from madrag.store.writer import ScoreRow, record_row

Event = tuple[str, Any]
"""One item of a shard's stream: ("record", (its store row, its light JSON)), ("essay", (essay id, scores)) or
("done", stats)."""

HEAVY = frozenset({"messages", "tokens", "context"})
"""Fields left out of the light copy of a record the driver hands to progress callbacks (the stored row has
everything): the prompt, the token logprobs and the exemplars shown are most of a record's size."""


@dataclass
class WorkerSetup:
    """Everything a worker needs to score any shard of the run (sent once, when the worker starts)."""

    run_id: str
    rubric: Rubric
    protocols: list[str]
    settings: ScoringSettings
    provider: ProviderSpec
    role_providers: dict[str, ProviderSpec] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)  # template texts by name, as the driver reads them
    essay_concurrency: int | None = None
    embedder: str = "minilm"  # the job's embedder (madrag.retrieval.make_embedder), for the query essays
    embedding: EmbeddingEndpoint | None = None  # the server of --embedder openai (the job's embedding_endpoint)
    max_failures: int | None = None  # the run's --max-failures (the driver keeps the cluster's count)


class ShardStore:
    """The run store as a worker's calls see it: the shard's already stored records, and a stream out.

    ``aput`` hands a new record to the driver (through :meth:`take`) and remembers it, so a second call of the
    same key (a debate shared by MAD and MADRAG) finds it; the driver's store dedupes by key as well."""

    def __init__(self, known: list[str]) -> None:
        self._records: dict[str, AgentRecord] = {}
        self._by_essay: dict[str, list[str]] = {}
        for blob in known:
            self._remember(AgentRecord.model_validate_json(blob))
        self._outbox: list[Event] = []
        self.ready = asyncio.Event()

    def _remember(self, record: AgentRecord) -> None:
        self._records[record.key] = record
        self._by_essay.setdefault(record.essay_id, []).append(record.key)

    def get(self, key: str) -> AgentRecord | None:
        """A record the shard's essays already have (stored before, or made in this shard)."""
        return self._records.get(key)

    async def aput(self, record: AgentRecord) -> bool:
        """Stream a finished call's record to the driver; False if the key was already there."""
        if record.key in self._records:
            return False
        self._remember(record)
        self.emit(("record", (record_row(record), record.model_dump_json(exclude=set(HEAVY)))))
        return True

    async def aput_scores(self, rows: Sequence[ScoreRow]) -> None:
        """Nothing here: an essay's scores go to the driver with it (:meth:`essay_done`), which keeps them in the
        run's store."""
        return None

    def emit(self, event: Event) -> None:
        """Queue an event for the stream."""
        self._outbox.append(event)
        self.ready.set()

    def essay_done(self, essay: Essay, scores: list[TraitScore]) -> None:
        """Report an essay's scores (after its records) and forget its records."""
        self.emit(("essay", (essay.id, scores)))
        for key in self._by_essay.pop(essay.id, []):
            self._records.pop(key, None)

    def take(self) -> list[Event]:
        """The events queued since the last call."""
        out, self._outbox = self._outbox, []
        self.ready.clear()
        return out


def prompt_library(texts: dict[str, str]) -> PromptLibrary:
    """A prompt library serving exactly the driver's template texts (through a private folder, read at once and
    removed; a template the driver did not send is the packaged one)."""
    with tempfile.TemporaryDirectory(prefix="madrag-prompts-") as tmp:
        folder = Path(tmp)
        for name, text in texts.items():
            (folder / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
        library = PromptLibrary(folder)
        for name in texts:
            library.text(name)  # cached: the folder can go
    return library


class ShardWorker:
    """The body of a Ray actor that scores shards (see the module docstring)."""

    def __init__(self, setup: WorkerSetup, bank_ref: list[Any]) -> None:
        """``bank_ref``: [] without a bank, else [the ObjectRef of its :class:`ShippedBanks`] (inside a list, so
        Ray passes the reference and the worker fetches the snapshots itself, once, when it starts)."""
        bank: ShippedBanks | None = None
        if bank_ref:
            import ray

            bank = ray.get(bank_ref[0])
        self.setup = setup
        self.protocols = [get_protocol(name) for name in setup.protocols]
        self.prompts = prompt_library(setup.prompts)
        fallback = functools.partial(make_embedder, setup.embedder, setup.embedding)
        self.embedder = None if bank is None else ShippedEmbedder(bank.embedder_name, fallback=fallback)
        self.bank = bank.restore(self.embedder) if bank is not None and self.embedder is not None else None
        self._backends: tuple[ManagedProvider, dict[str, ManagedProvider]] | None = None
        self._subrubrics: dict[tuple[str, ...], Rubric] = {}
        self._budgets: list[FailureBudget] = []  # of the shards being scored now
        self._halted = False
        self._cpu_start = time.process_time()

    def hello(self) -> dict[str, Any]:
        """Where this worker runs: process id, node id and node address."""
        import ray

        context = ray.get_runtime_context()
        ip = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        return {"pid": os.getpid(), "node": context.get_node_id(), "ip": ip}

    def _providers(self) -> tuple[ManagedProvider, dict[str, ManagedProvider]]:
        """The backends, built on first use (inside the worker's event loop); no response cache on workers."""
        if self._backends is None:
            roles = {role: managed(spec, None) for role, spec in self.setup.role_providers.items()}
            self._backends = (managed(self.setup.provider, None), roles)
        return self._backends

    def _rubric_for(self, shard: Shard) -> Any:
        rubric = self.setup.rubric

        def narrow(essay: Essay, protocol: ScoringProtocol) -> Rubric | None:
            """The traits ``protocol`` still scores on ``essay`` (None: none)."""
            traits = shard.todo.get(essay.id, {}).get(protocol.name)
            if traits is None:
                return None
            if not protocol.needs.per_trait or len(traits) == len(rubric.traits):
                return rubric
            key = tuple(traits)
            if key not in self._subrubrics:
                chosen = [t for t in rubric.traits if t.name in set(traits)]
                self._subrubrics[key] = rubric.model_copy(update={"traits": chosen})
            return self._subrubrics[key]

        return narrow

    async def score(self, shard: Shard) -> AsyncIterator[list[Event]]:
        """Score ``shard``; a stream of event batches (records, finished essays, then the statistics)."""
        provider, roles = self._providers()
        store = ShardStore(shard.known)
        if self.embedder is not None:
            self.embedder.add(shard.vectors)
            # the shard's essays in one batch (a model embeds a batch at a fraction of the CPU per essay of one
            # at a time); shipped vectors are not embedded again
            await asyncio.to_thread(self.embedder.embed, [e.text for e in shard.essays])
        ctx = CallContext(
            run_id=self.setup.run_id,
            provider=provider,
            store=store,
            prompts=self.prompts,
            settings=self.setup.settings,
            bank=self.bank,
            role_providers=roles,
            failures=self._budget(),
        )
        run = self._run(
            ctx,
            shard.essays,
            self.setup.rubric,
            self.protocols,
            self.setup.essay_concurrency,
            store.essay_done,
            rubric_for=self._rubric_for(shard),
        )
        task = asyncio.ensure_future(run)
        try:
            while not task.done():
                waiter = asyncio.ensure_future(store.ready.wait())
                await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                if batch := store.take():
                    yield batch
            yield [*store.take(), ("done", {**asdict(ctx.stats), "stopped": task.result()})]
        finally:
            self._budgets = [b for b in self._budgets if b is not ctx.failures]
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    def _budget(self) -> FailureBudget:
        """A new shard's failure budget (the run's limit; halted already if the driver said stop)."""
        budget = FailureBudget(self.setup.max_failures, halted=self._halted)
        self._budgets.append(budget)
        return budget

    @staticmethod
    async def _run(ctx: CallContext, *args: Any, **kwargs: Any) -> bool:
        """The shard's scoring; True when it stopped before the end (its budget spent, or halted)."""
        try:
            await run_scoring(ctx, *args, **kwargs)
        except TooManyFailures:
            return True
        return False

    def halt(self) -> None:
        """The cluster's failure budget is spent: the shards being scored start no new call (their calls in
        flight finish), and so does any shard still handed to this worker."""
        self._halted = True
        for budget in self._budgets:
            budget.halt()

    def usage(self) -> dict[str, float]:
        """CPU seconds this worker has spent since it was set up (restoring the bank, scoring), not starting up."""
        return {"cpu_s": time.process_time() - self._cpu_start}

    async def close(self) -> None:
        """Close the backends' connections."""
        if self._backends is not None:
            provider, roles = self._backends
            for backend in (provider, *roles.values()):
                await backend.aclose()
            self._backends = None
