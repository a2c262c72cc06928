"""The time left a run shows, fed by a simulated clock: essays scored by a few workers against a model server
whose latency varies (seeded), the progress read every two seconds as the page polls it. After the first 10 % of
the calls the time left is within 30 % of the true remaining time, and it never rises by more than 10 % from
one reading to the next. In the last seconds, where one answer is all that is left, it may be off by
:data:`TAIL_S`; with one call in twenty three times as slow, the accuracy is checked until the last essays run
(which of their calls is slow decides their end, and nothing measured before says it); its steadiness always."""

from __future__ import annotations

import heapq
import itertools
import random

import pytest

from madrag.server.runs.progress import Progress
from madrag.server.runs.time_left import MAX_RISE, Remaining, TimeLeft

ESSAYS, CALLS_PER_ESSAY, WORKERS, POLL_S = 25, 12, 4, 2.0
TAIL_S = 6.0
"""In the last seconds one answer is all that is left: there the time left may be off by three mean calls."""


def _latency(pattern: str, rng: random.Random, t: float) -> float:
    if pattern == "uniform":  # 1 to 3 s, independent (a 2 s stub that varies)
        return rng.uniform(1.0, 3.0)
    if pattern == "wide":  # 0.5 to 3.5 s
        return rng.uniform(0.5, 3.5)
    if pattern == "slow-calls":  # one call in twenty takes three times as long
        return rng.uniform(1.0, 3.0) * (3.0 if rng.random() < 0.05 else 1.0)
    return rng.uniform(1.0, 2.0) * (1.0 + t / 400)  # "drift": the server slows by a third as the run goes on


def _simulate(pattern: str, seed: int, every_event: bool) -> tuple[list[tuple[float, int, float | None]], float]:
    """(time, calls so far, eta shown) at each poll, and when the run ended; ``every_event``: the progress is
    also read at every answer (as the server does for the page's event stream)."""
    rng = random.Random(seed)
    clock = [0.0]
    prog = Progress("r", essays=ESSAYS, clock=lambda: clock[0])
    prog.scoring_since = 0.0
    events: list[tuple[float, int, str, int]] = []  # (time, worker, essay, calls made)
    queue = [f"e{i}" for i in range(ESSAYS)]
    for worker in range(min(WORKERS, ESSAYS)):
        heapq.heappush(events, (_latency(pattern, rng, 0.0), worker, queue.pop(0), 1))
    readings: list[tuple[float, int, float | None]] = []
    next_poll = POLL_S
    end = 0.0
    while events:
        at, worker, essay, made = heapq.heappop(events)
        while next_poll < at:  # the page polls between two answers
            clock[0] = next_poll
            readings.append((next_poll, prog.records, prog.snapshot()["eta_s"]))
            next_poll += POLL_S
        clock[0] = end = at
        prog.count_record(essay)
        if every_event:
            prog.snapshot()
        if made < CALLS_PER_ESSAY:
            heapq.heappush(events, (at + _latency(pattern, rng, at), worker, essay, made + 1))
            continue
        prog.essay_done(essay)
        if queue:
            heapq.heappush(events, (at + _latency(pattern, rng, at), worker, queue.pop(0), 1))
    return readings, end


def _allowed(true_left: float) -> float:
    return max(0.3 * true_left, TAIL_S)


@pytest.mark.parametrize("pattern", ["uniform", "wide", "slow-calls", "drift"])
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("every_event", [False, True])
def test_the_time_left_is_close_and_steady_with_a_varying_latency(pattern: str, seed: int, every_event: bool) -> None:
    readings, end = _simulate(pattern, seed, every_event)
    total = ESSAYS * CALLS_PER_ESSAY
    shown = [(t, calls, eta) for t, calls, eta in readings if eta is not None]
    assert shown, "the time left was never shown"
    late = [(t, eta) for t, calls, eta in shown if calls >= total // 10]
    if pattern == "slow-calls":  # the last essays' own slow calls cannot be foreseen: checked until the tail
        late = [(t, eta) for t, calls, eta in shown if total // 10 <= calls <= total - WORKERS * CALLS_PER_ESSAY]
    assert len(late) > 20
    off = [(round(t), round(eta), round(end - t)) for t, eta in late if abs(eta - (end - t)) > _allowed(end - t)]
    assert not off, f"(time, shown, true) more than 30% off: {off}"
    rises = [(round(t), a, b) for (_, _, a), (t, _, b) in itertools.pairwise(shown) if b > a * (1 + MAX_RISE)]
    assert not rises, f"rose by more than {MAX_RISE:.0%} between readings: {rises}"


def test_readings_close_together_cannot_add_up_to_a_jump() -> None:
    """Many readings a tenth of a second apart (every event of a busy run is one) rise no more in two seconds
    than one reading two seconds later could."""
    steady = TimeLeft()
    first = steady.reading(10.0, 0.0, 100, Remaining(100))  # 10 calls a second, 100 left: 10 s
    assert first is not None and 9.9 < first < 10.1
    last = first
    for step in range(1, 21):  # the work left jumps to 1,000 calls: the estimate may not follow at once
        found = steady.reading(10.0 + step / 10, 0.0, 100, Remaining(1000))
        assert found is not None
        last = found
    assert last <= first * (1 + MAX_RISE)


def test_nothing_is_shown_before_it_can_be_measured() -> None:
    fresh = Progress("r", essays=4, clock=lambda: 5.0)
    assert fresh.snapshot()["eta_s"] is None  # scoring has not begun
    fresh.scoring_since = 0.0
    fresh.count_record("e0")
    assert fresh.snapshot()["eta_s"] is None and fresh.snapshot()["calls_left"] is None  # no essay finished yet
