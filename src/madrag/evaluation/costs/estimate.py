"""Dry runs: a sample (a small run) scaled to ``n_essays`` x ``n_traits``.

The mean tally per essay-trait of each group (per essay for calls that score every trait at once, ``trait ==
"*"``), times the number of such units, each debate counted once however many protocols share it; the time,
at the sample's pace (:class:`Pace`): its seconds per call answered by the backend times the calls planned.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from madrag.errors import InputError
from madrag.evaluation.costs.prices import Prices
from madrag.evaluation.costs.tally import CallCost, CostReport, GroupCost, Tally, cost_report
from madrag.records import AgentRecord
from madrag.store import RunStore


@dataclass(frozen=True)
class Pace:
    """How fast the sample's backend answered: ``calls`` answered by it (not from the response cache) in
    ``seconds`` of wall-clock time, from the first request's start to the last answer stored (the sample's own
    parallelism included: a planned run with more essays in flight on a server with free slots goes faster)."""

    calls: int
    seconds: float

    @property
    def per_call_s(self) -> float:
        return self.seconds / self.calls

    @classmethod
    def of(cls, calls: Iterable[CallCost]) -> Pace | None:
        """The pace of ``calls``; None when the backend answered none of them (all cached, or failed)."""
        made = [c for c in calls if not c.cached and not c.failed and c.stored_at is not None]
        if not made:
            return None
        start = min(c.stored_at - c.latency_s for c in made if c.stored_at is not None)
        end = max(c.stored_at for c in made if c.stored_at is not None)
        return cls(len(made), max(end - start, 0.0))


@dataclass
class RunEstimate:
    """A sample's mean cost per unit, scaled to ``n_essays`` x ``n_traits``."""

    n_essays: int
    n_traits: int
    protocols: list[str]
    groups: dict[str, Tally]  # scaled, every group needed once (shared debates once)
    per_protocol: dict[str, Tally]  # scaled own + shared (the protocol run alone)
    total: Tally
    sample_units: dict[str, int]
    pace: Pace | None = None  # the sample's (None: no call of it was answered by the backend)

    @property
    def seconds(self) -> float | None:
        """The planned run's time at the sample's pace (None without one)."""
        return None if self.pace is None else self.pace.per_call_s * self.total.calls


def _units(group: GroupCost, n_essays: int, n_traits: int) -> int:
    """How many units of the group a planned run has: essays for whole-essay calls, else essay-traits."""
    return n_essays if group.per_essay else n_essays * n_traits


def estimate_run(
    sample: CostReport | RunStore | Iterable[AgentRecord | CallCost],
    n_essays: int,
    n_traits: int,
    protocols: Sequence[str] | None = None,
    prices: Prices | None = None,
) -> RunEstimate:
    """Extrapolate a sample to a run of ``n_essays`` x ``n_traits`` with ``protocols`` (default: the sample's).

    Each group's tally per unit in the sample (essay-trait, or essay for whole-essay calls) times the number
    of units in the planned run. A protocol's debates come from the sample's own links between Judges and
    debate records, and each debate group is counted once however many protocols share it. Spend comes from
    ``prices`` when given (else from the sample report's prices); use ``gross_spend`` for a fresh run, since a
    sample's cache hits say nothing about the planned run.
    """
    if n_essays < 0 or n_traits < 0:
        raise InputError("the number of essays and traits must not be negative")
    if isinstance(sample, CostReport):
        report = sample if prices is None else cost_report(sample.calls, prices)
    else:
        report = cost_report(sample, prices)
    chosen = list(protocols) if protocols is not None else sorted(report.protocols)
    missing = [p for p in chosen if p not in report.protocols]
    if missing:
        have = ", ".join(sorted(report.protocols)) or "none"
        raise InputError(f"the sample has no records of protocol(s) {', '.join(missing)} (it has: {have})")
    # a protocol without calls of its own (StrictJudge: the shared round 0 only) has no group of its own
    needed = sorted({g for p in chosen for g in [p, *report.protocols[p].debates] if g in report.groups})
    groups = {g: _scaled_group(report.groups[g], n_essays, n_traits) for g in needed}
    per_protocol = {
        p: sum((groups[g] for g in [p, *report.protocols[p].debates] if g in groups), start=Tally()) for p in chosen
    }
    return RunEstimate(
        n_essays=n_essays,
        n_traits=n_traits,
        protocols=chosen,
        groups=groups,
        per_protocol=per_protocol,
        total=sum(groups.values(), start=Tally()),
        sample_units={g: len(report.groups[g].units) for g in needed},
        pace=Pace.of(report.calls),
    )


def _scaled_group(group: GroupCost, n_essays: int, n_traits: int) -> Tally:
    """The group's mean tally per sample unit times the planned run's units."""
    return group.tally.scaled(_units(group, n_essays, n_traits) / len(group.units))
