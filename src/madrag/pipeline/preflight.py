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
from collections.abc import Awaitable, Callable
from typing import Any

from madrag.agents.calls import CallContext, score_reading
from madrag.errors import ConfigError, ProviderError, TransientProviderError, hint, option_hint
from madrag.pipeline.context_fit import context_problem
from madrag.pipeline.worst_case import WorstPrompt
from madrag.providers.accounting import CheckTally, counting_checks
from madrag.providers.base import ChatRequest, Message, Provider
from madrag.providers.policy import ManagedProvider
from madrag.providers.server_props import fit_to_server
from madrag.settings import ScoringSettings
from madrag.store import RunStore

Rehearsal = Callable[[], Awaitable[list[WorstPrompt]]]
"""The run's rehearsal (:func:`madrag.pipeline.worst_case.worst_prompts` of its protocols and longest essay),
made only when a server says its context."""

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


async def preflight(ctx: CallContext, rehearsal: Rehearsal | None = None, started: bool = True) -> dict[str, Any]:
    """:func:`check_backends` of a run's call context (``started``: the run holds records, so a hint that changes
    its settings names a new run folder)."""
    return await check_backends(ctx.provider, ctx.role_providers, ctx.settings, rehearsal, started=started)


class _Worst:
    """The run's rehearsal, made once, when the first server that says its context asks for it."""

    def __init__(self, rehearsal: Rehearsal | None) -> None:
        self._rehearsal = rehearsal
        self._found: list[WorstPrompt] | None = None

    async def of(self, backend: str) -> list[WorstPrompt]:
        if self._rehearsal is None:
            return []
        if self._found is None:
            self._found = await self._rehearsal()
        return [p for p in self._found if p.backend == backend]


async def check_backends(
    provider: ManagedProvider,
    role_providers: dict[str, ManagedProvider],
    settings: ScoringSettings,
    rehearsal: Rehearsal | None = None,
    started: bool = False,
) -> dict[str, Any]:
    """Check every backend (the main one and each role's) before the run's first call; what was found, by role
    (``*``: the main backend), for the run store. :class:`ProviderError` for a backend that cannot be reached or
    that drops the logprobs it was asked for, :class:`ConfigError` for a JSON-schema reading the server does not
    honour or for a prompt of the ``rehearsal`` (the run's largest, per protocol and role) that its server's
    context cannot hold (:mod:`madrag.pipeline.context_fit`). A server that says its slots (llama.cpp's
    ``/props``) gets no more requests at once than it has slots, unless a concurrency was given
    (:func:`~madrag.providers.server_props.fit_to_server`; the concurrency resolved, and the server's model and
    build, are in what is returned, for the run's log). ``started``: the run folder holds records, so a hint that
    changes the run's settings names a new ``--run-dir``."""
    found: dict[str, Any] = {}
    worst = _Worst(rehearsal)
    for role, managed in [("*", provider), *role_providers.items()]:
        with counting_checks() as sent:  # the HTTP requests of the checks, by check (no record holds them)
            found[role] = await _check_one(role, managed, settings, worst, sent, started)
        found[role]["requests"] = dict(sent.by_check)
    return found


async def _check_one(
    role: str, managed: ManagedProvider, settings: ScoringSettings, worst: _Worst, sent: CheckTally, started: bool
) -> dict[str, Any]:
    """:func:`check_backends` of one backend (``role``'s): what was found; each check's requests counted in
    ``sent``."""
    with sent.during("reachable"):
        await managed.provider.check_reachable()
    reading = score_reading(managed, settings)
    found: dict[str, Any] = {"reachable": True, "score_reading": reading}
    with sent.during("server_props"):
        server = await fit_to_server(managed)
    found["backend"] = f"{managed.provider.name} ({managed.provider.model})"
    found["concurrency"] = server.fit.as_dict()
    if (props := server.props) is not None:
        found["server"] = props.as_dict()
        limits = {"debater_max_tokens": settings.debater_max_tokens, "judge_max_tokens": settings.judge_max_tokens}
        where = f"{managed.provider.name} ({managed.provider.model})"
        with sent.during("context"):
            mine = await worst.of(role) if props.n_ctx is not None else []
            problem = await context_problem(managed.provider, props, mine, limits, where)
        if problem is not None:
            raise ConfigError(problem)
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
            f"--score-method constrained: {name} cannot restrict the Judge's score: {problem}; "
            + option_hint(hint("score-method-text"), started)
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
