"""A run's checks before its first call, so that a run that cannot work stops at once with one line instead of
making (and failing) every call: each backend answers at all (:meth:`Provider.check_reachable`), and a backend
whose Judge scores are to be read under a JSON schema (``--score-method constrained`` on an OpenAI-compatible
server, :meth:`CallContext.score_reading`) honours one: :func:`schema_problem` asks it for an answer the prompt
does not suggest, so a server that ignores the schema is found out, whatever the model writes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from madrag.agents.calls import CallContext
from madrag.errors import ConfigError, ProviderError
from madrag.providers.base import ChatRequest, Message, Provider

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
    """Check every backend of ``ctx`` (the main one and each role's) before the run's first call; what was
    found, by role (``*``: the main backend), for the run store. :class:`ProviderError` for a backend that
    cannot be reached, :class:`ConfigError` for a JSON-schema reading the server does not honour."""
    found: dict[str, Any] = {}
    for role, managed in [("*", ctx.provider), *ctx.role_providers.items()]:
        await managed.provider.check_reachable()
        reading = ctx.for_role(role).score_reading() if role != "*" else ctx.score_reading()
        found[role] = {"reachable": True, "score_reading": reading}
        if reading != "schema":
            continue
        problem = await schema_problem(managed.provider, managed.policy.timeout_s)
        if problem is not None:
            name = f"{managed.provider.name} ({managed.provider.model})"
            raise ConfigError(
                f"--score-method constrained: {name} cannot restrict the Judge's score: {problem}; "
                "use --score-method text"
            )
        found[role]["json_schema_probe"] = "honoured"
    return found
