"""What a provider needs of its HTTP client, and how OpenAI's API is spoken over it.

One small interface (:class:`HttpClient`): POST or GET a path under the base URL, get the answer's bytes; a
failure is a :class:`ClientFailure` (timeout, unreachable) or a :class:`StatusFailure` (an HTTP error answer, with
the message its body gives). The providers turn those into madrag's errors, so every failure is the same one-line
message. madrag's one client is :class:`~madrag.providers.http_client.AiohttpClient`; a provider takes another
through an :data:`HttpClientFactory` (the tests give reference clients over httpx's mock transport).

OpenAI's side of it: the headers the ``openai`` package sends for madrag's calls (``Authorization: Bearer <key>``,
and ``OpenAI-Organization`` / ``OpenAI-Project`` from ``$OPENAI_ORG_ID`` / ``$OPENAI_PROJECT_ID`` when set), the
base URL (``$OPENAI_BASE_URL``, else OpenAI's) and an error answer's message read as the package reads it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, Literal, Protocol

DEFAULT_BASE_URL = "https://api.openai.com/v1"

_ERROR_NAMES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    409: "ConflictError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
}
"""The ``openai`` package's name of each status's error (the message of an error answer with no text)."""


class ClientFailure(Exception):
    """No HTTP answer: ``kind`` is ``timeout`` or ``connection``; ``detail`` says what the client saw."""

    def __init__(self, kind: Literal["timeout", "connection"], detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


class StatusFailure(Exception):
    """An HTTP error answer (status >= 400) and the message its body gives (unscrubbed)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


class HttpClient(Protocol):
    """What a provider needs of its HTTP client."""

    api_key: str

    async def post(self, path: str, body: dict[str, Any]) -> bytes:
        """The answer's bytes to a JSON POST; :class:`ClientFailure` / :class:`StatusFailure` otherwise."""
        ...

    async def get(self, path: str) -> bytes:
        """The answer's bytes to a GET; :class:`ClientFailure` / :class:`StatusFailure` otherwise."""
        ...

    async def aclose(self) -> None:
        """Close the connections (and a client given to it)."""
        ...


HttpClientFactory = Callable[[str | None, str, float, int], HttpClient]
"""How a provider makes its client: ``(base_url, api_key, timeout_s, max_connections)`` to an :class:`HttpClient`
(:class:`~madrag.providers.http_client.AiohttpClient` by default)."""


def error_message(body: Any, reason: str, status: int) -> str:
    """The message of an error answer whose ``body`` is its JSON (or its text when not JSON), read as with the
    ``openai`` package: its ``error`` object unwrapped (as the package does), then :func:`error_detail`."""
    return error_detail(body.get("error", body) if isinstance(body, dict) else body, reason, status)


def error_detail(body: Any, reason: str, status: int) -> str:
    """From an error answer's body (its ``error`` object unwrapped once): that object's ``message``, a string
    ``error`` or ``detail``, the text itself, else the status's reason phrase (else the package's error name)."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if isinstance(body.get("detail"), str):
            return str(body["detail"])
    if isinstance(body, str) and body.strip():
        return body
    name = _ERROR_NAMES.get(status, "InternalServerError" if status >= 500 else "APIStatusError")
    return reason or name


def _answer_body(text: str) -> Any:
    """An error answer's JSON (parsed as the ``openai`` package parses it), else its stripped text."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError:
        return stripped


def _base_url(base_url: str | None) -> str:
    """The base URL without its trailing slash: as given, else ``$OPENAI_BASE_URL``, else OpenAI's."""
    return (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def openai_headers(api_key: str) -> dict[str, str]:
    """The headers of every request: the key as a bearer token, JSON both ways, and the organisation and project
    from ``$OPENAI_ORG_ID`` / ``$OPENAI_PROJECT_ID`` when set (as the ``openai`` package sends them)."""
    headers = {
        "Authorization": f"Bearer {api_key}",
        "Accept": "application/json",
        "Content-Type": "application/json",
        "User-Agent": "madrag",
    }
    for header, env in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
        if value := os.environ.get(env):
            headers[header] = value
    return headers
