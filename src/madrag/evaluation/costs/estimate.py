"""Dry runs: a sample (a small run) scaled to ``n_essays`` x ``n_traits``.

The mean tally per essay-trait of each group (per essay for calls that score every trait at once, ``trait ==
"*"``), times the number of such units, each debate counted once however many protocols share it; the time,
at the sample's pace (:class:`Pace`): its seconds per call answered by the backend times the calls planned.

The time's model. The sample measures the server's throughput with the requests the run keeps in flight: the
sample runs with the run's own settings, so it sends as many at once as the run will (the resolved concurrency:
the server's slots unless more were given) and its pace is what the server does with them. The estimate never
assumes the planned run goes faster because more essays are in flight: a server whose slots are fewer than the
concurrency serves the extra requests from its queue, one slot at a time, and a CPU-bound server shares its cores
between the requests it serves, so neither answers more calls a second with more requests waiting (a researcher
found a dry run's time 35-50% off on a CPU-bound llama.cpp server, beside a line promising that more essays in
flight go faster). Only where the planned run keeps fewer requests in flight than the sample had served at once
(``concurrency`` below it) is the time scaled, up, by the ratio (:attr:`RunEstimate.seconds`).
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
    ``seconds`` of wall-clock time, from the first request's start to the last answer stored, the requests in
    flight at once included; ``busy_s`` the sum of their latencies (each from its request's start to its answer,
    a wait in the server's queue included)."""

    calls: int
    seconds: float
    busy_s: float = 0.0

    @property
    def per_call_s(self) -> float:
        return self.seconds / self.calls

    @property
    def in_flight(self) -> float | None:
        """The mean number of the sample's requests in flight (Little's law: busy time over wall-clock time);
        None for a sample of no measurable span."""
        return self.busy_s / self.seconds if self.seconds > 0 else None

    @classmethod
    def of(cls, calls: Iterable[CallCost]) -> Pace | None:
        """The pace of ``calls``; None when the backend answered none of them (all cached, or failed)."""
        made = [c for c in calls if not c.cached and not c.failed and c.stored_at is not None]
        if not made:
            return None
        start = min(c.stored_at - c.latency_s for c in made if c.stored_at is not None)
        end = max(c.stored_at for c in made if c.stored_at is not None)
        return cls(len(made), max(end - start, 0.0), sum(c.latency_s for c in made))


@dataclass(frozen=True)
class Served:
    """What the sample's server served it with: its ``slots`` (llama.cpp's ``/props``; None: not said) and the
    ``concurrency`` the sample resolved (None: not recorded), as the sample's start-up check recorded them."""

    slots: int | None = None
    concurrency: int | None = None

    @property
    def at_once(self) -> int | None:
        """Requests the server works on at once: the concurrency, never more than its slots."""
        known = [n for n in (self.slots, self.concurrency) if n is not None]
        return min(known) if known else None

    @classmethod
    def of(cls, preflight: object) -> Served:
        """From a run store's ``preflight`` record (its main backend's, ``*``); nothing known without one."""
        found = preflight.get("*") if isinstance(preflight, dict) else None
        if not isinstance(found, dict):
            return cls()
        fit, server = found.get("concurrency"), found.get("server")
        resolved = fit.get("resolved") if isinstance(fit, dict) else None
        slots = server.get("total_slots") if isinstance(server, dict) else None
        return cls(slots if isinstance(slots, int) else None, resolved if isinstance(resolved, int) else None)


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
    served: Served = Served()  # the sample's server: its slots and the concurrency resolved
    concurrency: int | None = None  # the planned run's requests at once (None: the sample's)

    @property
    def slowdown(self) -> float:
        """How much slower than the sample's pace the planned run goes: 1, unless it keeps fewer requests in
        flight (``concurrency``) than the server served the sample at once (its slots and the sample's
        concurrency, and what the sample had in flight), then their ratio. Never below 1: more requests in flight
        are not assumed to be answered faster (the module docstring)."""
        if self.concurrency is None or self.pace is None:
            return 1.0
        served = [n for n in (self.served.at_once, self.pace.in_flight) if n is not None]
        return max(1.0, min(served) / self.concurrency) if served else 1.0

    @property
    def seconds(self) -> float | None:
        """The planned run's time at the sample's pace (None without one), times :attr:`slowdown`."""
        return None if self.pace is None else self.pace.per_call_s * self.total.calls * self.slowdown


def estimate_run(
    sample: CostReport | RunStore | Iterable[AgentRecord | CallCost],
    n_essays: int,
    n_traits: int,
    protocols: Sequence[str] | None = None,
    prices: Prices | None = None,
    concurrency: int | None = None,
) -> RunEstimate:
    """Extrapolate a sample to a run of ``n_essays`` x ``n_traits`` with ``protocols`` (default: the sample's).

    Each group's tally per unit in the sample (essay-trait, or essay for whole-essay calls) times the number
    of units in the planned run. A protocol's debates come from the sample's own links between Judges and
    debate records, and each debate group is counted once however many protocols share it. Spend comes from
    ``prices`` when given (else from the sample report's prices); use ``gross_spend`` for a fresh run, since a
    sample's cache hits say nothing about the planned run. The time is the sample's pace (the module docstring);
    ``concurrency``: the planned run's requests at once where it is to send fewer than the sample did.
    """
    if n_essays < 0 or n_traits < 0:
        raise InputError("the number of essays and traits must not be negative")
    served = Served.of(sample.get_meta("preflight")) if isinstance(sample, RunStore) else Served()
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
        served=served,
        concurrency=concurrency,
    )


def _scaled_group(group: GroupCost, n_essays: int, n_traits: int) -> Tally:
    """The group's mean tally per sample unit times the planned run's units (essays for whole-essay calls, else
    essay-traits)."""
    return group.tally.scaled((n_essays if group.per_essay else n_essays * n_traits) / len(group.units))
