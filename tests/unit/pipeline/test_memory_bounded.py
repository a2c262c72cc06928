"""A long run keeps memory bounded and loses no record.

1,000 generated essays x 2 traits (2 traits, not 4, to stay well under a minute on 2 shared cores: 6,000
records, 8,000 fake requests) through MADRAG with a stub exemplar bank, the scripted fake provider and a real
SQLite run store, using the runner's default essay concurrency. RSS is read from ``/proc/self/status``
(VmRSS) after a warm-up essay and after every essay; its growth must stay under 300 MB. Afterwards the store
must hold exactly one Advocate, one Skeptic and one Judge record per essay-trait, with unique keys.

The fake provider keeps every request it received in ``calls`` (for tests that inspect them); that list is
test scaffolding, not pipeline state, so it is emptied as essays finish.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path

import pytest
from tests.helpers import StubBank, make_ctx

from madrag.data import Essay
from madrag.pipeline.runner import run_scoring
from madrag.protocols import get_protocol
from madrag.protocols.base import TraitScore
from madrag.providers.fake import FakeProvider
from madrag.rubric import Rubric, Trait

N_ESSAYS = 1_000
MAX_GROWTH_MB = 300.0
VOCAB = (
    "patience waiting line store mother brother friend bus rain hours doctor game ticket slowly "
    "calm finally learned lesson smile long quiet because then after school home"
).split()


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def rubric() -> Rubric:
    levels = {s: f"level {s} description" for s in range(4)}
    return Rubric(traits=[Trait(name=n, min=0, max=3, levels=levels) for n in ("Ideas", "Organization")])


def essays(n: int, prefix: str, seed: int) -> list[Essay]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        text = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(150, 350)))
        scores = {t: [float(rng.randint(0, 3)), float(rng.randint(0, 3))] for t in ("Ideas", "Organization")}
        out.append(Essay(id=f"{prefix}{i:05d}", text=text, prompt="Write about patience.", rater_scores=scores))
    return out


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs /proc to read RSS")
@pytest.mark.timeout(180)
async def test_thousand_essays_bounded_rss_and_no_lost_record(tmp_path: Path) -> None:
    rub = rubric()
    fake = FakeProvider()
    ctx = make_ctx(tmp_path, fake, StubBank(essays(40, "pool", seed=1)))
    protocols = [get_protocol("MADRAG")]
    work = essays(N_ESSAYS, "e", seed=2)
    await run_scoring(ctx, work[:1], rub, protocols)  # warm-up: imports, prompt templates, first SQLite pages
    fake.calls.clear()
    base = peak = rss_mb()

    def on_done(_essay: Essay, _scores: list[TraitScore]) -> None:
        nonlocal peak
        fake.calls.clear()
        peak = max(peak, rss_mb())

    started = time.monotonic()
    scores = await run_scoring(ctx, work[1:], rub, protocols, on_essay_done=on_done)
    elapsed = time.monotonic() - started
    peak = max(peak, rss_mb())

    print(f"RSS {base:.0f} MB -> peak {peak:.0f} MB in {elapsed:.1f}s")
    assert peak - base < MAX_GROWTH_MB, f"RSS grew {peak - base:.0f} MB (from {base:.0f} MB) in {elapsed:.0f}s"
    assert len(scores) == 2 * (N_ESSAYS - 1) and all(s.score is not None for s in scores)
    keys = ctx.store.keys()
    assert ctx.store.count() == len(keys) == 3 * 2 * N_ESSAYS
    per_pair = Counter((k.split("|")[1], k.split("|")[2]) for k in keys)
    assert set(per_pair.values()) == {3} and len(per_pair) == 2 * N_ESSAYS
    roles = Counter(k.split("|")[3] for k in keys)
    assert roles == {"advocate": 2 * N_ESSAYS, "skeptic": 2 * N_ESSAYS, "judge": 2 * N_ESSAYS}
