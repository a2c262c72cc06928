"""What a run cost: calls, HTTP requests, tokens, cache hits and an estimated spend, from its records.

Groups. Every record belongs to the group named by its ``protocol`` field: a Judge's protocol (``MAD``,
``MADRAG``, ``MA`` ...), a debate (``debate/adv_r1`` ...) or seed 002's shared round 0 (``consensus/init``).
Debate calls are keyed by transcript variant, not by protocol, so MAD and MADRAG read the same debate; the
round-0 Strict and Lenient calls are read by StrictJudge, LenientJudge, ConsensusMAD and ScoreMaskedMAD. Groups
with those prefixes (:data:`SHARED_PREFIXES`) are *shared*; the others are protocols.

Attribution of shared calls, per protocol:

* ``own``: the protocol's own records (its Judge calls; a consensus protocol's own rounds);
* ``shared``: every shared record it read (a Judge record's ``context["debate"]``, a consensus agent's
  ``context["own_previous"]`` / ``["other_previous"]``; StrictJudge and LenientJudge, which make no call of their
  own, read the round-0 call of their role when the run's configuration names them), counted whole - what the
  protocol would cost run alone is ``own + shared``;
* ``attributed``: ``own`` plus an equal share of each shared record it read (1/k when k protocols read it).
  The attributed tallies of all protocols plus ``unattributed`` (shared records nothing read yet, e.g. a run
  stopped mid-debate) add up to the run's total.

Spend. A price table maps a model name (or ``"*"`` for any other model) to dollars per million prompt and
completion tokens. ``spend`` leaves out calls answered from the response cache (nothing was billed for them
in this run); ``gross_spend`` prices every call as if none were cached. Calls of a model missing from the table
are counted in ``unpriced_calls`` and add nothing to either. Calls whose server reported no token usage are
counted in ``no_usage_calls`` and add no tokens and no spend (their usage is unknown, never taken as 0);
``truncated_calls`` counts calls with an answer cut by the token limit.

Dry runs. :func:`estimate_run` scales a sample (a small run) to ``n_essays`` x ``n_traits``: the mean tally per
essay-trait of each group (per essay for calls that score every trait at once, ``trait == "*"``), times the
number of such units, each debate counted once however many protocols share it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from madrag.errors import InputError
from madrag.records import AgentRecord
from madrag.store import RunStore

DEBATE_PREFIX = "debate/"
SHARED_PREFIXES = (DEBATE_PREFIX, "consensus/")
"""Groups of calls made once and read by several protocols (debates; seed 002's shared round 0)."""
ANY_MODEL = "*"  # price table entry for models not listed
WHOLE_ESSAY = "*"  # the trait of a call that scores every trait at once
PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    prompt: float
    completion: float


Prices = Mapping[str, Price]


@dataclass(frozen=True)
class CallCost:
    """The cost-relevant part of one record (small, so a large run fits in memory)."""

    key: str
    essay_id: str
    trait: str
    group: str
    role: str
    model: str
    requests: int
    prompt_tokens: int | None  # None: the server reported no usage (unknown, not 0)
    completion_tokens: int | None
    cached: bool
    error: bool
    truncated: bool = False  # an answer of the call was cut by the token limit
    reads: tuple[str, ...] = ()  # keys of the debate records a Judge read

    @classmethod
    def of(cls, record: AgentRecord) -> CallCost:
        reads = record.context.get("debate") or []
        reads = list(reads) if isinstance(reads, list) else []
        reads += [record.context[k] for k in ("own_previous", "other_previous") if k in record.context]
        return cls(
            key=record.key,
            essay_id=record.essay_id,
            trait=record.trait,
            group=record.protocol,
            role=record.role,
            model=record.model,
            requests=record.requests,
            prompt_tokens=record.usage.prompt_tokens,
            completion_tokens=record.usage.completion_tokens,
            cached=record.cached,
            error=record.error is not None,
            truncated=record.truncated,
            reads=tuple(str(k) for k in reads),
        )


@dataclass
class Tally:
    """Sums over calls; fractional where calls are shared out or extrapolated."""

    calls: float = 0.0
    requests: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    cached_calls: float = 0.0
    errors: float = 0.0
    truncated_calls: float = 0.0  # calls with an answer cut by the token limit
    no_usage_calls: float = 0.0  # calls whose server reported no (or partial) token usage: no tokens, no spend
    spend: float = 0.0  # priced calls not served from the response cache
    gross_spend: float = 0.0  # priced calls, as if none were cached
    unpriced_calls: float = 0.0

    def add(self, call: CallCost, price: Price | None, weight: float = 1.0) -> None:
        """Count ``call`` (``weight`` of it): a call without known usage adds no tokens and no spend, and is
        counted in ``no_usage_calls`` instead."""
        self.calls += weight
        self.requests += weight * call.requests
        self.cached_calls += weight * call.cached
        self.errors += weight * call.error
        self.truncated_calls += weight * call.truncated
        if call.prompt_tokens is None or call.completion_tokens is None:
            self.no_usage_calls += weight
            return
        self.prompt_tokens += weight * call.prompt_tokens
        self.completion_tokens += weight * call.completion_tokens
        if price is None:
            self.unpriced_calls += weight
            return
        dollars = weight * (call.prompt_tokens * price.prompt + call.completion_tokens * price.completion) / PER_MILLION
        self.gross_spend += dollars
        if not call.cached:
            self.spend += dollars

    def plus(self, other: Tally, factor: float = 1.0) -> Tally:
        """A new tally: this one plus ``factor`` times ``other``."""
        names = self.__dataclass_fields__
        return Tally(**{n: getattr(self, n) + factor * getattr(other, n) for n in names})

    def scaled(self, factor: float) -> Tally:
        return Tally().plus(self, factor)

    def __add__(self, other: Tally) -> Tally:
        return self.plus(other)

    @property
    def requests_per_call(self) -> float:
        return self.requests / self.calls if self.calls else 0.0


@dataclass
class GroupCost:
    """One group's tally and the units it covered (essay-traits, or essays for whole-essay calls)."""

    tally: Tally = field(default_factory=Tally)
    units: set[tuple[str, str]] = field(default_factory=set)
    per_essay: bool = True  # every call scores the whole essay (trait "*")


@dataclass
class ProtocolCost:
    """A protocol's cost, with the shared calls it read counted three ways (see the module docstring)."""

    own: Tally
    shared: Tally
    attributed: Tally
    debates: list[str]
    shared_with: list[str]

    @property
    def standalone(self) -> Tally:
        return self.own.plus(self.shared)


@dataclass
class CostReport:
    total: Tally
    groups: dict[str, GroupCost]
    protocols: dict[str, ProtocolCost]
    unattributed: Tally
    by_model: dict[str, Tally]
    by_role: dict[str, Tally]
    per_unit: dict[tuple[str, str], Tally]
    calls: list[CallCost]
    priced: bool


def price_for(model: str, prices: Prices | None) -> Price | None:
    if prices is None:
        return None
    return prices.get(model) or prices.get(ANY_MODEL)


def load_prices(path: str | Path) -> dict[str, Price]:
    """A YAML or JSON mapping ``model -> {prompt: $/1M tokens, completion: $/1M tokens}``."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))  # JSON is YAML
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read price table {p}: {exc}") from exc
    if not isinstance(raw, dict) or not raw:
        raise InputError(f"price table {p} must map model names to {{prompt: ..., completion: ...}}")
    prices = {}
    for model, entry in raw.items():
        if not isinstance(entry, dict) or set(entry) != {"prompt", "completion"}:
            raise InputError(f"price table {p}: {model!r} needs exactly 'prompt' and 'completion' ($ per 1M tokens)")
        try:
            prompt, completion = float(entry["prompt"]), float(entry["completion"])
        except (TypeError, ValueError) as exc:
            raise InputError(f"price table {p}: {model!r} prices must be numbers") from exc
        if prompt < 0 or completion < 0:
            raise InputError(f"price table {p}: {model!r} prices must not be negative")
        prices[str(model)] = Price(prompt, completion)
    return prices


def _as_calls(records: RunStore | Iterable[AgentRecord | CallCost]) -> list[CallCost]:
    items = records.records() if isinstance(records, RunStore) else records
    return [c if isinstance(c, CallCost) else CallCost.of(c) for c in items]


def is_shared(group: str) -> bool:
    return group.startswith(SHARED_PREFIXES)


def _reads(calls: Sequence[CallCost], protocols: Sequence[str]) -> dict[str, set[str]]:
    """Protocol -> keys of the shared records it read: from the records' links, and for configured consensus
    protocols without rounds (StrictJudge, LenientJudge) the shared round-0 call of their role."""
    from madrag.protocols.consensus import consensus_protocol

    reads: dict[str, set[str]] = defaultdict(set)
    shared_keys = {c.key for c in calls if is_shared(c.group)}
    for call in calls:
        reads[call.group].update(k for k in call.reads if k in shared_keys)
    for name in protocols:
        proto = consensus_protocol(name)
        if proto is None or proto.rounds or not is_shared(proto.namespace(0)):
            continue
        roles = {a.role for a in proto.agents}
        reads[name].update(c.key for c in calls if c.group == proto.namespace(0) and c.role in roles)
    return {p: keys for p, keys in reads.items() if keys or not is_shared(p)}


def _readers(reads: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Shared record key -> the protocols that read it."""
    readers: dict[str, set[str]] = defaultdict(set)
    for protocol, keys in reads.items():
        for key in keys:
            readers[key].add(protocol)
    return readers


def cost_report(
    records: RunStore | Iterable[AgentRecord | CallCost],
    prices: Prices | None = None,
    protocols: Sequence[str] | None = None,
) -> CostReport:
    """Tally a run's records (a store, records, or the ``calls`` of an earlier report). ``protocols``: the run's
    configured protocol names (default: those in a store's configuration), for protocols that make no call of
    their own (StrictJudge and LenientJudge read the shared round-0 calls)."""
    if protocols is None and isinstance(records, RunStore):
        from madrag.evaluation.run import configured_protocols

        protocols = configured_protocols(records)
    calls = _as_calls(records)
    reads = _reads(calls, protocols or [])
    readers = _readers(reads)
    total, unattributed = Tally(), Tally()
    groups: dict[str, GroupCost] = defaultdict(GroupCost)
    by_model: dict[str, Tally] = defaultdict(Tally)
    by_role: dict[str, Tally] = defaultdict(Tally)
    per_unit: dict[tuple[str, str], Tally] = defaultdict(Tally)
    own: dict[str, Tally] = defaultdict(Tally)
    shared: dict[str, Tally] = defaultdict(Tally)
    attributed: dict[str, Tally] = defaultdict(Tally)
    for call in calls:
        price = price_for(call.model, prices)
        for tally in (total, by_model[call.model], by_role[call.role], per_unit[(call.essay_id, call.trait)]):
            tally.add(call, price)
        group = groups[call.group]
        group.tally.add(call, price)
        group.units.add((call.essay_id, call.trait))
        group.per_essay = group.per_essay and call.trait == WHOLE_ESSAY
        if not is_shared(call.group):
            own[call.group].add(call, price)
            attributed[call.group].add(call, price)
            continue
        who = readers.get(call.key, set())
        if not who:
            unattributed.add(call, price)
        for protocol in who:
            shared[protocol].add(call, price)
            attributed[protocol].add(call, price, 1 / len(who))
    group_of = {c.key: c.group for c in calls}
    by_protocol = {
        name: ProtocolCost(own[name], shared[name], attributed[name], *_links(name, reads, readers, group_of))
        for name in sorted(set(own) | set(shared))
    }
    return CostReport(
        total, dict(groups), by_protocol, unattributed, dict(by_model), dict(by_role), dict(per_unit), calls,
        priced=prices is not None,
    )  # fmt: skip


def _links(
    protocol: str, reads: Mapping[str, set[str]], readers: Mapping[str, set[str]], group_of: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """(shared groups ``protocol`` read, other protocols that read the same shared records)."""
    keys = reads.get(protocol, set())
    others = {p for key in keys for p in readers.get(key, set())} - {protocol}
    return sorted({group_of[k] for k in keys}), sorted(others)


# -- dry runs -----------------------------------------------------------------------------------------------


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


def _units(group: GroupCost, n_essays: int, n_traits: int) -> int:
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
    )


def _scaled_group(group: GroupCost, n_essays: int, n_traits: int) -> Tally:
    return group.tally.scaled(_units(group, n_essays, n_traits) / len(group.units))


# -- rendering ----------------------------------------------------------------------------------------------


def _money(value: float) -> str:
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _num(value: float) -> str:
    """Whole numbers as such, shares and estimates with one decimal."""
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 1000 else f"{value:,.1f}"


def _line(label: str, t: Tally, priced: bool) -> str:
    text = (
        f"{label:<36} calls {_num(t.calls):>9}  requests {_num(t.requests):>9}  "
        f"prompt tok {_num(t.prompt_tokens):>13}  completion tok {_num(t.completion_tokens):>11}"
    )
    if priced:
        text += f"  spend {_money(t.spend)} (gross {_money(t.gross_spend)})"
    return text


def _unit_summary(report: CostReport) -> list[str]:
    """Mean and max per essay-trait (per-trait calls) and per essay (calls that score every trait at once)."""
    lines = []
    for label, whole in (("per essay-trait", False), ("per essay, calls scoring every trait", True)):
        units = [t for (_essay, trait), t in report.per_unit.items() if (trait == WHOLE_ESSAY) == whole]
        if not units:
            continue
        calls = sorted(u.calls for u in units)
        tokens = [u.prompt_tokens + u.completion_tokens for u in units]
        line = (
            f"{label} ({len(units)}): calls mean {sum(calls) / len(units):.2f}, max {calls[-1]:.0f}; "
            f"tokens mean {sum(tokens) / len(units):,.0f}, max {max(tokens):,.0f}"
        )
        if report.priced:
            line += f"; spend mean {_money(sum(u.spend for u in units) / len(units))}"
        lines.append(line)
    return lines


def render_report(report: CostReport) -> str:
    t, priced = report.total, report.priced
    lines = [
        _line("total", t, priced),
        f"requests per call {t.requests_per_call:.3f}; cache hits {t.cached_calls:,.0f} calls; "
        f"errors {t.errors:,.0f}; truncated {t.truncated_calls:,.0f}; without usage {t.no_usage_calls:,.0f}"
        + (f"; unpriced calls {t.unpriced_calls:,.0f}" if priced else ""),
        *_unit_summary(report),
        "by protocol (own = its own calls; shared = debates / shared round-0 calls it read, whole; "
        "attributed = own + equal share):",
    ]
    for name, pc in report.protocols.items():
        with_ = f" (shared {', '.join(pc.debates)} with {', '.join(pc.shared_with)})" if pc.shared_with else ""
        lines += [
            f"  {name}{with_}",
            "    " + _line("own", pc.own, priced),
            "    " + _line("shared calls read", pc.shared, priced),
            "    " + _line("attributed", pc.attributed, priced),
        ]
    if report.unattributed.calls:
        lines.append("  " + _line("shared calls nothing read", report.unattributed, priced))
    lines.append("by model:")
    lines += ["  " + _line(model or "(unknown)", tally, priced) for model, tally in sorted(report.by_model.items())]
    lines.append("by role:")
    lines += ["  " + _line(role, tally, priced) for role, tally in sorted(report.by_role.items())]
    if not priced:
        lines.append("no price table given: pass one to estimate the spend")
    return "\n".join(lines)


def render_estimate(estimate: RunEstimate, priced: bool) -> str:
    lines = [
        f"estimate for {estimate.n_essays} essays x {estimate.n_traits} traits with {', '.join(estimate.protocols)} "
        "(sample means per unit x units; debates counted once; spend as if nothing were cached):",
        _line("total", estimate.total, False) + (f"  spend {_money(estimate.total.gross_spend)}" if priced else ""),
    ]
    for group, tally in estimate.groups.items():
        basis = f"{group} (from {estimate.sample_units[group]} sample units)"
        lines.append("  " + _line(basis, tally, False) + (f"  spend {_money(tally.gross_spend)}" if priced else ""))
    for name, tally in estimate.per_protocol.items():
        lines.append(
            f"  {name} run alone: {tally.calls:,.0f} calls" + (f", {_money(tally.gross_spend)}" if priced else "")
        )
    return "\n".join(lines)


def render_text(item: CostReport | RunEstimate, priced: bool | None = None) -> str:
    """Plain-text rendering of a report or an estimate (``priced``: show spend; default for a report: its own)."""
    if isinstance(item, CostReport):
        return render_report(item)
    return render_estimate(item, bool(priced))


def _tally_dict(t: Tally) -> dict[str, float]:
    return {n: getattr(t, n) for n in t.__dataclass_fields__} | {"requests_per_call": t.requests_per_call}


def report_to_dict(report: CostReport) -> dict[str, Any]:
    """A JSON-ready summary of a report (per-unit tallies summarised, not listed)."""
    return {
        "total": _tally_dict(report.total),
        "priced": report.priced,
        "essay_traits": len(report.per_unit),
        "protocols": {
            name: {
                "own": _tally_dict(pc.own),
                "shared": _tally_dict(pc.shared),
                "attributed": _tally_dict(pc.attributed),
                "debates": pc.debates,
                "shared_with": pc.shared_with,
            }
            for name, pc in report.protocols.items()
        },
        "unattributed": _tally_dict(report.unattributed),
        "by_model": {m: _tally_dict(t) for m, t in report.by_model.items()},
        "by_role": {r: _tally_dict(t) for r, t in report.by_role.items()},
    }


def estimate_to_dict(estimate: RunEstimate) -> dict[str, Any]:
    return {
        "n_essays": estimate.n_essays,
        "n_traits": estimate.n_traits,
        "protocols": estimate.protocols,
        "total": _tally_dict(estimate.total),
        "groups": {g: _tally_dict(t) for g, t in estimate.groups.items()},
        "per_protocol": {p: _tally_dict(t) for p, t in estimate.per_protocol.items()},
        "sample_units": estimate.sample_units,
    }


def to_json(item: CostReport | RunEstimate) -> str:
    data = report_to_dict(item) if isinstance(item, CostReport) else estimate_to_dict(item)
    return json.dumps(data, indent=2, sort_keys=True)
