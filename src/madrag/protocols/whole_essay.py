"""Single-agent protocols: one Judge call scores every trait at once (seed 000 Appendix D).

* ``SA``: the rubric (all traits) and the essay; no decomposition, no debate, no exemplars.
* ``SARAG``: SA plus retrieved exemplars. With all traits in one call, one exemplar per score level *per
  trait* would be traits x levels essays; SARAG therefore uses the first retrieval procedure of seed 000
  3.3.2: the k most similar pool essays (k = the number of score levels of the rubric's first trait), each
  shown with all its human trait scores.

Score reading mirrors the per-trait Judge: with prefill + choices (embedded model) the rationale is generated
up to ``Scores:``, then each trait's score token is restricted to that trait's valid scores, one trait after
the other, each with its distribution; otherwise each ``<Trait>: N`` line is parsed from the text, with one
follow-up request for the traits still missing. A trait never read is recorded as failed.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from madrag.agents.calls import (
    AgentCall,
    CallContext,
    build_request,
    finish_record,
    new_record,
    once,
    request_settings,
    text_record,
)
from madrag.agents.context import mask_placeholders, role_messages
from madrag.agents.judge import normalise, summarise
from madrag.data.essay import Essay
from madrag.errors import ConfigError
from madrag.protocols.base import TraitScore
from madrag.providers.base import ChatResponse, Message
from madrag.records import AgentRecord, ScoreResult
from madrag.rubric import Rubric, Trait


def expand_trait_scores(record: AgentRecord, rubric: Rubric, protocol: str | None = None) -> list[TraitScore]:
    """One TraitScore per rubric trait from a call that scored every trait (a trait it did not score: None),
    under ``protocol`` (default: the record's own protocol)."""
    results = record.trait_scores or {}
    return [
        TraitScore(
            essay_id=record.essay_id,
            trait=t.name,
            protocol=record.protocol if protocol is None else protocol,
            score=results[t.name].reported if t.name in results else None,
            result=results.get(t.name),
            rationale=record.rationale or "",
            record_key=record.key,
        )
        for t in rubric.traits
    ]


def _trait_line(trait: Trait) -> re.Pattern[str]:
    return re.compile(rf"^\W*{re.escape(trait.name)}\W*\s*[:=-]\s*\**\s*(-?\d+)", re.IGNORECASE | re.MULTILINE)


def parse_trait_scores(text: str, rubric: Rubric) -> dict[str, int]:
    """The last ``<Trait>: N`` line of each trait, when N is in the trait's range."""
    found: dict[str, int] = {}
    for trait in rubric.traits:
        matches = _trait_line(trait).findall(text)
        if matches and trait.contains(int(matches[-1])):
            found[trait.name] = int(matches[-1])
    return found


@dataclass(frozen=True)
class SingleJudgeProtocol:
    name: str
    exemplars: bool

    @property
    def uses_bank(self) -> bool:
        return self.exemplars

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "debate": None, "exemplars": self.exemplars, "per_trait": False}

    async def score_essay(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> list[TraitScore]:
        call = await self._call(ctx, essay, rubric)
        record = await judge_all_traits(ctx, call, rubric)
        return expand_trait_scores(record, rubric)

    async def _call(self, ctx: CallContext, essay: Essay, rubric: Rubric) -> AgentCall:
        settings = ctx.settings
        exemplar_text, context = "", {}
        if self.exemplars:
            if ctx.bank is None:
                raise ConfigError(f"protocol {self.name} needs an exemplar bank")
            k = len(rubric.traits[0].scores)
            found = await asyncio.to_thread(ctx.bank.similar, essay, k)
            items = [
                ctx.prompts.render(
                    "sa_exemplar_item",
                    SCORES=", ".join(f"{t}={s}" for t, s in ex.scores.items()),
                    TEXT=_shorten(ex.text, settings.exemplar_max_words),
                )
                for ex in found
            ]
            exemplar_text = ctx.prompts.render("sa_exemplar_block", EXEMPLAR_LIST="\n".join(items)) + "\n"
            context["exemplars"] = [ex.model_dump(mode="json") for ex in found]
        values = {
            **all_traits_values(ctx, essay, rubric),
            "EXEMPLAR_HINT": " and the scored example essays" if self.exemplars else "",
            "EXEMPLARS": exemplar_text,
        }
        return AgentCall(
            protocol=self.name,
            essay_id=essay.id,
            trait="*",
            role="judge",
            messages=role_messages(ctx.prompts, settings.prompt_layout, "sa_system", "sa_user", values),
            temperature=settings.judge_temperature,
            max_tokens=settings.judge_max_tokens,
            context=context,
        )


def all_traits_values(ctx: CallContext, essay: Essay, rubric: Rubric) -> dict[str, str]:
    """Template values of a call that scores every trait: the essay (masked under ``anonymization=mask``) and
    its prompt, the anonymization note, the rubric's traits as JSON and the ``Scores:`` lines to fill in."""
    anonymization = ctx.settings.anonymization
    values = {
        "PROMPT": essay.prompt or "(no prompt given)",
        "TRAITS_JSON": json.dumps([json.loads(t.as_prompt_json()) for t in rubric.traits], indent=2),
        "ESSAY": mask_placeholders(essay.text) if anonymization == "mask" else essay.text,
        "ANON_CONTEXT": ctx.prompts.render("anon_note") if anonymization == "note" else "",
        "SCORE_LINES": "\n".join(f"{t.name}: N (an integer from {t.min} to {t.max})" for t in rubric.traits),
    }
    values["ESSAY_CONTEXT"] = ctx.prompts.render("essay_context", **values)
    return values


async def judge_all_traits(ctx: CallContext, call: AgentCall, rubric: Rubric) -> AgentRecord:
    """The record of ``call`` (one call scoring every trait): from the store, from the same call in flight, or
    made now by :func:`score_all_traits`."""
    return await once(ctx, call, lambda: score_all_traits(ctx, call, rubric))


async def score_all_traits(ctx: CallContext, call: AgentCall, rubric: Rubric) -> AgentRecord:
    """Make ``call`` and store its record: constrained score reading where the backend allows it
    (:func:`constrained_all_traits`), else text parsing with one follow-up (:func:`text_all_traits`)."""
    started = time.monotonic()
    if ctx.constrained_scoring():
        record = await constrained_all_traits(ctx, call, rubric)
    else:
        record = await text_all_traits(ctx, call, rubric)
    record.wall_s = time.monotonic() - started
    ctx.stats.failed_scores += sum(1 for r in (record.trait_scores or {}).values() if r.reported is None)
    return await finish_record(ctx, record)


def _shorten(text: str, max_words: int | None) -> str:
    words = text.split()
    return text if max_words is None or len(words) <= max_words else " ".join(words[:max_words]) + " [...]"


async def constrained_all_traits(ctx: CallContext, call: AgentCall, rubric: Rubric) -> AgentRecord:
    """The rationale up to ``Scores:``, then each trait's score token restricted to its valid scores."""
    first = build_request(ctx, call, stop=["Scores:", "scores:", "SCORES:"])
    rationale_resp = await ctx.provider.complete(first)
    rationale = rationale_resp.text.rstrip()
    prefix = f"{rationale}\nScores:\n" if rationale else "Scores:\n"
    usage, latency = rationale_resp.usage, rationale_resp.latency_s
    steps: list[dict[str, Any]] = []
    results: dict[str, ScoreResult] = {}
    for trait in rubric.traits:
        prefix += f"{trait.name}: "
        choices = [str(s) for s in trait.scores]
        step = build_request(ctx, call, temperature=0.0, max_tokens=1, prefill=prefix, choices=choices)
        resp = await ctx.provider.complete(step)
        lps = resp.choice_logprobs or {}
        dist = normalise({int(c): lp for c, lp in lps.items() if c in choices}) if lps else None
        parsed = int(resp.text) if resp.text.strip() in choices else None
        results[trait.name] = summarise(dist, parsed, "constrained_distribution", ctx.settings.report)
        prefix += f"{resp.text}\n"
        usage, latency, steps = usage + resp.usage, latency + resp.latency_s, [*steps, request_settings(step)]
    return new_record(
        ctx,
        call,
        settings={**request_settings(first), "score_steps": steps},
        text=prefix.rstrip(),
        rationale=rationale,
        tokens=rationale_resp.tokens,
        trait_scores=results,
        usage=usage,
        latency_s=latency,
        requests=1 + len(rubric.traits),
        error=_error(results),
    )


async def text_all_traits(ctx: CallContext, call: AgentCall, rubric: Rubric) -> AgentRecord:
    """Each ``<Trait>: N`` line parsed from the answer; one follow-up request for the traits still missing."""
    request = build_request(ctx, call)
    responses: list[ChatResponse] = [await ctx.provider.complete(request)]
    found = parse_trait_scores(responses[0].text, rubric)
    mode = {t: "parsed_text" for t in found}
    missing = [t for t in rubric.traits if t.name not in found]
    if missing:
        ask = "Give the missing scores now, one line per trait:\n" + "\n".join(
            f"{t.name}: N (an integer from {t.min} to {t.max})" for t in missing
        )
        follow = build_request(
            ctx,
            call,
            messages=[
                *call.messages,
                Message(role="assistant", content=responses[0].text),
                Message(role="user", content=ask),
            ],
            max_tokens=16 * len(missing),
            temperature=0.0,
        )
        responses.append(await ctx.provider.complete(follow))
        for name, value in parse_trait_scores(responses[1].text, rubric).items():
            if name not in found:
                found[name], mode[name] = value, "parsed_followup"
    results: dict[str, ScoreResult] = {
        t.name: summarise(None, found.get(t.name), mode.get(t.name, "failed"), "parsed")  # type: ignore[arg-type]
        for t in rubric.traits
    }
    return text_record(ctx, call, request, responses, "scores:", trait_scores=results, error=_error(results))


def _error(results: dict[str, ScoreResult]) -> str | None:
    failed = [name for name, r in results.items() if r.reported is None]
    return f"unusable score for {', '.join(failed)}" if failed else None


BUILTIN_SINGLE = {
    "SA": SingleJudgeProtocol("SA", exemplars=False),
    "SARAG": SingleJudgeProtocol("SARAG", exemplars=True),
}
