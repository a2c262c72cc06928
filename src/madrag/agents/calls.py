"""The recorded agent call: look the call up in the run store, else make it, then store its record at once.

:class:`CallContext` is what every call needs, :class:`AgentCall` one call to make; :func:`once` finds or makes
its record, :func:`build_request` / :func:`new_record` / :func:`finish_record` are the steps of making one.

A call that uses up its retries (:class:`~madrag.errors.RetriesExhausted`) in a context with a
:class:`FailureBudget` becomes a failed record (:func:`madrag.records.failed_key`) and raises
:class:`~madrag.errors.CallFailed`: the pipeline goes on without it, and a resume makes it again. Once the budget
is spent (``--max-failures``) no new call starts (:class:`~madrag.errors.RunStopping`); calls in flight finish.
Debaters (Advocate, Skeptic) are called here, with a first-token confidence (the MADRAG paper's A.4); the Judge's calls
and the reading of its score are in :mod:`madrag.agents.judge`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from madrag.agents.evidence import check_answer
from madrag.agents.prompts import PromptLibrary
from madrag.errors import CallFailed, ConfigError, ContextOverflow, ProviderError, RetriesExhausted, RunStopping, hint
from madrag.providers.accounting import CallTally, current_tally, tallying
from madrag.providers.base import ChatRequest, ChatResponse, Message
from madrag.providers.policy import ManagedProvider
from madrag.records import AgentRecord, ConfidenceSource, call_key, failed_key, prompt_hash
from madrag.settings import ScoringSettings
from madrag.store.writer import ScoreRow

if TYPE_CHECKING:
    from madrag.agents.context import ExemplarSource

log = logging.getLogger(__name__)

ScoreReading = Literal["choices", "schema", "text"]
"""How a Judge's score is read (:meth:`CallContext.score_reading`); recorded in each Judge record's settings."""
SELF_CONFIDENCE = re.compile(r"confidence\s*[:=]\s*([01](?:\.\d+)?)", re.IGNORECASE)
"""A debater's stated confidence (``Confidence: 0.8``), read when the backend gives no logprobs."""


class RecordStore(Protocol):
    """What a call needs of a run store: a finished call's record by key, and a durable write of a new one (and
    of an essay's final scores, :func:`madrag.pipeline.final_scores.keeper`).
    The run store (:class:`madrag.store.RunStore`) is one; a distributed worker's shard store, which streams
    records to the one writer of the run, is another."""

    def get(self, key: str) -> AgentRecord | None: ...

    async def aput(self, record: AgentRecord) -> bool: ...

    async def aput_scores(self, rows: Sequence[ScoreRow]) -> None: ...


@dataclass
class CallStats:
    """Counts over a run's calls: made now (of them, ``cached``: answered wholly from the response cache, no
    request sent), reused from the store, scores that could not be read, and calls that got no answer after their
    retries (recorded as failed)."""

    made: int = 0
    cached: int = 0
    reused: int = 0
    failed_scores: int = 0
    failed_calls: int = 0


@dataclass
class FailureBudget:
    """How many calls may fail after their retries before the run stops (``max_failures``; None: no limit),
    and the failures so far (their call keys and the last reason)."""

    max_failures: int | None = None
    failed: list[str] = field(default_factory=list)
    last_error: str = ""
    halted: bool = False  # told to stop from outside (a Ray worker, once the cluster's budget is spent)

    @property
    def spent(self) -> bool:
        """Whether the run is to stop: ``max_failures`` calls have failed (or it was :meth:`halt`-ed)."""
        return self.halted or (self.max_failures is not None and len(self.failed) >= self.max_failures)

    def halt(self) -> None:
        """Start no new call from now on (the calls in flight finish)."""
        self.halted = True

    def add(self, key: str, error: str) -> None:
        """Count a failed call."""
        self.failed.append(key)
        self.last_error = error

    def check(self) -> None:
        """:class:`RunStopping` once the budget is spent (no new call starts)."""
        if self.spent:
            raise RunStopping(f"the run is stopping after {len(self.failed)} failed calls")


@dataclass
class CallContext:
    """Everything an agent call needs: backend, store, prompts, settings, exemplar bank."""

    run_id: str
    provider: ManagedProvider
    store: RecordStore
    prompts: PromptLibrary
    settings: ScoringSettings
    bank: ExemplarSource | None = None
    on_record: Callable[[AgentRecord], None] | None = None
    # told of each failed record (a call that got no answer after its retries), as ``on_record`` of each made one
    on_failed: Callable[[AgentRecord], None] | None = None
    stats: CallStats = field(default_factory=CallStats)
    # calls being made right now, by key: a second request for the same call (e.g. the debate that MAD and
    # MADRAG share) waits for the first instead of paying for, and reading, a second one
    inflight: dict[str, asyncio.Future[AgentRecord]] = field(default_factory=dict)
    # backends for particular roles (the consensus paper's cross-model pairs: the Strict and Lenient judges on different
    # models); a role not named here uses ``provider``
    role_providers: dict[str, ManagedProvider] = field(default_factory=dict)
    # with a budget, a call that uses up its retries becomes a failed record and the run goes on (see the module
    # docstring); None: the error stops the caller, nothing is recorded for the call
    failures: FailureBudget | None = None

    def for_role(self, role: str) -> CallContext:
        """This context with the backend of ``role`` (the same store, statistics and in-flight calls)."""
        provider = self.role_providers.get(role)
        return self if provider is None or provider is self.provider else replace(self, provider=provider)

    @property
    def self_report_confidence(self) -> bool:
        """Without logprobs, debaters state their confidence (and records say so)."""
        return not self.provider.capabilities.logprobs

    def score_reading(self) -> ScoreReading:
        """How Judge scores are read with this context's backend and settings (:func:`score_reading`)."""
        return score_reading(self.provider, self.settings)


def score_reading(provider: ManagedProvider, settings: ScoringSettings) -> ScoreReading:
    """How Judge scores are read (see :mod:`madrag.agents.judge`): ``choices`` (prefill + choices, e.g. the
    embedded model), ``schema`` (an OpenAI-compatible server that honours a JSON schema: the score asked
    for in a second request restricted to the valid integers) or ``text``. The run's score method decides:
    ``auto`` is ``choices`` where the backend has prefill and choices, else ``text`` (the MADRAG paper's A.5's
    parse-or-missing); ``constrained`` is ``choices``, else ``schema`` where the backend takes a JSON schema
    (a run checks the server honours it before its first call: :mod:`madrag.pipeline.preflight`), else a
    ConfigError."""
    caps = provider.capabilities
    method = settings.score_method
    choices = caps.prefill and caps.choices
    if method == "text" or (method == "auto" and not choices):
        return "text"
    if choices:
        return "choices"
    if caps.json_schema:
        return "schema"
    raise ConfigError(
        f"score method 'constrained' needs a backend with prefill and choices or one that takes a JSON "
        f"schema; {provider.provider.name} has neither ({hint('score-method-text')})"
    )


@dataclass
class AgentCall:
    """One agent call to make (or find already made) in a run."""

    protocol: str
    essay_id: str
    trait: str
    role: str
    messages: list[Message]
    temperature: float
    max_tokens: int
    round: int = 1
    index: int = 0
    context: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None  # this call's sampling seed when it differs from the run's (MA's several judges)
    # the essay as the agent was shown it: the answer's quotes and placeholder mentions are checked against it
    # (:mod:`madrag.agents.evidence`); None for calls that see no essay
    essay: str | None = None

    @property
    def key(self) -> str:
        """The call's key in the run store."""
        return call_key(self.protocol, self.essay_id, self.trait, self.role, self.round, self.index)


def new_record(ctx: CallContext, call: AgentCall, **fields: Any) -> AgentRecord:
    """The record of ``call`` made on ``ctx``'s backend, with the call's identity and prompt and ``fields``; the
    answer's evidence counts when the call saw an essay (quotes unless ``--evidence-check off``)."""
    answer = fields.get("rationale") or fields.get("text") or ""
    if call.essay is not None and "evidence" not in fields:
        fields["evidence"] = check_answer(answer, call.essay, quotes=ctx.settings.evidence_check != "off")
    return AgentRecord(
        run_id=ctx.run_id,
        key=call.key,
        essay_id=call.essay_id,
        trait=call.trait,
        protocol=call.protocol,
        role=call.role,
        round=call.round,
        index=call.index,
        provider=ctx.provider.provider.name,
        model=ctx.provider.provider.model,
        requested_model=ctx.provider.provider.model,
        prompt_hash=prompt_hash(call.messages),
        messages=call.messages,
        context=call.context,
        **fields,
    )


async def finish_record(ctx: CallContext, record: AgentRecord) -> AgentRecord:
    """Store a made call's record (with the requests it sent and the model its answers name, when made inside
    :func:`once`); the call counts as made (and its record is returned) once it is committed. The commit runs in
    the store's writer thread, so the event loop serves other calls meanwhile."""
    if (tally := current_tally()) is not None:
        record.attempts = tally.attempts
        record.model = tally.answered_model or record.model  # the model its answers name
    await ctx.store.aput(record)
    ctx.stats.made += 1
    ctx.stats.cached += int(record.cached)
    if ctx.on_record is not None:
        ctx.on_record(record)
    return record


async def once(ctx: CallContext, call: AgentCall, make: Callable[[], Awaitable[AgentRecord]]) -> AgentRecord:
    """The record of ``call``: from the store, from an identical call in flight, or made now by ``make`` (the
    requests it sends counted into its record). With a failure budget, a call whose retries are spent is
    recorded as failed and raises :class:`CallFailed`; a call not yet started once the budget is spent raises
    :class:`RunStopping`."""
    if (found := ctx.store.get(call.key)) is not None:
        ctx.stats.reused += 1
        if ctx.on_record is not None:
            ctx.on_record(found)
        return found
    if (pending := ctx.inflight.get(call.key)) is not None:
        return await asyncio.shield(pending)
    if ctx.failures is not None:
        ctx.failures.check()
    future: asyncio.Future[AgentRecord] = asyncio.get_running_loop().create_future()
    ctx.inflight[call.key] = future
    try:
        with tallying() as tally:
            try:
                record = await make()
            except (RetriesExhausted, ContextOverflow) as exc:
                if ctx.failures is None:
                    raise
                raise await record_failure(ctx, call, tally, exc) from exc
    except BaseException as exc:
        if isinstance(exc, asyncio.CancelledError):
            future.cancel()
        else:
            future.set_exception(exc)
            future.exception()  # waiters re-raise it; nobody waiting is fine too
        raise
    finally:
        del ctx.inflight[call.key]
    future.set_result(record)
    return record


async def record_failure(ctx: CallContext, call: AgentCall, tally: CallTally, exc: ProviderError) -> CallFailed:
    """Store the failed record of ``call`` (what it sent and got before giving up), count it against the run's
    budget (a prompt over the server's context, :class:`ContextOverflow`, is not: it fails its essay-trait, never
    the run) and return the :class:`CallFailed` to raise."""
    overflow = isinstance(exc, ContextOverflow)
    error = f"{OVERFLOW}: {exc}" if overflow else str(exc)
    record = new_record(
        ctx,
        call,
        error=error,
        failed=True,
        answers=tally.answers,
        attempts=tally.attempts,
        retries=list(tally.retries),
        usage=tally.usage,
        cached=False,
        evidence=None,
    )
    record.model = tally.answered_model or record.model
    record.key = failed_key(call.key, uuid.uuid4().hex[:12])
    await ctx.store.aput(record)
    ctx.stats.failed_calls += 1
    if ctx.failures is not None and not overflow:
        ctx.failures.add(call.key, error)
    if ctx.on_failed is not None:
        ctx.on_failed(record)
    if overflow:
        log.warning("%s: %s; recorded as failed, the run goes on without it", called(call), error)
    else:
        log.warning("call %s failed after its retries (%s); recorded as failed, a resume retries it", call.key, exc)
    return CallFailed(f"call {call.key} failed: {error}", call.key)


OVERFLOW = "the prompt does not fit the server's context"
"""The start of a failed record's error when the server refused its prompt as too long for its context."""


def called(call: AgentCall) -> str:
    """A call named by its essay, trait, role and protocol."""
    trait = "every trait" if call.trait == "*" else f"trait {call.trait}"
    return f"essay {call.essay_id}, {trait}, role {call.role} ({call.protocol})"


def build_request(ctx: CallContext, call: AgentCall, **overrides: Any) -> ChatRequest:
    """The backend request of ``call``: its messages and sampling, its seed (else the run's), logprobs when the
    backend has them; ``overrides`` replace any of these fields."""
    caps = ctx.provider.capabilities
    want_lp = caps.logprobs
    fields: dict[str, Any] = {
        "messages": call.messages,
        "temperature": call.temperature,
        "max_tokens": call.max_tokens,
        "seed": call.seed if call.seed is not None else ctx.settings.seed,
        "logprobs": want_lp,
        "top_logprobs": min(ctx.settings.top_logprobs, caps.max_top_logprobs) if want_lp else 0,
        "role": call.role,  # role, trait and round label the request: never sent, never hashed
        "trait": call.trait,
        "round": call.round,
    }
    fields.update(overrides)
    return ChatRequest(**fields)


def request_settings(request: ChatRequest, response: ChatResponse | None = None) -> dict[str, Any]:
    """A request's settings as a record keeps them (without its messages and prefill), plus ``sent``: the
    parameters the backend actually sent, when ``response`` says (e.g. ``max_completion_tokens`` and no
    ``temperature`` for an OpenAI reasoning model; see :mod:`madrag.providers.adapt`)."""
    settings = request.model_dump(exclude={"messages", "prefill"}, exclude_none=True)
    if response is not None and response.sent is not None:
        settings["sent"] = response.sent
    return settings


def answer_fields(request: ChatRequest, response: ChatResponse, started: float) -> dict[str, Any]:
    """What every record of a free-text answer keeps of its request and response (the settings sent, the text as
    its rationale, usage, latency, retries, wall time since ``started``, cached, truncated)."""
    return {
        "settings": request_settings(request, response),
        "text": response.text,
        "rationale": response.text.strip(),
        "usage": response.usage,
        "latency_s": response.latency_s,
        "retries": response.retries,
        "wall_s": time.monotonic() - started,
        "cached": response.cached,
        "truncated": response.finish_reason == "length",
    }


async def debater(ctx: CallContext, call: AgentCall) -> AgentRecord:
    """Advocate or Skeptic: free text, with its confidence (first-token logprob, or self-reported)."""
    return await once(ctx, call, lambda: _debater(ctx, call))


async def _debater(ctx: CallContext, call: AgentCall) -> AgentRecord:
    request = build_request(ctx, call)
    started = time.monotonic()
    response = await ctx.provider.complete(request)
    # c = exp(log p(first generated token)), the MADRAG paper's A.4
    confidence = math.exp(response.tokens[0].logprob) if response.tokens else None
    source: ConfidenceSource = "first_token_logprob" if confidence is not None else "none"
    if confidence is None and ctx.self_report_confidence:
        if m := list(SELF_CONFIDENCE.finditer(response.text)):
            confidence, source = float(m[-1].group(1)), "self_reported"
    fields = answer_fields(request, response, started)
    record = new_record(ctx, call, **fields, tokens=response.tokens, confidence=confidence, confidence_source=source)
    return await finish_record(ctx, record)
