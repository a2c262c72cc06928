"""A run's checks before its first call, so that a run that cannot work stops at once with one line instead of
making (and failing) every call: each backend answers at all (:meth:`Provider.check_reachable`), gives the
logprobs it says it gives (:meth:`Provider.check_logprobs`), and a backend whose Judge scores are to be read
under a JSON schema (``--score-method constrained`` on an OpenAI-compatible server,
:func:`~madrag.agents.calls.score_reading`) honours one: :func:`schema_problem` asks it for an answer the prompt
does not suggest, so a server that ignores the schema is found out, whatever the model writes.

A new run makes these checks before anything is written (:func:`madrag.pipeline.job.execute`): a refused check
leaves no run folder behind, so the command its message suggests works on the same ``--run-dir``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from madrag.agents.calls import CallContext, score_reading
from madrag.data.essay import Essay
from madrag.errors import ConfigError, ProviderError, TransientProviderError
from madrag.providers.accounting import CheckTally, counting_checks
from madrag.providers.base import ChatRequest, Message, Provider
from madrag.providers.policy import ManagedProvider
from madrag.providers.server_props import PromptFloor, SaysItsProps, ServerProps, context_problem, fit_concurrency
from madrag.rubric import Rubric, Trait
from madrag.settings import ScoringSettings
from madrag.store import RunStore

PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"madrag_probe": {"type": "integer", "enum": [7]}},
    "required": ["madrag_probe"],
    "additionalProperties": False,
}
"""The schema of the capability probe: its one valid answer is ``{"madrag_probe": 7}``."""
PROBE_REQUEST = ChatRequest(
    messages=[Message(role="user", content="Reply with the single word OK.")],
    max_tokens=24,
    temperature=0.0,
    json_schema=PROBE_SCHEMA,
)
"""A request whose words ask for something else than the schema's one answer."""


async def schema_problem(provider: Provider, timeout_s: float) -> str | None:
    """None when ``provider`` answers the probe with the schema's one valid object; else what it did."""
    try:
        answer = await asyncio.wait_for(provider.complete(PROBE_REQUEST), timeout_s)
    except (ProviderError, TimeoutError) as exc:
        return f"it refused a JSON-schema request ({exc or 'timed out'})"
    try:
        parsed = json.loads(answer.text)
    except json.JSONDecodeError:
        parsed = None
    if parsed != {"madrag_probe": 7}:
        return f'it ignored a JSON schema (asked for {{"madrag_probe": 7}}, answered {answer.text[:60]!r})'
    return None


async def preflight(ctx: CallContext) -> dict[str, Any]:
    """:func:`check_backends` of a run's call context."""
    return await check_backends(ctx.provider, ctx.role_providers, ctx.settings)


async def check_backends(
    provider: ManagedProvider,
    role_providers: dict[str, ManagedProvider],
    settings: ScoringSettings,
    floor: PromptFloor | None = None,
) -> dict[str, Any]:
    """Check every backend (the main one and each role's) before the run's first call; what was found, by role
    (``*``: the main backend), for the run store. :class:`ProviderError` for a backend that cannot be reached or
    that drops the logprobs it was asked for, :class:`ConfigError` for a JSON-schema reading the server does not
    honour or for a ``floor`` (the run's smallest prompt for its largest essay) its server's context cannot hold.
    A server that says its slots (llama.cpp's ``/props``) gets no more requests at once than it has slots,
    unless a concurrency was given."""
    found: dict[str, Any] = {}
    for role, managed in [("*", provider), *role_providers.items()]:
        with counting_checks() as sent:  # the HTTP requests of the checks, by check (no record holds them)
            found[role] = await _check_one(managed, settings, floor, sent)
        found[role]["requests"] = dict(sent.by_check)
    return found


async def _check_one(
    managed: ManagedProvider, settings: ScoringSettings, floor: PromptFloor | None, sent: CheckTally
) -> dict[str, Any]:
    """:func:`check_backends` of one backend: what was found; each check's requests counted in ``sent``."""
    with sent.during("reachable"):
        await managed.provider.check_reachable()
    reading = score_reading(managed, settings)
    found: dict[str, Any] = {"reachable": True, "score_reading": reading}
    with sent.during("server_props"):
        props = await _server_props(managed)
    if props is not None:
        found["server"] = props.as_dict()
        with sent.during("context"):
            problem = await context_problem(managed.provider, props, floor)
        if problem is not None:
            raise ConfigError(f"{managed.provider.name} ({managed.provider.model}): {problem}")
    if managed.provider.capabilities.logprobs:
        with sent.during("logprobs"):
            found["logprobs"] = await _logprobs_checked(managed)
    if reading != "schema":
        return found
    with sent.during("json_schema"):
        problem = await schema_problem(managed.provider, managed.policy.timeout_s)
    if problem is not None:
        name = f"{managed.provider.name} ({managed.provider.model})"
        raise ConfigError(
            f"--score-method constrained: {name} cannot restrict the Judge's score: {problem}; use --score-method text"
        )
    found["json_schema_probe"] = "honoured"
    return found


def record_checks(store: RunStore, found: dict[str, Any]) -> None:
    """Keep what this session's checks found (``preflight``, replaced each session) and add their HTTP requests,
    by check, to the run's sum over its sessions (``check_requests``: ``by_check`` and ``complete``, false when
    an earlier session of the run made calls before madrag counted its checks), which ``madrag costs`` reads."""
    store.set_meta("preflight", found)
    kept = store.get_meta("check_requests")
    if not isinstance(kept, dict):
        kept = {"by_check": {}, "complete": store.count() == 0}
    by_check: dict[str, int] = dict(kept.get("by_check") or {})
    for role in found.values():
        for check, n in (role.get("requests") or {}).items() if isinstance(role, dict) else ():
            by_check[check] = by_check.get(check, 0) + int(n)
    store.set_meta("check_requests", {"by_check": by_check, "complete": bool(kept.get("complete"))})


async def _logprobs_checked(managed: ManagedProvider) -> str:
    """``checked`` when the backend gave logprobs to a short request (or has nothing to check), ``unknown`` when
    it could not answer in time (the run's first call will tell); the backend's :class:`ProviderError` when it
    answered without them."""
    try:
        async with asyncio.timeout(managed.policy.timeout_s):  # not wait_for: it can swallow a cancellation
            await managed.provider.check_logprobs()
    except (TransientProviderError, TimeoutError):
        return "unknown"
    return "checked"


async def _server_props(managed: ManagedProvider) -> ServerProps | None:
    """What the backend's server says of its slots and context (None: nothing, or no answer in time); the
    backend's concurrency fitted to its slots (:func:`~madrag.providers.server_props.fit_concurrency`)."""
    if not isinstance(managed.provider, SaysItsProps):
        return None
    try:
        async with asyncio.timeout(managed.policy.timeout_s):
            props = await managed.provider.server_props()
    except TimeoutError:
        return None
    where = f"{managed.provider.name} ({managed.provider.model})"
    if (fit := fit_concurrency(managed.concurrency, managed.max_concurrency, props, where)) is not None:
        managed.limit_concurrency(fit)
    return props


def _shortest_exemplars(trait: Trait, pool: list[Essay], settings: ScoringSettings) -> list[str]:
    """Per score level the pool has, its shortest essay (cut to ``exemplar_max_words`` when set): the least a
    retrieving Judge is shown for ``trait`` (one exemplar per level)."""
    shortest: dict[int, str] = {}
    for essay in pool:
        level = essay.reference(trait)
        if level is not None and (level not in shortest or len(essay.text) < len(shortest[level])):
            shortest[level] = essay.text
    words = settings.exemplar_max_words
    return [" ".join(text.split()[:words]) if words else text for _, text in sorted(shortest.items())]


def prompt_floor(
    essays: list[Essay], pool: list[Essay], rubric: Rubric, settings: ScoringSettings, bank: bool
) -> PromptFloor | None:
    """The largest of the run's smallest Judge prompts, with the Judge's answer budget: what a Judge prompt for
    the run's longest essay surely holds (the essay, the trait's rubric text and, when a protocol retrieves
    (``bank``), one exemplar per score level, the pool's shortest), for the trait where that is most. None
    without essays. Templates and debate are left out: it is a floor, so a run is refused only when it surely
    cannot fit."""
    if not essays:
        return None
    longest = max(essays, key=lambda e: len(e.text))
    best: tuple[str, str] | None = None
    for trait in rubric.traits:
        exemplars = _shortest_exemplars(trait, pool, settings) if bank else []
        text = "\n".join([longest.text, trait.description, *trait.levels.values(), *exemplars])
        if best is None or len(text) > len(best[0]):
            best = (text, f"essay {longest.id}'s Judge prompt for {trait.name}")
    assert best is not None  # a rubric has traits
    return PromptFloor(best[0], best[1], settings.judge_max_tokens)
