"""Testing an OpenAI-compatible backend before a run: one short chat request with logprobs asked for.

Several common servers answer without the logprobs they were asked for; a run that needs them would stop at
its first call. :func:`probe` finds out first: whether the server answered, the model name it reported, and
whether logprobs came back. A server that gives none is scored with self-reported confidence (the debaters
state their confidence), the setting ``--no-logprobs`` gives ``madrag score``.

The probe goes through the library's :class:`~madrag.providers.openai_compat.OpenAICompatProvider`: the same
client, URL handling, key and error messages as a run. When the request with logprobs fails but the same
request without them is answered, the server is one that refuses or drops logprobs.

Each request of the probe holds a slot of ``slot``, the model server's limiter in the web server
(:class:`~madrag.server.runs.backends.Limiter`), so that a test counts against ``--backend-concurrency`` like
every call of a run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, SecretStr

from madrag.errors import MadragError, ProviderError, TransientProviderError
from madrag.providers import ChatRequest, ChatResponse, Message
from madrag.server.runs.repo import RunBackend

if TYPE_CHECKING:
    from madrag.providers.openai_compat import OpenAICompatProvider

PROBE_PROMPT = "Reply with the single word OK."
PROBE_MAX_TOKENS = 8
PROBE_TIMEOUT_S = 30.0

Slot = Callable[[], AbstractAsyncContextManager[None]]
"""A slot of the model server's limit, held while one request is in flight."""


def _no_limit() -> AbstractAsyncContextManager[None]:
    return contextlib.nullcontext()


class ProbeResult(BaseModel):
    """What one test request found. ``model`` is the name the server reported (None when it reported none);
    ``logprobs`` is None when the server did not answer."""

    answered: bool
    model: str | None = None
    logprobs: bool | None = None
    error: str | None = None
    latency_s: float | None = None
    base_url: str | None = None
    message: str


def _request(logprobs: bool) -> ChatRequest:
    return ChatRequest(
        messages=[Message(role="user", content=PROBE_PROMPT)],
        max_tokens=PROBE_MAX_TOKENS,
        logprobs=logprobs,
        top_logprobs=1 if logprobs else 0,
    )


def _has_logprobs(response: ChatResponse) -> bool:
    """Whether the answer carried ``logprobs.content`` (read from the JSON exactly as the server sent it)."""
    choices = response.raw.get("choices") if isinstance(response.raw, dict) else None
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    found = first.get("logprobs")
    return isinstance(found, dict) and isinstance(found.get("content"), list)


def _reported_model(response: ChatResponse) -> str | None:
    model = response.raw.get("model") if isinstance(response.raw, dict) else None
    return model if isinstance(model, str) and model else None


def describe(found: ProbeResult) -> str:
    """The result in plain words."""
    if not found.answered:
        return f"The server did not answer: {found.error}"
    name = f"model {found.model!r}" if found.model else "no model name"
    if found.logprobs:
        return f"The server answered ({name}) and returns logprobs: confidence comes from its token probabilities."
    return (
        f"The server answered ({name}) but returns no logprobs: this run uses self-reported confidence "
        "(the debaters state their confidence), as madrag score --no-logprobs does."
    )


def _provider(
    model: str, base_url: str | None, key_env: str | None, api_key: SecretStr | None, timeout_s: float
) -> OpenAICompatProvider:
    """The library's client of the server, one request at a time (key: ``api_key`` when given, in its client
    only, else the variable ``key_env``)."""
    from madrag.providers.openai_compat import OpenAICompatProvider  # the openai client, only when used

    key = api_key if api_key is not None and api_key.get_secret_value() else None
    return OpenAICompatProvider(
        model, base_url, api_key_env=key_env or "", timeout_s=timeout_s, max_concurrency=1, api_key=key
    )


async def _ask(provider: OpenAICompatProvider, slot: Slot) -> tuple[ChatResponse, bool]:
    """(the answer, whether it carried logprobs): with logprobs asked for, then, if that request fails for a
    reason other than a timeout or a dropped connection, once more without them; each request in a ``slot``."""
    try:
        async with slot():
            response = await provider.complete(_request(logprobs=True))
        return response, _has_logprobs(response)
    except TransientProviderError:
        raise
    except MadragError:
        async with slot():
            return await provider.complete(_request(logprobs=False)), False


async def probe(
    model: str,
    base_url: str | None,
    key_env: str | None,
    api_key: SecretStr | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
    slot: Slot = _no_limit,
) -> ProbeResult:
    """Send the test request to the server at ``base_url`` serving ``model`` (key: ``api_key`` when given,
    else the variable ``key_env``, if any; each request in a ``slot`` of the server's limit); never raises for
    what the server does."""
    provider = _provider(model, base_url, key_env, api_key, timeout_s)
    start = time.monotonic()
    fields: dict[str, Any] = {"base_url": base_url}
    try:
        response, logprobs = await _ask(provider, slot)
        fields.update(answered=True, model=_reported_model(response), logprobs=logprobs)
    except MadragError as exc:
        fields.update(answered=False, error=str(exc))
    finally:
        await provider.aclose()
    fields["latency_s"] = round(time.monotonic() - start, 3) if fields["answered"] else None
    found = ProbeResult(message="", **fields)
    return found.model_copy(update={"message": describe(found)})


async def only_model(
    base_url: str | None, key_env: str | None, api_key: SecretStr | None = None, timeout_s: float = 10.0
) -> str | None:
    """The one model the server at ``base_url`` serves, by its ``GET /models``; None when it lists none or
    several (then the teacher names one) or cannot be asked."""
    provider = _provider("unnamed", base_url, key_env, api_key, timeout_s)
    try:
        served = await provider.served_models()
    finally:
        await provider.aclose()
    return served[0] if len(served) == 1 else None


def needs_probe(backend: RunBackend) -> bool:
    """Whether a run's backend is an OpenAI-compatible server whose logprobs were never tested (a run recorded
    before the setting existed ran with them: :func:`madrag.pipeline.migrations.upgrade_run_description`)."""
    return backend.traits is not None and backend.traits.connection_test and backend.logprobs is None


async def settle(
    backend: RunBackend, key_env: str | None, api_key: SecretStr | None = None, slot: Slot = _no_limit
) -> RunBackend:
    """The run's backend with ``logprobs`` found out by :func:`probe` (its requests in a ``slot`` of the server's
    limit; its result in plain words under ``tested``); a :class:`ProviderError` when the server does not
    answer."""
    found = await probe(backend.model or "", backend.base_url, key_env, api_key, slot=slot)
    if not found.answered:
        raise ProviderError(f"the backend did not answer a test request before the run: {found.error}")
    return backend.model_copy(update={"logprobs": found.logprobs, "tested": found.message})
