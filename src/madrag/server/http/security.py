"""What guards every request: the token rule, the host and origin checks, upload size, CSRF and headers.

- Token: required for every page, asset and API call when the server has one (always off loopback). It is
  accepted as ``Authorization: Bearer``, ``X-Madrag-Token``, the ``madrag_token`` cookie, or ``?token=`` on a
  first browser visit (which sets the cookie). Compared in constant time.
- Host: on a loopback address only loopback host names are served (a DNS-rebinding page cannot reach the API).
- Cross-site writes: a POST/PUT/PATCH/DELETE whose ``Origin`` is another site is refused (403); an API write
  must be JSON (415 for the content types an HTML form can send), so no other site can post to the API.
- Form posts of the pages carry a CSRF token: an HMAC of the browser's ``madrag_csrf`` cookie with a secret of
  this process (:func:`csrf_token`, checked by :func:`check_csrf`).
- Bodies above the upload limit are refused with 413: by their ``Content-Length`` before they are read, and a
  body sent without one (chunked) by counting its bytes as they arrive, before the app sees any of it.
- Every response says ``nosniff``, no framing, no referrer, and a content security policy without inline
  scripts.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fastapi import Request
from starlette.datastructures import FormData
from starlette.requests import cookie_parser

from madrag.server.config import ServerConfig, is_loopback
from madrag.server.http.errors import ApiError, error_body
from madrag.server.http.numbers import MAX_DIGITS, whole_number

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
DOCS_CSP = CSP.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
CSRF_COOKIE = "madrag_csrf"
TOKEN_COOKIE = "madrag_token"


class TooLarge(Exception):
    """The request body passed the upload limit."""


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _host_name(header: str) -> str:
    """The name in a Host header, without the port (``[::1]:8000`` -> ``::1``)."""
    if header.startswith("["):
        return header[1:].split("]")[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Guard:
    """ASGI middleware applying the rules of the module docstring."""

    def __init__(self, app: ASGIApp, config: ServerConfig) -> None:
        self.app = app
        self.config = config
        self.loopback = is_loopback(config.host)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        refused = self._refusal(scope, headers)
        if refused is not None:
            await _send_error(send, *refused)
            return
        set_cookie = self._token_from_query(scope)
        if scope["method"] in UNSAFE and "content-length" not in headers:
            body = await _read_capped(receive, self.config.limits.max_upload_bytes)
            if body is None:
                await _send_error(send, 413, self._too_large())
                return
            receive = _replay(body, receive)
        await self.app(scope, self._limited(receive, headers), self._decorated(send, scope, set_cookie))

    def _too_large(self) -> str:
        return f"request body over the upload limit of {self.config.limits.max_upload_bytes:,} bytes"

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if self.loopback and host and not is_loopback(_host_name(host)):
            return 400, "this server answers only on its loopback address"
        if self.config.token_required and not self._authorised(scope, headers):
            return 401, "this server needs its token: send 'Authorization: Bearer TOKEN' or open the URL it printed"
        method = scope["method"]
        if method in UNSAFE:
            origin = headers.get("origin")
            if origin and origin != "null" and urlsplit(origin).netloc != headers.get("host"):
                return 403, "cross-site request refused"
            if headers.get("sec-fetch-site") == "cross-site":
                return 403, "cross-site request refused"
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            if scope["path"].startswith("/api/") and ctype in FORM_TYPES:
                return 415, "the API takes JSON bodies (Content-Type: application/json)"
        length = headers.get("content-length", "").strip()
        size = whole_number(length)
        if len(length) > MAX_DIGITS or (size is not None and size > self.config.limits.max_upload_bytes):
            return 413, self._too_large()
        return None

    def _authorised(self, scope: Scope, headers: dict[str, str]) -> bool:
        token = self.config.token or ""
        given = []
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given.append(auth[7:].strip())
        given.append(headers.get("x-madrag-token", ""))
        given.append(cookie_parser(headers.get("cookie", "")).get(TOKEN_COOKIE, ""))  # as Request.cookies reads it
        given += parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [])
        return bool(token) and any(g and hmac.compare_digest(g.encode(), token.encode()) for g in given)

    def _token_from_query(self, scope: Scope) -> bool:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return self.config.token_required and "token" in query

    def _limited(self, receive: Receive, headers: dict[str, str]) -> Receive:
        limit = self.config.limits.max_upload_bytes
        seen = 0

        async def wrapped() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise TooLarge()
            return message

        return wrapped

    def _decorated(self, send: Send, scope: Scope, set_token_cookie: bool) -> Send:
        path = scope["path"]
        csp = DOCS_CSP if path.startswith("/docs") or path.endswith("/report") else CSP

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [
                    (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"content-security-policy", csp.encode()),
                ]
                if set_token_cookie and self.config.token:
                    cookie = f"{TOKEN_COOKIE}={self.config.token}; Path=/; HttpOnly; SameSite=Strict"
                    extra.append((b"set-cookie", cookie.encode()))
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        return wrapped


async def _read_capped(receive: Receive, limit: int) -> bytes | None:
    """The whole body of a request sent without ``Content-Length``; None as soon as it passes ``limit`` bytes
    (the rest is never read). A client that disconnects has sent what it sent."""
    chunks: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` as one message, then whatever the client sends next (a disconnect)."""
    sent = False

    async def wrapped() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return wrapped


async def _send_error(send: Send, status: int, message: str) -> None:
    body = json.dumps(error_body(status, message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(b"x-content-type-options", b"nosniff"), (b"content-security-policy", CSP.encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# -- CSRF for the pages' form posts ----------------------------------------------------------------------------

_SECRET = secrets.token_bytes(32)


def csrf_cookie(request: Request) -> tuple[str, bool]:
    """The browser's CSRF cookie value, and whether it is new (to be set on the response)."""
    value = request.cookies.get(CSRF_COOKIE, "")
    if len(value) == 32 and value.isalnum():
        return value, False
    return secrets.token_hex(16), True


def csrf_token(cookie: str) -> str:
    """The token a form must carry for this cookie."""
    return hmac.new(_SECRET, cookie.encode(), hashlib.sha256).hexdigest()


async def check_csrf(request: Request) -> FormData:
    """The form posted; refused (403) when its ``csrf_token`` does not match the browser's cookie."""
    form = await request.form()
    given = str(form.get("csrf_token") or "")
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not cookie or not given or not hmac.compare_digest(given, csrf_token(cookie)):
        raise ApiError(403, "the form's security token is missing or stale: reload the page and try again")
    return form
