"""Errors as JSON (API) or as a page (browser), with the right status code and never a traceback.

Every error body of the API is ``{"error": {"status": 404, "message": "...", "field": "..."?}}``. Domain errors
(:mod:`madrag.server.http.faults`, the library's :mod:`madrag.errors`) carry no status code: :func:`http_status` maps
each kind to one here, at the edge, and one handler renders them all. The library's kinds: bad input or rubric
400, a settings conflict or a run another process is writing 409, a backend failure or a full disk 503. A
request model a page builds from its form (pydantic's ``ValidationError``) is refused as the API's bodies are, 422.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from madrag.errors import (
    ConfigError,
    MadragError,
    ProviderError,
    StorageError,
    WriterBusy,
    clip,
)
from madrag.server.http.faults import (
    BadInput,
    InvalidRequest,
    NotAllowed,
    NotFound,
    OverLimit,
    ServerError,
    Unavailable,
    WrongState,
)

log = logging.getLogger("madrag.server")


class ApiError(ServerError):
    """An error with its status code chosen where it is raised (the pages' form and upload checks); the
    server's operations raise the kinds of :mod:`madrag.server.http.faults` instead."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message, field)
        self.status = status


STATUS: tuple[tuple[tuple[type[MadragError], ...], int], ...] = (
    ((NotFound,), 404),
    ((WrongState, ConfigError, WriterBusy), 409),
    ((InvalidRequest,), 422),
    ((BadInput,), 400),
    ((NotAllowed,), 403),
    ((OverLimit,), 413),
    ((Unavailable, ProviderError, StorageError), 503),
)
"""The status code of each kind of server error, and of the library's (bad input or rubric, and any other: 400)."""


def http_status(exc: MadragError) -> int:
    """The status code of a domain error: an :class:`ApiError`'s own, else its kind's (:data:`STATUS`)."""
    if isinstance(exc, ApiError):
        return exc.status
    return next((status for kinds, status in STATUS if isinstance(exc, kinds)), 400)


def error_body(status: int, message: str, field: str | None = None) -> dict[str, Any]:
    """The JSON body of an error; the message on one line, at most :data:`~madrag.errors.MAX_ECHO` characters
    (what an error repeats of a request is capped: a bad value may be megabytes long)."""
    inner: dict[str, Any] = {"status": status, "message": clip(message)}
    if field is not None:
        inner["field"] = field
    return {"error": inner}


def wants_html(request: Request) -> bool:
    """A browser page (not the JSON API) is asking."""
    return not request.url.path.startswith("/api") and "text/html" in request.headers.get("accept", "")


def render_error(request: Request, status: int, message: str, field: str | None = None) -> Response:
    """The error as a page for browsers, JSON for programs."""
    if wants_html(request):
        render = getattr(request.app.state, "render_error_page", None)
        if render is not None:
            page: Response = render(request, status, clip(message))
            return page
        return HTMLResponse(f"<h1>{status}</h1>", status_code=status)
    headers = {"Retry-After": "5"} if status == 503 else None
    return JSONResponse(error_body(status, message, field), status_code=status, headers=headers)


def _validation_message(exc: RequestValidationError | ValidationError) -> tuple[str, str | None]:
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    loc = [str(x) for x in first.get("loc", ()) if x not in ("body", "query", "path", "header")]
    where = ".".join(loc) or None
    msg = str(first.get("msg", "invalid request"))
    ctx = first.get("ctx")
    named = ctx.get("field") if isinstance(ctx, dict) else None  # a check of the whole body names the field
    if where is None and isinstance(named, str):
        return msg, named
    return (f"{where}: {msg}" if where else msg), where


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into JSON or a page."""

    @app.exception_handler(MadragError)
    async def _domain_error(request: Request, exc: MadragError) -> Response:
        field = exc.field if isinstance(exc, ServerError) else None
        return render_error(request, http_status(exc), str(exc), field)

    @app.exception_handler(RequestValidationError)
    @app.exception_handler(ValidationError)
    async def _invalid(request: Request, exc: RequestValidationError | ValidationError) -> Response:
        """An API body, or a request model built from a form (a page's post), that the request's values do not
        fit: a comment over its limit, a trait missing. The request is at fault (422)."""
        message, field = _validation_message(exc)
        return render_error(request, 422, message, field)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        messages = {404: "not found", 405: "method not allowed"}
        detail = exc.detail if isinstance(exc.detail, str) and exc.detail else messages.get(exc.status_code, "error")
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no such page or endpoint: {request.url.path}"
        return render_error(request, exc.status_code, str(detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.error("unexpected error on %s %s: %s", request.method, request.url.path, type(exc).__name__)
        return render_error(request, 500, f"internal error ({type(exc).__name__}); the server log has details")
