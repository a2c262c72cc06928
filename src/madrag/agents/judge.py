"""The Judge calls and how each reads its score: the per-trait ``Final score: N`` and the all-traits ``Scores:``
block (the pure reading of a text, no call made, is in :mod:`madrag.agents.scores`).

Three ways to read a score, chosen per backend and the run's ``score_method`` (:meth:`CallContext.score_reading`,
recorded in each Judge record's ``settings["score_reading"]``):

* constrained (backends with prefill + choices, e.g. the embedded llama.cpp model): the rationale is generated
  up to the score marker, then each score token is generated restricted to the trait's valid scores, and the
  model's probability of each valid score at that position is recorded;
* constrained by a JSON schema (``--score-method constrained`` on an OpenAI-compatible server that honours a
  ``response_format`` JSON schema: llama.cpp's server, vLLM, OpenAI): the rationale is generated up to the score
  marker, then a second request (the rationale as the Judge's turn, then :data:`SCHEMA_ASK`) is answered under a
  schema whose score is one of the trait's valid integers (mode ``constrained_schema``), its distribution read
  from the top alternatives at the score's token of that JSON answer when the backend gives logprobs;
* text: the score is the value of the Judge's last own ``Final score: N`` statement (:func:`parse_score`; what
  counts as one, and what is not the Judge's own, in :mod:`madrag.agents.final_score`), its distribution read
  from the top alternatives at that value when the backend gives logprobs; when it cannot be read and the run
  asks for it (``score_followup``), one follow-up request asks for it.

Either way a score that cannot be read is recorded as failed (``mode="failed"``, ``reported=None``, the problem
in the record's ``error``), never turned into a number, whatever the run's ``report`` setting (the MADRAG paper's A.5).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from itertools import product
from typing import Any, TypeVar

from madrag.agents.calls import (
    AgentCall,
    CallContext,
    build_request,
    finish_record,
    new_record,
    once,
    request_settings,
)
from madrag.agents.final_score import parse_score as parse_score
from madrag.agents.final_score import rationale as judge_rationale
from madrag.agents.scores import blank_score_line as blank_score_line
from madrag.agents.scores import choice_distribution as choice_distribution
from madrag.agents.scores import distribution_at as distribution_at
from madrag.agents.scores import distribution_from_tokens as distribution_from_tokens
from madrag.agents.scores import json_value_offset as json_value_offset
from madrag.agents.scores import parse_trait_scores as parse_trait_scores
from madrag.agents.scores import summarise as summarise
from madrag.providers.base import ChatRequest, ChatResponse, Message, Usage
from madrag.records import AgentRecord, ScoreMode, ScoreResult
from madrag.rubric import Rubric, Trait

FOLLOWUP = "State your final score now, as one line 'Final score: N' with N an integer between {lo} and {hi}."
"""The per-trait Judge's follow-up request when its answer has no usable ``Final score: N``."""
SCORE_STOPS = [
    " ".join(words) for words in product(*([w.capitalize(), w.lower(), w.upper()] for w in ("final", "score")))
]
"""The stop strings of the constrained path's rationale step: ``Final score`` in every case of each word
(``Final Score``, the MADRAG paper's A.5's spelling, ``final score``, ``FINAL SCORE``, ...), so the rationale ends
at the
score marker however the model writes it, on any backend's (case-sensitive) stop matching."""
_MARKUP_TAIL = re.compile(r"(?:(?<=\s)|^)(?:[#>*_`~|]+|[-+\u2022])[ \t]*\Z")
"""Markdown left at the end of a rationale cut at the score marker (``**`` of ``**Final Score``, a heading's
``###``, a list's ``-``)."""
SCHEMA_ASK = "State your final score now as a JSON object: {fields}, each an integer between {lo} and {hi}."
"""The score step of the JSON-schema reading: what the Judge is asked after its rationale."""
SCORE_STEP_TOKENS = 32
"""Token limit of the JSON-schema reading's score step, per trait (``{"score": 4}`` is about 6 tokens)."""
MISSING_FOLLOWUP = "Give the missing scores now, one line per trait:\n"
"""The start of the all-traits follow-up request; the missing traits' :func:`blank_score_line` follow."""

T = TypeVar("T", Trait, Rubric)
_Reading = Callable[[CallContext, AgentCall, T], Awaitable[AgentRecord]]
"""One way to make a Judge call of what it scores (a trait or the whole rubric)."""

# -- Judge calls ----------------------------------------------------------------------------------------------


async def judge_trait(ctx: CallContext, call: AgentCall, trait: Trait) -> AgentRecord:
    """The record of a per-trait Judge call ending in ``Final score: N`` for ``trait``: from the store, from
    the same call in flight, or made now (constrained or text reading, see the module docstring)."""
    return await once(ctx, call, lambda: _made(ctx, call, trait, _judge_constrained, _judge_text))


async def judge_all_traits(ctx: CallContext, call: AgentCall, rubric: Rubric) -> AgentRecord:
    """The record of a call scoring every trait in a ``Scores:`` block (one ``<Trait>: N`` line each): from the
    store, from the same call in flight, or made now (constrained or text reading, see the module docstring)."""
    return await once(ctx, call, lambda: _made(ctx, call, rubric, _all_constrained, _all_text))


async def _made(
    ctx: CallContext, call: AgentCall, scored: T, constrained: _Reading[T], text: _Reading[T]
) -> AgentRecord:
    """Make a Judge call the way the backend allows (the ``text`` or the ``constrained`` reading of what it
    scores: a trait or the rubric), time it, count its unusable scores and store its record."""
    started = time.monotonic()
    reading = ctx.score_reading()
    record = await (text if reading == "text" else constrained)(ctx, call, scored)
    record.wall_s = time.monotonic() - started
    record.settings["score_reading"] = reading
    ctx.stats.failed_scores += _unusable(record)
    return await finish_record(ctx, record)


def _unusable(record: AgentRecord) -> int:
    """How many of a Judge record's scores could not be read."""
    if record.trait_scores is not None:
        return sum(1 for r in record.trait_scores.values() if r.reported is None)
    return int(record.score is None or record.score.reported is None)


async def _judge_constrained(ctx: CallContext, call: AgentCall, trait: Trait) -> AgentRecord:
    first = build_request(ctx, call, stop=SCORE_STOPS)
    rationale_resp = await ctx.provider.complete(first)
    rationale = _MARKUP_TAIL.sub("", rationale_resp.text).rstrip()
    if ctx.score_reading() == "schema":
        return await _schema_scores(ctx, call, [trait], first, rationale_resp)
    prefill = f"{rationale}\nFinal score: " if rationale else "Final score: "
    choices = [str(s) for s in trait.scores]
    second = build_request(ctx, call, temperature=0.0, max_tokens=1, prefill=prefill, choices=choices)
    score_resp = await ctx.provider.complete(second)
    # the score is the constrained step's own token, never a score line the rationale happens to contain
    parsed = int(score_resp.text.strip()) if score_resp.text.strip() in choices else None
    problem = None if parsed is not None else f"score step gave {score_resp.text!r}"
    dist = choice_distribution(score_resp, choices)
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
        **_rationale_then_score(rationale_resp, score_resp),
        error=None if score.reported is not None else f"unusable score: {problem}",
    )


async def _judge_text(ctx: CallContext, call: AgentCall, trait: Trait) -> AgentRecord:
    request = build_request(ctx, call)
    response = await ctx.provider.complete(request)
    responses: list[ChatResponse] = [response]
    parsed, problem = parse_score(response.text, trait, call.essay)
    first_problem = problem
    mode: ScoreMode = "parsed_text"
    if parsed is None and ctx.settings.score_followup:
        ask = FOLLOWUP.format(lo=trait.min, hi=trait.max)
        response = await ctx.provider.complete(_followup(ctx, call, response.text, ask, max_tokens=16))
        responses.append(response)
        parsed, problem = parse_score(response.text, trait, call.essay)
        problem = f"{first_problem}; follow-up: {problem}" if problem else first_problem
        mode = "parsed_followup"
    tokens = response.tokens
    dist = distribution_from_tokens(response.text, tokens, trait, call.essay) if tokens else None
    score = summarise(dist, parsed, mode if parsed is not None else "failed", ctx.settings.report, problem)
    error = None if score.reported is not None else f"unusable score: {problem}"
    said = judge_rationale(responses[0].text, call.essay)
    return _text_record(ctx, call, request, responses, said, score=score, error=error)


async def _all_constrained(ctx: CallContext, call: AgentCall, rubric: Rubric) -> AgentRecord:
    """The rationale up to ``Scores:``, then each trait's score token restricted to its valid scores."""
    first = build_request(ctx, call, stop=["Scores:", "scores:", "SCORES:"])
    rationale_resp = await ctx.provider.complete(first)
    rationale = rationale_resp.text.rstrip()
    if ctx.score_reading() == "schema":
        return await _schema_scores(ctx, call, rubric.traits, first, rationale_resp, all_traits=True)
    prefix = f"{rationale}\nScores:\n" if rationale else "Scores:\n"
    responses, steps = [rationale_resp], []
    results: dict[str, ScoreResult] = {}
    for trait in rubric.traits:
        prefix += f"{trait.name}: "
        choices = [str(s) for s in trait.scores]
        step = build_request(ctx, call, temperature=0.0, max_tokens=1, prefill=prefix, choices=choices)
        resp = await ctx.provider.complete(step)
        parsed = int(resp.text) if resp.text.strip() in choices else None
        results[trait.name] = summarise(
            choice_distribution(resp, choices), parsed, "constrained_distribution", ctx.settings.report
        )
        prefix += f"{resp.text}\n"
        responses.append(resp)
        steps.append(request_settings(step))
    return new_record(
        ctx,
        call,
        settings={**request_settings(first), "score_steps": steps},
        text=prefix.rstrip(),
        rationale=rationale,
        tokens=rationale_resp.tokens,
        trait_scores=results,
        **_summed(responses),
        truncated=was_cut(rationale_resp),
        error=_traits_error(results),
    )


async def _all_text(ctx: CallContext, call: AgentCall, rubric: Rubric) -> AgentRecord:
    """Each ``<Trait>: N`` line parsed from the answer; one follow-up request for the traits still missing."""
    request = build_request(ctx, call)
    responses: list[ChatResponse] = [await ctx.provider.complete(request)]
    found = parse_trait_scores(responses[0].text, rubric)
    mode: dict[str, ScoreMode] = {t: "parsed_text" for t in found}
    missing = [t for t in rubric.traits if t.name not in found]
    if missing and ctx.settings.score_followup:
        ask = MISSING_FOLLOWUP + "\n".join(blank_score_line(t) for t in missing)
        follow = _followup(ctx, call, responses[0].text, ask, max_tokens=16 * len(missing))
        responses.append(await ctx.provider.complete(follow))
        for name, value in parse_trait_scores(responses[1].text, rubric).items():
            if name not in found:
                found[name], mode[name] = value, "parsed_followup"
    results = {t.name: summarise(None, found.get(t.name), mode.get(t.name, "failed"), "parsed") for t in rubric.traits}
    text = responses[0].text
    marker = text.lower().rfind("scores:")
    said = (text[:marker] if marker >= 0 else text).strip()
    return _text_record(ctx, call, request, responses, said, trait_scores=results, error=_traits_error(results))


def score_schema(traits: list[Trait], all_traits: bool) -> dict[str, Any]:
    """The JSON schema of the score step: one integer property per trait (``score`` for a per-trait Judge),
    each restricted to the trait's valid scores."""
    names = [t.name for t in traits] if all_traits else ["score"]
    properties = {n: {"type": "integer", "enum": list(t.scores)} for n, t in zip(names, traits, strict=True)}
    return {"type": "object", "properties": properties, "required": names, "additionalProperties": False}


def read_schema_answer(text: str, traits: list[Trait], all_traits: bool) -> dict[str, int | str]:
    """Per trait name, the valid score of a score step's JSON answer, or what is wrong with it (a string); a
    score outside the trait's range is never taken."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        return {t.name: f"score step gave no JSON object (got {text[:60]!r})" for t in traits}
    found: dict[str, int | str] = {}
    for trait in traits:
        value: Any = data.get(trait.name if all_traits else "score")
        valid = isinstance(value, int) and not isinstance(value, bool) and value in trait.scores
        found[trait.name] = value if valid else f"score step gave no valid score (got {value!r})"
    return found


async def _schema_scores(
    ctx: CallContext,
    call: AgentCall,
    traits: list[Trait],
    first: ChatRequest,
    rationale_resp: ChatResponse,
    all_traits: bool = False,
) -> AgentRecord:
    """The score step of the JSON-schema reading (see the module docstring) and the record of both requests."""
    rationale = _MARKUP_TAIL.sub("", rationale_resp.text).rstrip()
    lo, hi = min(min(t.scores) for t in traits), max(max(t.scores) for t in traits)
    names = [t.name for t in traits] if all_traits else ["score"]
    ask = SCHEMA_ASK.format(fields=", ".join(f'"{n}"' for n in names), lo=lo, hi=hi)
    step = _followup(ctx, call, rationale, ask, max_tokens=SCORE_STEP_TOKENS * len(traits))
    # the score step keeps the run's logprobs: the distribution is read at each score's token of the JSON answer
    step = step.model_copy(update={"json_schema": score_schema(traits, all_traits)})
    score_resp = await ctx.provider.complete(step)
    cut = f", cut off at {step.max_tokens} tokens" if was_cut(score_resp) else ""
    results: dict[str, ScoreResult] = {}
    by_name = {t.name: t for t in traits}
    for name, got in read_schema_answer(score_resp.text, traits, all_traits).items():
        parsed, problem = (got, None) if isinstance(got, int) else (None, got + cut)
        at = json_value_offset(score_resp.text, name if all_traits else "score")
        dist = distribution_at(at, score_resp.tokens, by_name[name]) if score_resp.tokens else None
        results[name] = summarise(dist, parsed, "constrained_schema", ctx.settings.report, problem)
    fields: dict[str, Any] = {"trait_scores": results} if all_traits else {"score": results[traits[0].name]}
    only = results[traits[0].name].invalid_raw
    error = _traits_error(results) if all_traits else (f"unusable score: {only}" if only else None)
    return new_record(
        ctx,
        call,
        settings={**request_settings(first, rationale_resp), "score_step": request_settings(step, score_resp)},
        text=f"{rationale}\n\n[score]\n{score_resp.text}",
        rationale=rationale,
        tokens=rationale_resp.tokens,
        **_rationale_then_score(rationale_resp, score_resp),
        error=error,
        **fields,
    )


def _followup(ctx: CallContext, call: AgentCall, answer: str, ask: str, max_tokens: int) -> ChatRequest:
    """The follow-up request after an answer whose score(s) could not be read: the answer, then ``ask``."""
    messages = [*call.messages, Message(role="assistant", content=answer), Message(role="user", content=ask)]
    return build_request(ctx, call, messages=messages, max_tokens=max_tokens, temperature=0.0)


def _traits_error(results: dict[str, ScoreResult]) -> str | None:
    failed = [name for name, r in results.items() if r.reported is None]
    return f"unusable score for {', '.join(failed)}" if failed else None


def _rationale_then_score(rationale_resp: ChatResponse, score_resp: ChatResponse) -> dict[str, Any]:
    """A two-request Judge record's usage, latency, retries and cache state, summed over its rationale and its
    score step; truncated when the rationale was cut (a cut score step is the score's own problem)."""
    cached = rationale_resp.cached and score_resp.cached
    return {**_summed([rationale_resp, score_resp]), "cached": cached, "truncated": was_cut(rationale_resp)}


def _summed(responses: list[ChatResponse]) -> dict[str, Any]:
    """A Judge record's usage, latency, answers and retries over the requests it made."""
    return {
        "usage": sum((r.usage for r in responses), Usage.zero()),
        "latency_s": sum(r.latency_s for r in responses),
        "answers": len(responses),
        "retries": [reason for r in responses for reason in r.retries],
    }


def was_cut(response: ChatResponse) -> bool:
    """Whether a response was cut by the token limit (``finish_reason == "length"``)."""
    return response.finish_reason == "length"


def _text_record(
    ctx: CallContext,
    call: AgentCall,
    request: ChatRequest,
    responses: list[ChatResponse],
    rationale: str,
    **fields: Any,
) -> AgentRecord:
    """The record of a Judge call read from its text: the answer (and any follow-up), the first answer's
    ``rationale`` and tokens, usage and latency summed over the requests, and whether any answer was cut by the
    token limit."""
    return new_record(
        ctx,
        call,
        settings=request_settings(request, responses[0]),
        text="\n\n[follow-up]\n".join(r.text for r in responses),
        rationale=rationale,
        tokens=responses[0].tokens,
        **_summed(responses),
        cached=all(r.cached for r in responses),
        truncated=any(was_cut(r) for r in responses),
        **fields,
    )
