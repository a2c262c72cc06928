"""The runner: default essay concurrency from the provider's slots, a shared debate paid for once, results in
essay order."""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import StubBank, make_ctx

from madrag.agents.calls import CallContext
from madrag.data import Essay
from madrag.pipeline.runner import (
    GC_GEN0_THRESHOLD,
    GC_GEN1_THRESHOLD,
    auto_essay_concurrency,
    run_scoring,
)
from madrag.protocols import get_protocol
from madrag.protocols.base import ProtocolNeeds, ScoringProtocol, TraitScore, essay_width
from madrag.providers.fake import FakeProvider, request_role
from madrag.records import call_key
from madrag.rubric import Rubric, Trait


def _rubric(n_traits: int) -> Rubric:
    levels = {s: f"level {s}" for s in range(4)}
    return Rubric(traits=[Trait(name=f"T{i}", min=0, max=3, levels=levels) for i in range(n_traits)])


def _essays(n: int) -> list[Essay]:
    return [Essay(id=f"e{i}", text=f"essay {i} " * 30, rater_scores={"T0": [float(i % 4)]}) for i in range(n)]


def test_auto_essay_concurrency_fills_the_slots_twice() -> None:
    assert auto_essay_concurrency(1, 4) == 1  # the embedded model: one essay at a time
    assert auto_essay_concurrency(8, 4) == 4
    assert auto_essay_concurrency(32, 4) == 16
    assert auto_essay_concurrency(32, 3) == 22
    assert auto_essay_concurrency(4, 20) == 1


class WholeEssay(ScoringProtocol):
    """A protocol scoring every trait in one call (like SA): one chain per essay."""

    name = "WHOLE"

    @property
    def needs(self) -> ProtocolNeeds:
        return ProtocolNeeds(per_trait=False)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "per_trait": False}

    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        return []


def test_essay_width_counts_a_shared_debate_once() -> None:
    mad, madrag, ma = get_protocol("MAD"), get_protocol("MADRAG"), get_protocol("MA")
    assert essay_width([mad, madrag], 4) == 4
    assert essay_width([WholeEssay()], 4) == 1 and auto_essay_concurrency(32, 1) == 64
    assert essay_width([WholeEssay(), ma, madrag, mad], 4) == 1 + 4 + 4
    assert essay_width([WholeEssay(), ma], 3) == 4
    assert essay_width([madrag, get_protocol("MADRAG[both_r1]")], 2) == 4


async def test_mad_and_madrag_pay_for_one_debate_and_both_judges_read_it(tmp_path: Path) -> None:
    fake = FakeProvider(latency_s=0.01)  # calls overlap: the shared debate is in flight when the other asks
    ctx = make_ctx(tmp_path, fake, StubBank(_essays(6)))
    rubric = _rubric(2)
    essay = _essays(1)[0]
    scores = await run_scoring(ctx, [essay], rubric, [get_protocol("MAD"), get_protocol("MADRAG")])
    assert [(s.protocol, s.trait) for s in scores] == [("MAD", "T0"), ("MAD", "T1"), ("MADRAG", "T0"), ("MADRAG", "T1")]
    roles = Counter(request_role(c) for c in fake.calls if c.choices is None)
    assert roles["advocate"] == 2 and roles["skeptic"] == 2  # one debate per trait, not one per protocol
    # every request is labelled with its call (role, trait, round); the labels are not recorded as settings
    assert {(c.role, c.trait, c.round) for c in fake.calls} == {
        (role, trait, 1) for role in ("advocate", "skeptic", "judge") for trait in ("T0", "T1")
    }
    assert all("role" not in r.settings and "trait" not in r.settings for r in ctx.store.records())
    for trait in ("T0", "T1"):
        skeptic = ctx.store.get(call_key("debate/adv_r1", essay.id, trait, "skeptic"))
        assert skeptic is not None
        for protocol in ("MAD", "MADRAG"):
            judge = ctx.store.get(call_key(protocol, essay.id, trait, "judge"))
            assert judge is not None and skeptic.text.strip() in judge.messages[1].content


class CountingProtocol(ScoringProtocol):
    """Counts essays in flight; one trait score per essay. Each essay yields to the event loop before it
    finishes, so every worker has an essay in flight at once; essay ``e0`` finishes only after another essay
    has, so completion order differs from essay order (deterministically: no timing)."""

    name = "COUNT"

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.another_done = asyncio.Event()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        for _ in range(3):
            await asyncio.sleep(0)
        if essay.id == "e0":
            await self.another_done.wait()
        else:
            self.another_done.set()
        self.in_flight -= 1
        return [TraitScore(essay_id=essay.id, trait="T0", protocol=self.name, score=1)]


async def test_default_concurrency_follows_provider_slots_and_keeps_essay_order(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, FakeProvider(concurrency=8))
    counting = CountingProtocol()
    done: list[str] = []
    essays = _essays(20)
    scores = await run_scoring(ctx, essays, _rubric(4), [counting], on_essay_done=lambda e, _s: done.append(e.id))
    assert counting.peak == auto_essay_concurrency(8, 4) == 4
    assert [s.essay_id for s in scores] == [e.id for e in essays]
    assert sorted(done) == sorted(e.id for e in essays) and done.index("e0") > done.index("e1")
    explicit = CountingProtocol()
    await run_scoring(ctx, essays, _rubric(4), [explicit], essay_concurrency=2)
    assert explicit.peak == 2


class GcProbe(CountingProtocol):
    """Records the GC threshold seen inside a run; fails on essay ``fail`` if set."""

    def __init__(self, fail: str | None = None) -> None:
        super().__init__()
        self.thresholds: list[tuple[int, int, int]] = []
        self.fail = fail

    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        self.thresholds.append(gc.get_threshold())
        if essay.id == self.fail:
            raise RuntimeError("backend gone")
        return await super().score_essay(ctx, essay, rubric)


async def test_gc_is_tuned_during_a_run_and_restored_after_success_or_failure(tmp_path: Path) -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    ctx = make_ctx(tmp_path, FakeProvider(concurrency=2))
    probe = GcProbe()
    await run_scoring(ctx, _essays(3), _rubric(1), [probe])
    assert min(t[0] for t in probe.thresholds) >= GC_GEN0_THRESHOLD
    assert min(t[1] for t in probe.thresholds) >= GC_GEN1_THRESHOLD
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen
    with pytest.raises(RuntimeError, match="backend gone"):
        await run_scoring(ctx, _essays(6), _rubric(1), [GcProbe(fail="e2")])
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


async def test_a_failing_call_cancels_its_siblings() -> None:
    from madrag.protocols.concurrency import gather_or_cancel

    finished: list[str] = []
    release = asyncio.Event()  # never set while the failing call is running
    started = asyncio.Event()

    async def waits() -> str:
        started.set()
        await release.wait()
        finished.append("waits")
        return "waits"

    async def fails() -> str:
        await started.wait()  # the sibling is running when the failure comes
        raise ValueError("backend gone")

    with pytest.raises(ValueError, match="backend gone"):  # the original error, not an ExceptionGroup
        await gather_or_cancel(waits(), fails())
    release.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert finished == []  # the sibling was cancelled (and awaited), so it never finished
    assert await gather_or_cancel(waits(), waits()) == ["waits", "waits"]
