"""The recorded agent call: look the call up in the run store, else make it, then store its record at once.

Debaters (Advocate, Skeptic) get a first-token confidence (seed 000 A.4); the Judge gets a score read as
reliably as the backend allows (see :func:`judge`).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from madrag.agents.prompts import PromptLibrary
from madrag.errors import ConfigError
from madrag.providers.base import ChatRequest, ChatResponse, Message, TokenLogprob, Usage
from madrag.providers.policy import ManagedProvider
from madrag.records import AgentRecord, ConfidenceSource, ScoreMode, call_key, prompt_hash
from madrag.rubric import Trait
from madrag.agents.judge import distribution_from_tokens, normalise, parse_score, summarise
from madrag.settings import ScoringSettings

if TYPE_CHECKING:
    from madrag.retrieval.bank import ExemplarBank

SELF_CONFIDENCE = re.compile(r"confidence\s*[:=]\s*([01](?:\.\d+)?)", re.IGNORECASE)
FOLLOWUP = "State your final score now, as one line 'Final score: N' with N an integer between {lo} and {hi}."


class RecordStore(Protocol):
    """What a call needs of a run store: a finished call's record by key, and a durable write of a new one.
    The run store (:class:`madrag.store.RunStore`) is one; a distributed worker's shard store, which streams
    records to the one writer of the run, is another."""

    def get(self, key: str) -> AgentRecord | None: ...

    async def aput(self, record: AgentRecord) -> bool: ...


@dataclass
class CallStats:
    made: int = 0
    reused: int = 0
    failed_scores: int = 0


@dataclass
class CallContext:
    """Everything an agent call needs: backend, store, prompts, settings, exemplar bank."""

    run_id: str
    provider: ManagedProvider
    store: RecordStore
    prompts: PromptLibrary
    settings: ScoringSettings
    bank: ExemplarBank | None = None
    on_record: Callable[[AgentRecord], None] | None = None
    stats: CallStats = field(default_factory=CallStats)
    # calls being made right now, by key: a second request for the same call (e.g. the debate that MAD and
    # MADRAG share) waits for the first instead of paying for, and reading, a second one
    inflight: dict[str, asyncio.Future[AgentRecord]] = field(default_factory=dict)
    # backends for particular roles (seed 002's cross-model pairs: the Strict and Lenient judges on different
    # models); a role not named here uses ``provider``
    role_providers: dict[str, ManagedProvider] = field(default_factory=dict)

    def for_role(self, role: str) -> CallContext:
        """This context with the backend of ``role`` (the same store, statistics and in-flight calls)."""
        provider = self.role_providers.get(role)
        return self if provider is None or provider is self.provider else replace(self, provider=provider)

    @property
    def self_report_confidence(self) -> bool:
        """Without logprobs, debaters state their confidence (and records say so)."""
        return not self.provider.capabilities.logprobs

    def constrained_scoring(self) -> bool:
        caps = self.provider.capabilities
        method = self.settings.score_method
        if method == "constrained" and not (caps.prefill and caps.choices):
            raise ConfigError(
                f"score method 'constrained' needs a backend with prefill and choices; "
                f"{self.provider.provider.name} has neither (use --score-method text)"
            )
        return method == "constrained" or (method == "auto" and caps.prefill and caps.choices)


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

    @property
    def key(self) -> str:
        return call_key(self.protocol, self.essay_id, self.trait, self.role, self.round, self.index)


def new_record(ctx: CallContext, call: AgentCall, **fields: Any) -> AgentRecord:
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
        prompt_hash=prompt_hash(call.messages),
        messages=call.messages,
        context=call.context,
        **fields,
    )


async def finish_record(ctx: CallContext, record: AgentRecord) -> AgentRecord:
    """Store a made call's record; the call counts as made (and its record is returned) once it is committed.
    The commit runs in the store's writer thread, so the event loop serves other calls meanwhile."""
    await ctx.store.aput(record)
    ctx.stats.made += 1
    if ctx.on_record is not None:
        ctx.on_record(record)
    return record


def _reuse(ctx: CallContext, call: AgentCall) -> AgentRecord | None:
    found = ctx.store.get(call.key)
    if found is not None:
        ctx.stats.reused += 1
        if ctx.on_record is not None:
            ctx.on_record(found)
    return found


async def once(ctx: CallContext, call: AgentCall, make: Callable[[], Awaitable[AgentRecord]]) -> AgentRecord:
    """The record of ``call``: from the store, from an identical call in flight, or made now by ``make``."""
    if (found := _reuse(ctx, call)) is not None:
        return found
    if (pending := ctx.inflight.get(call.key)) is not None:
        return await asyncio.shield(pending)
    future: asyncio.Future[AgentRecord] = asyncio.get_running_loop().create_future()
    ctx.inflight[call.key] = future
    try:
        record = await make()
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


def build_request(ctx: CallContext, call: AgentCall, **overrides: Any) -> ChatRequest:
    caps = ctx.provider.capabilities
    want_lp = caps.logprobs
    fields: dict[str, Any] = {
        "messages": call.messages,
        "temperature": call.temperature,
        "max_tokens": call.max_tokens,
        "seed": ctx.settings.seed,
        "logprobs": want_lp,
        "top_logprobs": min(ctx.settings.top_logprobs, caps.max_top_logprobs) if want_lp else 0,
    }
    fields.update(overrides)
    return ChatRequest(**fields)


def request_settings(request: ChatRequest) -> dict[str, Any]:
    return request.model_dump(exclude={"messages", "prefill"}, exclude_none=True)


def first_token_confidence(tokens: list[TokenLogprob] | None) -> float | None:
    """c = exp(log p(first generated token)), seed 000 A.4."""
    if not tokens:
        return None
    return math.exp(tokens[0].logprob)


async def debater(ctx: CallContext, call: AgentCall) -> AgentRecord:
    """Advocate or Skeptic: free text, with its confidence (first-token logprob, or self-reported)."""
    return await once(ctx, call, lambda: _debater(ctx, call))


async def _debater(ctx: CallContext, call: AgentCall) -> AgentRecord:
    request = build_request(ctx, call)
    started = time.monotonic()
    response = await ctx.provider.complete(request)
    confidence = first_token_confidence(response.tokens)
    source: ConfidenceSource = "first_token_logprob" if confidence is not None else "none"
    if confidence is None and ctx.self_report_confidence:
        if m := list(SELF_CONFIDENCE.finditer(response.text)):
            confidence, source = float(m[-1].group(1)), "self_reported"
    return await finish_record(
        ctx,
        new_record(
            ctx,
            call,
            settings=request_settings(request),
            text=response.text,
            rationale=response.text.strip(),
            tokens=response.tokens,
            confidence=confidence,
            confidence_source=source,
            usage=response.usage,
            latency_s=response.latency_s,
            wall_s=time.monotonic() - started,
            cached=response.cached,
        ),
    )


async def judge(ctx: CallContext, call: AgentCall, trait: Trait) -> AgentRecord:
    """A Judge call ending in a score for ``trait``.

    Constrained mode (backends with prefill + choices, e.g. the embedded llama.cpp model): the rationale is
    generated up to ``Final score``, then the score token is generated after ``Final score: `` restricted to
    the valid scores, and the model's probability of each valid score at that position is recorded.
    Text mode: the last ``Final score: N`` is parsed (and its distribution read from the top alternatives when
    the backend gives logprobs); if missing, one follow-up request asks for it. Either way a score that
    cannot be read is recorded as failed, never replaced by a number.
    """
    return await once(ctx, call, lambda: _judge(ctx, call, trait))


async def _judge(ctx: CallContext, call: AgentCall, trait: Trait) -> AgentRecord:
    started = time.monotonic()
    if ctx.constrained_scoring():
        record = await _judge_constrained(ctx, call, trait)
    else:
        record = await _judge_text(ctx, call, trait)
    record.wall_s = time.monotonic() - started
    if record.score is None or record.score.reported is None:
        ctx.stats.failed_scores += 1
    return await finish_record(ctx, record)


async def _judge_constrained(ctx: CallContext, call: AgentCall, trait: Trait) -> AgentRecord:
    first = build_request(ctx, call, stop=["Final score", "final score", "FINAL SCORE"])
    rationale_resp = await ctx.provider.complete(first)
    rationale = rationale_resp.text.rstrip()
    prefill = f"{rationale}\nFinal score: " if rationale else "Final score: "
    choices = [str(s) for s in trait.scores]
    second = build_request(ctx, call, temperature=0.0, max_tokens=1, prefill=prefill, choices=choices)
    score_resp = await ctx.provider.complete(second)
    lps = score_resp.choice_logprobs or {}
    dist = normalise({int(c): lp for c, lp in lps.items() if c in choices}) if lps else None
    parsed, problem = parse_score(prefill + score_resp.text, trait)
    score = summarise(dist, parsed, "constrained_distribution", ctx.settings.report, problem)
    tokens = (rationale_resp.tokens or []) + (score_resp.tokens or []) if rationale_resp.tokens else None
    return new_record(
        ctx,
        call,
        settings={**request_settings(first), "score_step": request_settings(second)},
        text=prefill + score_resp.text,
        rationale=rationale,
        tokens=tokens,
        score=score,
        usage=rationale_resp.usage + score_resp.usage,
        latency_s=rationale_resp.latency_s + score_resp.latency_s,
        requests=2,
        cached=rationale_resp.cached and score_resp.cached,
        error=None if score.reported is not None else f"unusable score: {problem}",
    )


async def _judge_text(ctx: CallContext, call: AgentCall, trait: Trait) -> AgentRecord:
    request = build_request(ctx, call)
    response = await ctx.provider.complete(request)
    responses: list[ChatResponse] = [response]
    text = response.text
    parsed, problem = parse_score(text, trait)
    mode: ScoreMode = "parsed_text"
    if parsed is None:
        follow = build_request(
            ctx,
            call,
            messages=[
                *call.messages,
                Message(role="assistant", content=text),
                Message(role="user", content=FOLLOWUP.format(lo=trait.min, hi=trait.max)),
            ],
            max_tokens=16,
            temperature=0.0,
        )
        response = await ctx.provider.complete(follow)
        responses.append(response)
        parsed, problem = parse_score(response.text, trait)
        mode = "parsed_followup"
    dist = distribution_from_tokens(response.text, response.tokens, trait) if response.tokens else None
    score = summarise(dist, parsed, mode if parsed is not None else "failed", ctx.settings.report, problem)
    return text_record(
        ctx,
        call,
        request,
        responses,
        "final score",
        score=score,
        error=None if score.reported is not None else f"unusable score: {problem}",
    )


def text_record(
    ctx: CallContext,
    call: AgentCall,
    request: ChatRequest,
    responses: list[ChatResponse],
    score_marker: str,
    **fields: Any,
) -> AgentRecord:
    """The record of a Judge call read from its text: the answer (and any follow-up), the rationale before the
    last ``score_marker``, the first answer's tokens, and usage and latency summed over the requests."""
    text = responses[0].text
    cut = text.lower().rfind(score_marker)
    usage = Usage()
    for r in responses:
        usage = usage + r.usage
    return new_record(
        ctx,
        call,
        settings=request_settings(request),
        text="\n\n[follow-up]\n".join(r.text for r in responses),
        rationale=(text[:cut] if cut >= 0 else text).strip(),
        tokens=responses[0].tokens,
        usage=usage,
        latency_s=sum(r.latency_s for r in responses),
        requests=len(responses),
        cached=all(r.cached for r in responses),
        **fields,
    )
