"""The LLM-as-judge meta-evaluator (the confidence paper, Section 3.4 and Appendix C.4, Figures 7 and 8).

Each Advocate / Skeptic response of a finished debate run is shown to a separate evaluator together with the
prompt its agent received (3.4.1) and scored on instruction following, justification quality and evidence
grounding (1-3 each) plus a critical-issue flag (3.4.2); ``Q1`` is the sum of the three scores and ``Q`` is 0
when the flag is raised, else ``Q1`` (3.4.3). The evaluator decodes deterministically (Section 4.1:
temperature 0, the run's seed). Every judgment is one recorded, resumable call (key :func:`meta_key`); an
answer that cannot be read is recorded as failed, never imputed. The judgment itself (its fields, Q1 and Q,
the reading of an answer) is :mod:`madrag.paper.confidence.judgment`.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from madrag.agents.calls import AgentCall, CallContext, build_request, finish_record, new_record, once, request_settings
from madrag.agents.prompts import PromptLibrary
from madrag.agents.scores import normalise
from madrag.errors import ConfigError
from madrag.paper.confidence.judgment import (
    META_SCHEMA,
    RANGES,
    SCORE_FIELDS,
    MetaJudgment,
    MetaParseError,
    parse_meta_judgment,
)
from madrag.protocols.concurrency import gather_or_cancel
from madrag.providers.base import ChatRequest, ChatResponse, Message, Usage
from madrag.providers.policy import ManagedProvider
from madrag.records import AgentRecord

META_ROLE = "meta_evaluator"
META_PROTOCOL = "meta"
MetaMethod = Literal["auto", "json", "constrained"]
QUOTE_CONTINUATIONS = 3  # constrained mode: times the reasoning resumes after an escaped quote cut by the stop
AGENT_TYPES = {"advocate": "Advocate", "skeptic": "Skeptic"}
FOLLOWUP = (
    "Return only the JSON object now, with the fields instruction_following, justification_quality, "
    "evidence_grounding (integers 1-3), critical_flag (0 or 1), critical_issues_description and reasoning."
)
FRAME_COLUMNS = ["evaluated_key", "evaluated_role", "essay_id", "trait", "protocol", "method"]
FRAME_COLUMNS += [*SCORE_FIELDS, "critical_flag", "q1", "q", "ok", "error"]


def _try_parse(text: str) -> tuple[MetaJudgment | None, str | None]:
    try:
        return parse_meta_judgment(text), None
    except MetaParseError as exc:
        return None, str(exc)


def agent_prompts(record: AgentRecord) -> tuple[str, str]:
    """The (system prompt, user prompt) the agent of ``record`` received (3.4.1 prompt reconstruction).

    System: its system messages joined. User: its other messages in order, assistant turns labelled. In the
    ``seed`` prompt layout the role's instructions are the system prompt; in the ``shared_prefix`` layout the
    system message is the roles' shared one and the role's instructions (same wording) sit in the user message,
    after the essay and trait, so the evaluator finds them in the user prompt.
    """
    system = "\n\n".join(m.content.strip() for m in record.messages if m.role == "system")
    user = [
        m.content.strip() if m.role == "user" else f"[The agent's earlier reply]\n{m.content.strip()}"
        for m in record.messages
        if m.role != "system"
    ]
    return system, "\n\n".join(user)


def meta_messages(prompts: PromptLibrary, record: AgentRecord) -> list[Message]:
    """The evaluator's request for ``record``: Figure 7 as system message, Figure 8 filled in as user message."""
    system, user = agent_prompts(record)
    task = prompts.render(
        "meta_user",
        AGENT_TYPE=AGENT_TYPES.get(record.role, record.role.title()),
        AGENT_SYSTEM_PROMPT=system or "(none)",
        AGENT_USER_PROMPT=user or "(none)",
        AGENT_RESPONSE=record.text.strip(),
    )
    return [Message(role="system", content=prompts.render("meta_system")), Message(role="user", content=task)]


def meta_key(evaluated_key: str, retry_tokens: int | None = None) -> str:
    """The key of the judgment of the record keyed ``evaluated_key``; ``retry_tokens``: of its judgment made again
    at that larger token limit, after one cut off unusable at a smaller limit (:func:`meta_evaluate`)."""
    return "meta/" + evaluated_key + (f"@max_tokens={retry_tokens}" if retry_tokens is not None else "")


@dataclass
class _MetaCall(AgentCall):
    evaluated_key: str = ""
    retry_tokens: int | None = None

    @property
    def key(self) -> str:
        return meta_key(self.evaluated_key, self.retry_tokens)


def _cut_below(found: AgentRecord | None, max_tokens: int) -> bool:
    """Whether ``found`` is an unusable judgment cut off at a token limit smaller than ``max_tokens`` (so a run
    with the larger limit makes it again)."""
    if found is None or found.error is None or not found.truncated:
        return False
    limit = found.settings.get("max_tokens")
    return isinstance(limit, int) and limit < max_tokens


def latest_judgments(records: Iterable[AgentRecord]) -> list[AgentRecord]:
    """The judgment in force per evaluated record: the one made at the largest token limit (a judgment made again
    after a cut replaces the cut one), in the records' order; other records as they are."""
    chosen: dict[str, AgentRecord] = {}
    others: list[AgentRecord] = []
    for record in records:
        evaluated = record.context.get("evaluated_key") if record.role == META_ROLE else None
        if not isinstance(evaluated, str):
            others.append(record)
            continue
        held = chosen.get(evaluated)
        if held is None or int(record.settings.get("max_tokens") or 0) > int(held.settings.get("max_tokens") or 0):
            chosen[evaluated] = record
    return others + list(chosen.values())


def resolve_method(ctx: CallContext | ManagedProvider, method: MetaMethod) -> Literal["json", "constrained"]:
    """``auto``: constrained when the backend (a call context's, or the one given) has prefill and choices, else
    json. ConfigError when a constrained evaluation is asked of a backend that cannot do it."""
    provider = ctx.provider if isinstance(ctx, CallContext) else ctx
    caps = provider.capabilities
    able = caps.prefill and caps.choices
    if method == "constrained" and not able:
        raise ConfigError(
            f"meta-evaluation method 'constrained' needs a backend with prefill and choices; "
            f"{provider.provider.name} lacks them (use json)"
        )
    if method == "auto":
        return "constrained" if able else "json"
    return method


async def meta_evaluate(
    ctx: CallContext, record: AgentRecord, method: MetaMethod = "auto", max_tokens: int = 400
) -> AgentRecord:
    """The judgment record of ``record`` (from the store when already made; see the module docstring).

    ``json``: one request for the JSON object (with :data:`META_SCHEMA` as response format where the backend
    supports it); if it cannot be read, one follow-up asking for only the object; both answers are recorded.
    ``constrained``: the object is built field by field, each score chosen among its valid values as the
    argmax of the model's probabilities at that position (recorded in ``context["distributions"]``), then the
    reasoning is generated as free text up to its closing quote. ``critical_issues_description`` stays empty in
    this mode (one more generation per judgment for a field the analysis does not use).
    """
    if record.role == META_ROLE:
        raise ValueError(f"record {record.key!r} is itself a meta-evaluation")
    how = resolve_method(ctx, method)
    call = _MetaCall(
        protocol=META_PROTOCOL,
        essay_id=record.essay_id,
        trait=record.trait,
        role=META_ROLE,
        messages=meta_messages(ctx.prompts, record),
        temperature=0.0,
        max_tokens=max_tokens,
        round=record.round,
        index=record.index,
        context={
            "evaluated_key": record.key,
            "evaluated_role": record.role,
            "evaluated_protocol": record.protocol,
            "method": how,
        },
        evaluated_key=record.key,
    )
    if _cut_below(ctx.store.get(call.key), max_tokens):  # cut at a smaller limit: made again at this one
        call.retry_tokens = max_tokens
    return await once(ctx, call, lambda: _meta(ctx, call, how))


async def _meta(ctx: CallContext, call: AgentCall, how: Literal["json", "constrained"]) -> AgentRecord:
    started = time.monotonic()
    record = await (_constrained(ctx, call) if how == "constrained" else _json(ctx, call))
    record.wall_s = time.monotonic() - started
    return await finish_record(ctx, record)


def _request(ctx: CallContext, call: AgentCall, **overrides: Any) -> ChatRequest:
    return build_request(ctx, call, temperature=0.0, logprobs=False, top_logprobs=0, **overrides)


def _record(
    ctx: CallContext,
    call: AgentCall,
    settings: dict[str, Any],
    responses: list[ChatResponse],
    text: str,
    judgment: MetaJudgment | None,
    problem: str | None,
    **context: Any,
) -> AgentRecord:
    record = new_record(
        ctx,
        call,
        settings=settings,
        text=text,
        rationale=judgment.reasoning if judgment is not None else None,
        usage=sum((r.usage for r in responses), Usage.zero()),
        latency_s=sum(r.latency_s for r in responses),
        answers=len(responses),
        retries=[reason for r in responses for reason in r.retries],
        cached=all(r.cached for r in responses),
        truncated=any(r.finish_reason == "length" for r in responses),
        error=None if judgment is not None else f"unusable judgment: {_cut(problem, responses)}",
    )
    record.context = {**call.context, "judgment": judgment.model_dump() if judgment is not None else None, **context}
    return record


def _cut(problem: str | None, responses: list[ChatResponse]) -> str | None:
    """The problem of an unusable judgment, saying when its answer was cut by the token limit (``--max-tokens``)."""
    cut = [r for r in responses if r.finish_reason == "length"]
    if not cut:
        return problem
    tokens = cut[-1].usage.completion_tokens
    return f"{problem} (cut off at the token limit{f', {tokens} tokens' if tokens is not None else ''})"


async def _json(ctx: CallContext, call: AgentCall) -> AgentRecord:
    schema = META_SCHEMA if ctx.provider.capabilities.json_schema else None
    request = _request(ctx, call, json_schema=schema)
    responses = [await ctx.provider.complete(request)]
    judgment, problem = _try_parse(responses[0].text)
    if judgment is None:
        said, ask = Message(role="assistant", content=responses[0].text), Message(role="user", content=FOLLOWUP)
        follow = _request(ctx, call, json_schema=schema, messages=[*call.messages, said, ask])
        responses.append(await ctx.provider.complete(follow))
        judgment, problem = _try_parse(responses[1].text)
    text = "\n\n[follow-up]\n".join(r.text for r in responses)
    return _record(ctx, call, request_settings(request, responses[0]), responses, text, judgment, problem)


async def _constrained(ctx: CallContext, call: AgentCall) -> AgentRecord:
    prefill = "{"
    values: dict[str, int] = {}
    distributions: dict[str, dict[str, float] | None] = {}
    responses: list[ChatResponse] = []
    requests: list[ChatRequest] = []
    problem: str | None = None
    for name, (lo, hi) in RANGES.items():
        prefill += f'{", " if values else ""}"{name}": '
        choices = [str(v) for v in range(lo, hi + 1)]
        requests.append(_request(ctx, call, max_tokens=1, prefill=prefill, choices=choices))
        resp = await ctx.provider.complete(requests[-1])
        responses.append(resp)
        lps = {int(c): lp for c, lp in (resp.choice_logprobs or {}).items() if c in choices and math.isfinite(lp)}
        if lps:
            dist = normalise(lps)
            chosen = str(max(dist, key=lambda v: dist[v]))
            distributions[name] = {str(v): p for v, p in dist.items()}
        elif resp.text.strip() in choices:
            chosen, distributions[name] = resp.text.strip(), None
        else:
            problem = f"{name}: no valid choice in the answer {resp.text!r}"
            break
        values[name] = int(chosen)
        prefill += chosen
    judgment: MetaJudgment | None = None
    text = prefill
    if problem is None:
        prefill += ', "reasoning": "'
        reasoning = ""
        for step in range(QUOTE_CONTINUATIONS + 1):
            requests.append(_request(ctx, call, prefill=prefill + reasoning, stop=['"']))
            responses.append(resp := await ctx.provider.complete(requests[-1]))
            reasoning += resp.text
            escaped = (len(reasoning) - len(reasoning.rstrip("\\"))) % 2 == 1
            if not escaped or resp.finish_reason == "length" or step == QUOTE_CONTINUATIONS:
                break
            reasoning += '"'  # the stop cut an escaped quote inside the string: go on after it
        text = prefill + reasoning + '"}'
        judgment = MetaJudgment.model_validate({**values, "reasoning": _unescape(reasoning).strip()})
    settings = {**request_settings(requests[0]), "steps": len(requests)}
    return _record(ctx, call, settings, responses, text, judgment, problem, distributions=distributions)


def _unescape(fragment: str) -> str:
    """The content of a JSON string generated up to its closing quote (escapes decoded when they are valid)."""
    try:
        return str(json.loads(f'"{fragment}"'))
    except json.JSONDecodeError:
        return fragment


@dataclass
class MetaSummary:
    """What a meta-evaluation did: judgments made now, found in the store, unusable (of either), records given."""

    made: int
    reused: int
    failed: int
    total: int
    truncated: int = 0  # unusable judgments whose answer was cut by the token limit
    max_tokens: int | None = None  # the token limit of the judgments

    def advice(self) -> str:
        """What to do about the unusable judgments that were cut by the token limit (empty when none was)."""
        if not self.truncated:
            return ""
        limit = f" (now {self.max_tokens})" if self.max_tokens is not None else ""
        return (
            f"{self.truncated} of the {self.failed} unusable judgments were cut off at the token limit: run again "
            f"with a larger --max-tokens{limit} and the same --out (only those are made again)"
        )


async def run_meta_evaluation(
    ctx: CallContext,
    records: Sequence[AgentRecord],
    *,
    method: MetaMethod = "auto",
    max_tokens: int = 400,
    concurrency: int = 4,
) -> MetaSummary:
    """Judge exactly ``records`` (the caller picks the Advocate / Skeptic ones), ``concurrency`` at a time.

    A backend failure (after the provider policy's retries) propagates and stops the run, which resumes later
    from its finished judgments; unusable judgments are recorded and counted in ``failed``. ``made`` and
    ``reused`` come from the context's call statistics.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    resolve_method(ctx, method)  # a backend that cannot do the method fails before any call
    made, reused = ctx.stats.made, ctx.stats.reused
    gate = asyncio.Semaphore(concurrency)

    async def one(record: AgentRecord) -> AgentRecord:
        async with gate:
            return await meta_evaluate(ctx, record, method, max_tokens)

    results = await gather_or_cancel(*(one(r) for r in records))
    return MetaSummary(
        made=ctx.stats.made - made,
        reused=ctx.stats.reused - reused,
        failed=sum(r.error is not None for r in results),
        total=len(records),
        truncated=sum(r.error is not None and r.truncated for r in results),
        max_tokens=max_tokens,
    )


def judgments_frame(records: Iterable[AgentRecord]) -> pd.DataFrame:
    """One row per meta-evaluation record (other records are skipped): :data:`FRAME_COLUMNS`.

    ``protocol`` is the evaluated record's. Score columns, ``q1`` and ``q`` are float (NaN where the judgment
    was unusable, ``ok`` False and ``error`` saying why; ``error`` is missing (NaN/None) where ``ok``).
    """
    rows: list[dict[str, Any]] = []
    for r in records:
        if r.role != META_ROLE:
            continue
        c = r.context
        raw = c.get("judgment")
        j = MetaJudgment.model_validate(raw) if raw is not None and r.error is None else None
        scores = {} if j is None else {n: getattr(j, n) for n in (*SCORE_FIELDS, "critical_flag", "q1", "q")}
        row = {
            "evaluated_key": c.get("evaluated_key"),
            "evaluated_role": c.get("evaluated_role"),
            "essay_id": r.essay_id,
        }
        row |= {"trait": r.trait, "protocol": c.get("evaluated_protocol"), "method": c.get("method"), **scores}
        rows.append(row | {"ok": j is not None, "error": r.error})
    frame = pd.DataFrame(rows, columns=FRAME_COLUMNS)
    numeric = [*SCORE_FIELDS, "critical_flag", "q1", "q"]
    frame[numeric] = frame[numeric].astype("float64")
    frame["ok"] = frame["ok"].astype(bool)
    return frame
