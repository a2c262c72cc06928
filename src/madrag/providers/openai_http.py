"""The HTTP clients an :class:`~madrag.providers.openai_compat.OpenAICompatProvider` sends its requests with.

Three clients behind one small interface (:class:`HttpClient`): POST or GET a path under the base URL, get the
answer's bytes; a failure is a :class:`ClientFailure` (timeout, unreachable) or a :class:`StatusFailure` (an
HTTP error answer, with the message its body gives). The provider turns those into madrag's errors, so all
clients fail with the same one-line messages.

* :class:`HttpxClient` (``client="httpx"``): ``httpx2`` (httpx's API with a connection pool that stays cheap under
  many concurrent requests: 6.0 vs 8.2 ms of client CPU per call for the openai package's client in one run of
  ``bench/orchestration.py``), else ``httpx`` (and any ``httpx.AsyncClient`` given to it), with the body
  serialised by ``orjson``. It sends what the
  ``openai`` package sends for madrag's calls: ``Authorization: Bearer <key>``, and ``OpenAI-Organization`` /
  ``OpenAI-Project`` from ``$OPENAI_ORG_ID`` / ``$OPENAI_PROJECT_ID`` when set; the base URL defaults to
  ``$OPENAI_BASE_URL``, else OpenAI's.
* :class:`~madrag.providers.openai_aiohttp.AiohttpClient` (``client="aiohttp"``, the default): the same requests,
  answers and failures over aiohttp's transport, which costs about half the client CPU per call of httpx2's.
* :class:`OpenAIPackageClient`: the ``openai`` package's generic ``post`` / ``get`` (its own retries off). It
  costs 1.5-2 ms more CPU per call (``bench/orchestration.py``) and brings nothing madrag uses (its other
  authentication variants, Azure among them, are not reachable from madrag's options), so it is not a
  dependency; it stays as the reference the lean client is tested against (install ``openai`` to use it).
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal, Protocol, cast

import httpx
import orjson

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


def _headers(api_key: str) -> dict[str, str]:
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


class HttpxClient:
    """The lean client: one ``httpx.AsyncClient``, JSON by ``orjson``, no response objects of its own."""

    def __init__(
        self,
        base_url: str | None,
        api_key: str,
        timeout_s: float,
        max_connections: int,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.api_key = api_key
        self._base = _base_url(base_url)
        self._headers = _headers(api_key)
        # httpx2 (httpx's API, a faster connection pool under many concurrent requests) when installed
        lib: Any = httpx
        if http_client is None:
            try:
                import httpx2

                lib = httpx2
            except ImportError:
                pass
        self._timeouts = (httpx.TimeoutException, lib.TimeoutException)
        self._transport_errors = (httpx.TransportError, lib.TransportError)
        limits = lib.Limits(max_connections=max_connections + 4, max_keepalive_connections=max_connections)
        self._client: Any = http_client or lib.AsyncClient(timeout=lib.Timeout(timeout_s), limits=limits)

    async def post(self, path: str, body: dict[str, Any]) -> bytes:
        """POST ``body`` (serialised by orjson) to ``path``; the answer's bytes."""
        return await self._send("POST", path, orjson.dumps(body))

    async def get(self, path: str) -> bytes:
        """GET ``path``; the answer's bytes."""
        return await self._send("GET", path, None)

    async def _send(self, method: str, path: str, content: bytes | None) -> bytes:
        try:
            answer = await self._client.request(method, self._base + path, content=content, headers=self._headers)
        except self._timeouts as exc:
            raise ClientFailure("timeout", str(exc)) from None
        except self._transport_errors as exc:
            raise ClientFailure("connection", f"{type(exc).__name__}: {exc}") from None
        if answer.status_code >= 400:
            detail = error_message(_answer_body(answer.text), answer.reason_phrase, answer.status_code)
            raise StatusFailure(answer.status_code, detail)
        return bytes(answer.content)

    async def aclose(self) -> None:
        """Close the connections."""
        await self._client.aclose()


class OpenAIPackageClient:
    """The ``openai`` package's client (``AsyncOpenAI`` with its retries off), used through its generic calls."""

    def __init__(
        self,
        base_url: str | None,
        api_key: str,
        timeout_s: float,
        max_connections: int,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        try:
            import openai
        except ImportError:
            raise ImportError("client='openai' needs the openai package (pip install openai)") from None
        self.api_key = api_key
        self._openai = openai
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,
            # openai>=3 types this as httpx2.AsyncClient but accepts an httpx.AsyncClient too
            http_client=cast(Any, http_client),
        )

    async def post(self, path: str, body: dict[str, Any]) -> bytes:
        """The package's generic POST (the same request and headers as ``chat.completions.create``)."""
        return await self._call(self._client.post(path, body=body, cast_to=httpx.Response))

    async def get(self, path: str) -> bytes:
        """The package's generic GET."""
        return await self._call(self._client.get(path, cast_to=httpx.Response))

    async def _call(self, call: Any) -> bytes:
        openai = self._openai
        try:
            answer = await call
        except openai.APITimeoutError as exc:
            raise ClientFailure("timeout", exc.message) from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__
            detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
            raise ClientFailure("connection", detail) from None
        except openai.APIStatusError as exc:
            reason = exc.response.reason_phrase or type(exc).__name__
            raise StatusFailure(exc.status_code, error_detail(exc.body, reason, exc.status_code)) from None
        return bytes(answer.content)

    async def aclose(self) -> None:
        """Close the package's client (and the HTTP client given to it)."""
        await self._client.close()
