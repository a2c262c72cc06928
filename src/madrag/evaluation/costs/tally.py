"""What a run cost, from its records: per group, protocol, model, role and essay-trait.

Groups. Every record belongs to the group named by its ``protocol`` field: a Judge's protocol (``MAD``,
``MADRAG``, ``MA`` ...), a debate (``debate/adv_r1`` ...) or the consensus paper's shared round 0 (``consensus/init``).
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

Spend (price tables: :mod:`madrag.evaluation.costs.prices`). ``spend`` leaves out calls answered from the
response cache (nothing was billed for them in this run); ``gross_spend`` prices every call as if none were
cached. Calls of a model missing from the table are counted in ``unpriced_calls`` and add nothing to either.
Calls whose server reported no token usage are counted in ``no_usage_calls`` and add no tokens and no spend
(their usage is unknown, never taken as 0); ``truncated_calls`` counts calls with an answer cut by the token
limit.

Prefix caching. ``cached_prompt_tokens`` sums the prompt tokens servers said they served from their prefix
cache (``prompt_tokens_details.cached_tokens``), over the calls that said it, whose prompt tokens are
``cache_reported_prompt_tokens``; ``uncached_prompt_tokens`` is the difference (what such a server bills at the
full rate). Calls with usage but no cached count (llama-cpp-python's server, the embedded model, older records)
are counted in ``cache_unreported_calls`` and add to neither (unknown, never taken as 0). Spend prices every
prompt token at the prompt rate, cached or not.

Requests. ``requests`` counts the answers calls used (a two-step Judge: 2), ``attempts`` the requests actually
sent to the backend: failed attempts included, none for an answer from the response cache. Records made before
attempts were counted add nothing to ``attempts`` and are counted in ``attempts_unknown``. ``failed_calls``
counts calls that got no answer after their retries (failed records: their requests count, their essay-trait has
no score until a resume makes the call again); ``errors`` counts every record with an error, unusable Judge
scores included.

The checks before a run's first call (:mod:`madrag.pipeline.preflight`: the server reachable, its props, the
logprobs check, a JSON-schema probe) are no agent call and have no record: their HTTP requests, counted by check
and summed over the run's sessions in the store, are the report's ``checks`` (:class:`CheckRequests`); the
requests sent in all are the calls' ``attempts`` plus them.

A planned run's cost from a sample: :mod:`madrag.evaluation.costs.estimate`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from madrag.evaluation.costs.prices import PER_MILLION, Price, Prices, price_for
from madrag.records import BASELINE_ROLE, AgentRecord
from madrag.store import RunStore

DEBATE_PREFIX = "debate/"
SHARED_PREFIXES = (DEBATE_PREFIX, "consensus/")
"""Groups of calls made once and read by several protocols (debates; the consensus paper's shared round 0)."""
WHOLE_ESSAY = "*"
"""The trait of a call that scores every trait at once."""


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
    cached_prompt_tokens: int | None = None  # served from the server's prefix cache (None: not reported)
    truncated: bool = False  # an answer of the call was cut by the token limit
    attempts: int | None = None  # requests sent, failed ones included (None: not counted when it was recorded)
    failed: bool = False  # no answer after the retries
    reads: tuple[str, ...] = ()  # keys of the debate records a Judge read
    retries: tuple[str, ...] = ()  # why each failed attempt of the call was retried
    latency_s: float = 0.0  # the backend's time on the call's requests
    stored_at: float | None = None  # when the call was stored (epoch seconds; its end)
    requested_model: str | None = None  # the model asked for, where the answers named ``model``

    @classmethod
    def of(cls, record: AgentRecord) -> CallCost:
        """The record's cost fields and the keys of the shared records it read (debate turns, previous rounds)."""
        reads = record.context.get("debate") or []
        reads = list(reads) if isinstance(reads, list) else []
        reads += [record.context[k] for k in ("own_previous", "other_previous") if k in record.context]
        usage = record.usage
        return cls(
            **{n: getattr(record, n) for n in _SAME_NAMES},
            group=record.protocol,
            requests=record.answers,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_prompt_tokens=usage.cached_prompt_tokens,
            error=record.error is not None,
            reads=tuple(str(k) for k in reads),
            retries=tuple(record.retries),
            stored_at=record.created_at,
        )


_SAME_NAMES = "key essay_id trait role model cached truncated attempts failed latency_s requested_model".split()
"""The fields a call takes from its record as they are."""


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
    retries: float = 0.0  # failed attempts (their requests are in ``attempts``, not in ``requests``)
    attempts: float = 0.0  # requests sent to the backend, failed ones included, none for cached answers
    attempts_unknown: float = 0.0  # calls recorded before attempts were counted (nothing added to ``attempts``)
    failed_calls: float = 0.0  # calls with no answer after their retries
    spend: float = 0.0  # priced calls not served from the response cache
    gross_spend: float = 0.0  # priced calls, as if none were cached
    unpriced_calls: float = 0.0
    cached_prompt_tokens: float = 0.0  # prompt tokens servers served from their prefix cache (where they said)
    cache_reported_prompt_tokens: float = 0.0  # prompt tokens of the calls whose server said how many were cached
    cache_unreported_calls: float = 0.0  # calls with usage but no cached count (unknown, not 0)

    def add(self, call: CallCost, price: Price | None, weight: float = 1.0) -> None:
        """Count ``weight`` times one call (its spend when ``price`` is known, else as unpriced); a call without
        known usage adds no tokens and no spend and is counted in ``no_usage_calls`` instead."""
        self.calls += weight
        self.requests += weight * call.requests
        self.cached_calls += weight * call.cached
        self.errors += weight * call.error
        self.retries += weight * len(call.retries)
        self.truncated_calls += weight * call.truncated
        self.failed_calls += weight * call.failed
        if call.attempts is None:
            self.attempts_unknown += weight
        else:
            self.attempts += weight * call.attempts
        if call.prompt_tokens is None or call.completion_tokens is None:
            self.no_usage_calls += weight
            return
        self.prompt_tokens += weight * call.prompt_tokens
        self.completion_tokens += weight * call.completion_tokens
        if call.cached_prompt_tokens is None:
            self.cache_unreported_calls += weight
        else:
            self.cached_prompt_tokens += weight * call.cached_prompt_tokens
            self.cache_reported_prompt_tokens += weight * call.prompt_tokens
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
        """A new tally: ``factor`` times this one."""
        return Tally().plus(self, factor)

    def __add__(self, other: Tally) -> Tally:
        """The sum of two tallies (so ``sum(tallies, start=Tally())`` works)."""
        return self.plus(other)

    @property
    def uncached_prompt_tokens(self) -> float:
        """Prompt tokens not served from a prefix cache, over the calls whose server said how many were."""
        return self.cache_reported_prompt_tokens - self.cached_prompt_tokens

    @property
    def requests_per_call(self) -> float:
        """Answers per call (a two-step Judge or a follow-up makes it above 1); 0 without calls."""
        return self.requests / self.calls if self.calls else 0.0

    @property
    def attempts_per_call(self) -> float | None:
        """Requests sent per call (retries make it above the answers, cache hits below); None when no call's
        attempts were counted."""
        counted = self.calls - self.attempts_unknown
        return self.attempts / counted if counted > 0 else None


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


@dataclass(frozen=True)
class CheckRequests:
    """The HTTP requests the checks before a run's first call sent, by check, summed over the run's sessions;
    ``complete`` is false when a session's were not counted (it ran before madrag counted them)."""

    by_check: dict[str, int]
    complete: bool

    @property
    def total(self) -> int:
        return sum(self.by_check.values())

    @classmethod
    def of(cls, store: RunStore) -> CheckRequests:
        """What ``store`` kept (:func:`madrag.pipeline.preflight.record_checks`); none counted, and so not
        complete, for a run that kept nothing."""
        kept = store.get_meta("check_requests")
        if not isinstance(kept, dict):
            return cls({}, complete=False)
        return cls({str(k): int(v) for k, v in (kept.get("by_check") or {}).items()}, bool(kept.get("complete")))


@dataclass
class CostReport:
    """A run's tallies: in total, per group, per protocol (three ways), per model, per role and per essay-trait
    (``per_unit``), with the calls they were summed from."""

    total: Tally
    groups: dict[str, GroupCost]
    protocols: dict[str, ProtocolCost]
    unattributed: Tally
    by_model: dict[str, Tally]
    by_role: dict[str, Tally]
    per_unit: dict[tuple[str, str], Tally]
    calls: list[CallCost]
    priced: bool
    checks: CheckRequests | None = None  # the checks' requests (None: a report of records, not of a run's store)

    @property
    def requests_sent(self) -> int | None:
        """Every HTTP request the run sent: its calls' and its checks'; None where some were not counted."""
        if self.checks is None or not self.checks.complete or self.total.attempts_unknown:
            return None
        return round(self.total.attempts) + self.checks.total

    @property
    def retry_kinds(self) -> dict[str, int]:
        """Retries counted by kind of reason (``HTTP 429``, ``HTTP 500``, ``timeout``, ``connection`` ...)."""
        from madrag.providers.policy import retry_kind

        kinds = Counter(retry_kind(reason) for call in self.calls for reason in call.retries)
        return dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def retried_calls(self) -> list[CallCost]:
        """The calls that needed at least one retry, in store order."""
        return [c for c in self.calls if c.retries]


def _as_calls(records: RunStore | Iterable[AgentRecord | CallCost]) -> list[CallCost]:
    """The cost fields of a store's records, of records, or calls as they are; the LLM-free baselines' records
    (role ``baseline``, ``madrag baseline``) and any other record that holds no answer and is no failed call (it
    sent no request: CJ's ``compared`` mark, a score an earlier madrag stored as a record) are no calls and are
    left out."""
    items = records.records() if isinstance(records, RunStore) else records
    return [
        c if isinstance(c, CallCost) else CallCost.of(c)
        for c in items
        if isinstance(c, CallCost) or (c.role != BASELINE_ROLE and (c.answers > 0 or c.failed))
    ]


def is_shared(group: str) -> bool:
    """Whether a group's calls are made once and read by several protocols (:data:`SHARED_PREFIXES`)."""
    return group.startswith(SHARED_PREFIXES)


def _reads(calls: Sequence[CallCost], protocols: Sequence[str]) -> dict[str, set[str]]:
    """Protocol -> keys of the shared records it read: from the records' links, and for configured protocols
    the shared calls they read without linking them (:attr:`~madrag.protocols.base.ProtocolNeeds.shared_calls`:
    StrictJudge and LenientJudge read the shared round-0 call of their role)."""
    from madrag.protocols import find_protocol

    reads: dict[str, set[str]] = defaultdict(set)
    shared_keys = {c.key for c in calls if is_shared(c.group)}
    for call in calls:
        reads[call.group].update(k for k in call.reads if k in shared_keys)
    for name in protocols:
        proto = find_protocol(name)
        for group, roles in (proto.needs.shared_calls if proto is not None else {}).items():
            if is_shared(group):
                reads[name].update(c.key for c in calls if c.group == group and c.role in roles)
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
        from madrag.evaluation.run import run_config

        protocols = run_config(records)[1]
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
        price = price_for(call.model, prices, call.requested_model)
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
        priced=prices is not None, checks=CheckRequests.of(records) if isinstance(records, RunStore) else None,
    )  # fmt: skip


def _links(
    protocol: str, reads: Mapping[str, set[str]], readers: Mapping[str, set[str]], group_of: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """(shared groups ``protocol`` read, other protocols that read the same shared records)."""
    keys = reads.get(protocol, set())
    others = {p for key in keys for p in readers.get(key, set())} - {protocol}
    return sorted({group_of[k] for k in keys}), sorted(others)
