"""A run's time left as the teacher reads it: the work left, laid out on the essays being scored at once, times a
smoothed time per call; a number that counts down steadily instead of swinging with each slow or quick answer.

The work left is the calls each essay being scored still has to make and the essays not started yet
(:class:`Remaining`); handed out as the runner does, each next essay to the essay slot that frees first, its
longest slot is how long is left (:meth:`Remaining.seconds_in_a_row`), so the end of a run, when
fewer essays than slots are left, is counted as the wait for the slowest one rather than as the calls left over
the whole run's pace. The time per call of one slot is the inverse of an exponential moving average (time
constant :data:`SMOOTHING_S`, measured over at least :data:`MIN_STEP_S`, so a burst of answers is one
measurement) of the calls answered per slot-second, started from the session's mean when the first essay is
finished (the first answers, the quickest of their slots, would start it too high). The time left shown never
rises by more than :data:`MAX_RISE` between two readings, and by at most :data:`RISE_PER_S` a second in between
(so many readings close together cannot add up to a jump); it falls as soon as the work left says so. Pure
arithmetic on the clock
it is handed, so a test drives it with a simulated one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SMOOTHING_S = 30.0
"""The time constant of the moving average of the time per call, in seconds."""
MAX_RISE = 0.10
"""The most the time left may rise from one reading to the next (a fraction)."""
RISE_PER_S = 0.04
"""The most it may rise per second between readings (a fraction): readings a second apart rise at most 4 %."""
MIN_STEP_S = 1.0
"""The time per call is measured over at least this many seconds."""


@dataclass(frozen=True)
class Remaining:
    """The work left: ``calls_left`` in all; per essay being scored, the calls it still has to make and the
    seconds since its last answer (``in_flight``: its call under way is that far along); the essays not started
    (``queued``) and the calls an essay makes (``per_essay``)."""

    calls_left: int
    in_flight: tuple[tuple[float, float], ...] = ()
    queued: int = 0
    per_essay: float = 0.0

    def seconds_in_a_row(self, per_call: float, slots: int) -> float:
        """How long the busiest of ``slots`` still works at ``per_call`` seconds a call: each queued essay handed
        to the slot that frees first, a call under way counted from its start (a slot whose new essay has no
        answer yet: free)."""
        if not self.in_flight:
            return self.calls_left / max(1, slots) * per_call
        loads = [max(0.0, calls * per_call - min(age, 0.9 * per_call)) for calls, age in self.in_flight]
        loads = sorted(loads + [0.0] * max(0, slots - len(loads)))
        rounds, extra = divmod(self.queued, len(loads))
        essay = self.per_essay * per_call
        return max(load + essay * (rounds + (1 if i < extra else 0)) for i, load in enumerate(loads))


@dataclass
class TimeLeft:
    """One session's smoothed time per call (of one slot) and the time left it last showed."""

    rate: float | None = None  # answered calls per slot-second, smoothed (its inverse: the time per call)
    measured_at: float | None = None
    measured_calls: int = 0
    measured_slots: int = 1
    peak_slots: int = 1  # the most essays seen scored at once
    shown: float | None = None
    shown_at: float | None = None

    def smoothed_per_call(self, now: float, since: float, calls: int, slots: int) -> float | None:
        """One slot's seconds per call at ``now``, ``calls`` answered since ``since`` (None before the first)."""
        if self.rate is None or self.measured_at is None:
            if calls <= 0 or now <= since:
                return None
            self.rate = calls / ((now - since) * slots)
            self.measured_at, self.measured_calls, self.measured_slots = now, calls, slots
            return 1.0 / self.rate
        step = now - self.measured_at
        if step >= MIN_STEP_S:  # the rate, not its inverse, is averaged: a few answers a step do not bias it
            recent = (calls - self.measured_calls) / (step * (self.measured_slots + slots) / 2)
            self.rate += (1.0 - math.exp(-step / SMOOTHING_S)) * (recent - self.rate)
            self.measured_at, self.measured_calls, self.measured_slots = now, calls, slots
        return 1.0 / self.rate if self.rate > 0.0 else None

    def reading(self, now: float, since: float, calls: int, work: Remaining | None, slots: int = 1) -> float | None:
        """The time left to show at ``now`` for the ``work`` left (None: not known yet), ``slots`` essays being
        scored at once."""
        self.peak_slots = max(self.peak_slots, slots)
        # while essays wait, every slot is busy (a slot whose new essay has no answer yet looks idle)
        busy = self.peak_slots if work is None or work.queued > 0 else max(1, slots)
        if work is None:  # until an essay is finished, the rate starts afresh from the session's mean
            self.rate = self.measured_at = None
            return None
        per_call = self.smoothed_per_call(now, since, calls, busy)
        if per_call is None:
            return None
        wanted = work.seconds_in_a_row(per_call, busy)
        if self.shown is not None and self.shown_at is not None:
            step = max(0.0, now - self.shown_at)
            wanted = min(wanted, self.shown * (1.0 + min(MAX_RISE, RISE_PER_S * step)))
        self.shown, self.shown_at = wanted, now
        return wanted
