"""The run store's awaitable write (RunStore.aput): durable before it returns, no duplicates, order kept,
errors reach the caller, reads stay correct meanwhile, and the event loop is not blocked by the commit."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from madrag.providers.base import TokenLogprob, TopLogprob
from madrag.records import AgentRecord
from madrag.store import RunStore


def record(key: str, **fields: Any) -> AgentRecord:
    """An Advocate record keyed ``key`` with a few token logprobs; ``fields`` override."""
    tokens = [
        TokenLogprob(token=f" w{i}", logprob=-0.1 * i, top=[TopLogprob(token=f" w{i}", logprob=-0.1 * i)])
        for i in range(5)
    ]
    base: dict[str, Any] = dict(
        run_id="run", key=key, essay_id="e1", trait="Ideas", protocol="MADRAG", role="advocate", text=f"text {key}"
    )
    return AgentRecord(**{**base, "tokens": tokens, **fields})


def fresh_keys(path: Path) -> list[str]:
    """The stored keys in insertion order, read through a new connection (what a restarted process sees)."""
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT key FROM records ORDER BY rowid")]
    finally:
        conn.close()


@pytest.fixture
def store(tmp_path: Path) -> Any:
    """A fresh store in tmp_path, closed after the test."""
    s = RunStore(tmp_path / "store.sqlite")
    yield s
    s.close()


async def test_aput_is_durable_when_it_returns(store: RunStore) -> None:
    rec = record("k1")
    assert await store.aput(rec) is True
    # visible to a fresh connection at once, and committed with synchronous=FULL on the writer's connection
    assert fresh_keys(store.path) == ["k1"]
    writer = store._writer
    assert writer is not None
    assert writer.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert writer.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # and read back whole through the store's own connection
    assert store.get("k1") == rec


async def test_every_awaiter_resumes_only_after_its_record_is_committed(store: RunStore) -> None:
    async def write_then_check(i: int) -> None:
        await store.aput(record(f"k{i}"))
        assert f"k{i}" in fresh_keys(store.path)

    await asyncio.gather(*(write_then_check(i) for i in range(40)))
    assert store.count() == 40


async def test_concurrent_aput_of_one_key_stores_it_once(store: RunStore) -> None:
    first, second = record("same", text="first"), record("same", text="second")
    results = await asyncio.gather(*(store.aput(r) for r in [first, second] * 10))
    assert results.count(True) == 1 and results[0] is True
    assert fresh_keys(store.path) == ["same"]
    stored = store.get("same")
    assert stored is not None and stored.text == "first"
    # a key already stored (sync put or earlier aput) is not written again either
    assert await store.aput(record("same", text="third")) is False
    assert store.put(record("same", text="fourth")) is False
    assert store.count() == 1


async def test_records_are_committed_in_the_order_they_were_handed_over(store: RunStore) -> None:
    keys = [f"k{i:03d}" for i in range(60)]
    resumed: list[str] = []

    async def write(key: str) -> None:
        await store.aput(record(key))
        resumed.append(key)

    await asyncio.gather(*(write(k) for k in keys))
    assert fresh_keys(store.path) == keys
    assert resumed == keys  # awaiters resume in the same order
    # one writer after another: each sees the one before it already stored
    for key in ("a", "b", "c"):
        await store.aput(record(key))
    assert fresh_keys(store.path)[-3:] == ["a", "b", "c"]


async def test_an_unwritable_record_fails_its_own_caller_and_spares_the_others(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = record("bad")
    original = AgentRecord.model_dump_json

    def failing_dump(self: AgentRecord, **kwargs: Any) -> str:
        if self.key == "bad":
            raise ValueError("cannot serialise this one")
        return original(self, **kwargs)

    monkeypatch.setattr(AgentRecord, "model_dump_json", failing_dump)
    results = await asyncio.gather(
        store.aput(record("good1")), store.aput(bad), store.aput(record("good2")), return_exceptions=True
    )
    assert results[0] is True and results[2] is True
    assert isinstance(results[1], ValueError) and "cannot serialise" in str(results[1])
    assert sorted(fresh_keys(store.path)) == ["good1", "good2"]
    # the writer keeps working afterwards
    assert await store.aput(record("after")) is True


async def test_sqlite_error_in_the_writer_reaches_the_caller(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store.sqlite")
    try:
        await store.aput(record("k1"))
        # another process holds the write lock for longer than the writer waits: the commit fails
        assert store._writer is not None
        store._writer.conn.execute("PRAGMA busy_timeout = 50")
        blocker = sqlite3.connect(store.path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                await store.aput(record("k2"))
            # records waiting together fail together (each caller gets the error), no partial batch
            results = await asyncio.gather(*(store.aput(record(f"b{i}")) for i in range(3)), return_exceptions=True)
            assert all(isinstance(r, sqlite3.OperationalError) for r in results)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert store.get("k2") is None and store.get("b0") is None
        assert await store.aput(record("k2")) is True
        assert fresh_keys(store.path) == ["k1", "k2"]
    finally:
        store.close()


async def test_reads_stay_correct_while_writes_are_in_flight(store: RunStore) -> None:
    await store.aput(record("old"))
    pending = [asyncio.ensure_future(store.aput(record(f"k{i}"))) for i in range(30)]
    # while the writer commits: earlier records read back whole, pending ones are absent or whole
    while not all(p.done() for p in pending):
        assert store.get("old") is not None
        for i in range(30):
            got = store.get(f"k{i}")
            assert got is None or got.text == f"text k{i}"
        await asyncio.sleep(0)
    await asyncio.gather(*pending)
    assert store.keys() == {"old", *(f"k{i}" for i in range(30))}


async def test_the_event_loop_runs_while_a_commit_waits(store: RunStore) -> None:
    await store.aput(record("warm"))
    assert store._writer is not None
    conn = store._writer.conn
    gate = threading.Event()
    real_execute = conn.execute

    class SlowConn:
        """The writer's connection, its commits held until the test lets them go."""

        in_transaction = property(lambda _self: conn.in_transaction)

        def execute(self, sql: str, *args: Any) -> Any:
            if sql == "COMMIT":
                gate.wait(5)
            return real_execute(sql, *args)

        def rollback(self) -> None:
            conn.rollback()

        def close(self) -> None:
            conn.close()

    store._writer.conn = SlowConn()  # type: ignore[assignment]
    write = asyncio.ensure_future(store.aput(record("slow")))
    ticks = 0
    start = time.monotonic()
    while time.monotonic() - start < 0.2:
        await asyncio.sleep(0.01)
        ticks += 1
    assert not write.done() and ticks >= 5  # the loop kept running; the caller still waits for the commit
    assert store.get("slow") is None
    gate.set()
    assert await write is True
    assert "slow" in fresh_keys(store.path)


async def test_close_commits_what_is_queued_and_refuses_later_writes(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store.sqlite")
    pending = [asyncio.ensure_future(store.aput(record(f"k{i}"))) for i in range(10)]
    await asyncio.sleep(0)  # handed over
    store.close()
    assert await asyncio.gather(*pending) == [True] * 10
    assert len(fresh_keys(tmp_path / "store.sqlite")) == 10
    with pytest.raises(sqlite3.ProgrammingError):
        await store.aput(record("late"))


def test_sync_put_still_works(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store.sqlite")
    try:
        assert store.put(record("k1")) is True
        assert store.put(record("k1")) is False
        assert fresh_keys(store.path) == ["k1"]
    finally:
        store.close()


def test_put_many_writes_a_batch_in_one_transaction_keeping_stored_keys(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store.sqlite")
    try:
        assert store.put(record("k1", text="first")) is True
        assert store.put_many([record("k0"), record("k1", text="second"), record("k2")]) == 2
        assert fresh_keys(store.path) == ["k1", "k0", "k2"]  # committed: a new connection sees them
        kept = store.get("k1")
        assert kept is not None and kept.text == "first"  # the stored record is kept, not replaced
        with pytest.raises(OverflowError):  # a record SQLite refuses: none of the batch is written
            store.put_many([record("k3"), record("huge", round=2**70)])
        assert fresh_keys(store.path) == ["k1", "k0", "k2"]
        assert store.put_many([]) == 0 and store.put(record("k3")) is True  # the store is usable after
    finally:
        store.close()


async def test_bulk_reads_include_writes_already_handed_over(store: RunStore) -> None:
    pending = [asyncio.ensure_future(store.aput(record(f"k{i}"))) for i in range(20)]
    await asyncio.sleep(0)  # handed to the writer, not necessarily committed
    assert store.count() == 20
    assert store.keys() == {f"k{i}" for i in range(20)}
    assert len(list(store.records())) == 20
    assert await asyncio.gather(*pending) == [True] * 20


async def test_a_cancelled_caller_leaves_no_write_in_flight(store: RunStore) -> None:
    await store.aput(record("warm"))
    task = asyncio.ensure_future(store.aput(record("cancelled")))
    await asyncio.sleep(0)  # handed over
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the record was committed before the cancellation went through: a resume finds it and does not redo it
    assert "cancelled" in fresh_keys(store.path)


async def test_a_record_sqlite_refuses_fails_alone(store: RunStore) -> None:
    await store.aput(record("warm"))
    huge = record("huge", round=2**70)  # no SQLite INTEGER holds it
    results = await asyncio.gather(*(store.aput(r) for r in [record("a"), huge, record("b")]), return_exceptions=True)
    assert results[0] is True and results[2] is True
    assert isinstance(results[1], OverflowError)
    assert sorted(fresh_keys(store.path)) == ["a", "b", "warm"]


def test_record_fields_are_the_parsed_records_values(store: RunStore) -> None:
    """The values SQLite reads at JSON paths of the stored records are those of the records parsed whole (numbers,
    text, lists, objects, null), for every key asked that is stored, in chunks past SQLite's parameter limit."""
    from madrag.records import EvidenceCounts

    judge = record("j", role="judge", round=2, confidence=None, context={"debate": ["a", "b"]})
    turn = record("a", confidence=0.8125, evidence=EvidenceCounts(quotes_found=3, quotes_unverified=1))
    many = [record(f"x{i}", confidence=i / 7) for i in range(1200)]
    store.put_many([judge, turn, *many])
    paths = {"role": "$.role", "round": "$.round", "confidence": "$.confidence", "evidence": "$.evidence"}
    paths |= {"debate": "$.context.debate"}
    found = dict(store.each_record_fields(paths, ["j", "a", "nothing", *(r.key for r in many)]))
    assert set(found) == {"j", "a", *(r.key for r in many)}
    for rec in [judge, turn, *many]:
        whole = rec.model_dump(mode="json")
        expected = {n: whole[n] for n in ("role", "round", "confidence", "evidence")}
        assert found[rec.key] == {**expected, "debate": rec.context.get("debate")}


def test_records_answers_only_are_the_whole_records_less_their_prompts_and_tokens(store: RunStore) -> None:
    """What SQLite leaves out (the prompt and the tokens) is all that differs from the records parsed whole: every
    other field, the score and its distribution among them, reads the same, for each role and protocol asked."""
    from madrag.providers.base import Message
    from madrag.records import ScoreResult

    tokens = [TokenLogprob(token="3", logprob=-0.1, top=[TopLogprob(token="3", logprob=-0.1)])]
    prompt = [Message(role="system", content="You are the Judge."), Message(role="user", content="Score it.")]
    judge = record(
        "j", role="judge", messages=prompt, tokens=tokens, context={"debate": ["a"]},
        score=ScoreResult(reported=3, value=3.0, mode="constrained_distribution", distribution={2: 0.25, 3: 0.75}),
    )  # fmt: skip
    turn = record("a", messages=prompt, tokens=tokens, confidence=0.5)
    store.put_many([judge, turn])
    for role in ("judge", "advocate", None):
        whole = list(store.records(role=role))
        light = list(store.records(role=role, answers_only=True))
        assert [r.key for r in light] == [r.key for r in whole] and light
        for full, answer in zip(whole, light, strict=True):
            assert full.messages and full.tokens  # there was something to leave out
            assert answer == full.model_copy(update={"messages": [], "tokens": None})
