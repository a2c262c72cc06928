"""What every page shares: rendering a Jinja2 template (autoescaped: every essay, id, rubric text and model
answer is shown as text) with the CSRF token, the error page, redirects and the server's state. The pages are
installed by :mod:`madrag.server.pages`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from madrag import __version__
from madrag.evaluation.costs.durations import duration
from madrag.server.http.numbers import required_number
from madrag.server.http.security import CSRF_COOKIE, csrf_cookie, csrf_token
from madrag.server.service import state_of as state_of  # the pages reach the state through here
from madrag.teacher.plain_words import protocol_label, score_read
from madrag.teacher.scored_by import scored_by, warning


def _shown(value: Any) -> Any:
    """What a page prints for a value: never Python's ``None`` (a template that shows a missing value says so in
    words; this only keeps a forgotten one from reading "None")."""
    return "—" if value is None else value


ENV = Environment(
    loader=PackageLoader("madrag.server", "templates"), autoescape=select_autoescape(default=True), finalize=_shown
)


def _when(value: float | None) -> str:
    return "" if value is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(value))


def _score(value: Any) -> str:
    return "missing" if value is None else str(value)


ENV.filters["when"] = _when
ENV.filters["duration"] = duration
ENV.filters["score"] = _score
ENV.filters["scored_by"] = scored_by
ENV.filters["scores_not_valid"] = warning
ENV.filters["score_read"] = score_read
ENV.filters["plain_protocol"] = protocol_label


PAGE_SIZE = 200
"""Rows on one page of a long table (the review desk, the results grid, the gradebook): a class of 20,000 papers
is served a page at a time, each well under a second and a megabyte."""

T = TypeVar("T")


@dataclass(frozen=True)
class Pager:
    """Where one page of a long table is: page ``page`` of ``pages``, rows ``first``..``last`` (1-based) of
    ``total``; ``query``: the page's other query parameters (its filters), kept by every link."""

    page: int
    pages: int
    total: int
    first: int
    last: int
    query: str

    def url(self, page: int) -> str:
        """The query string of page ``page`` with the same filters."""
        return "?" + "&".join(part for part in (self.query, f"page={page}") if part)

    @property
    def prev(self) -> str | None:
        return self.url(self.page - 1) if self.page > 1 else None

    @property
    def next(self) -> str | None:
        return self.url(self.page + 1) if self.page < self.pages else None


def paginate(request: Request, rows: Sequence[T], size: int = PAGE_SIZE) -> tuple[Sequence[T], Pager]:
    """The rows of the page the query asks for (``?page=N``, 1-based; out of range: the nearest page) and where
    it is. The other query parameters, but a one-time note (``approved``), are kept in the links."""
    pages = max(1, -(-len(rows) // size))
    asked = request.query_params.get("page")
    page = 1 if asked is None else min(pages, max(1, required_number(asked, "page", "a page number (1, 2, ...)")))
    start = (page - 1) * size
    shown = rows[start : start + size]
    kept = [(k, v) for k, v in request.query_params.multi_items() if k not in ("page", "approved")]
    pager = Pager(page, pages, len(rows), start + 1 if shown else 0, start + len(shown), urlencode(kept))
    return shown, pager


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page, with the CSRF token its forms carry (and the cookie it is bound to, when new)."""
    cookie, new = csrf_cookie(request)
    html = ENV.get_template(template).render(
        request=request, csrf=csrf_token(cookie), version=__version__, path=request.url.path, **context
    )
    response = HTMLResponse(html, status_code=status)
    response.headers["Cache-Control"] = "no-store"
    if new:
        response.set_cookie(CSRF_COOKIE, cookie, httponly=True, samesite="strict", path="/")
    return response


def redirect(url: str) -> RedirectResponse:
    """After a successful form post: see the result with a GET."""
    return RedirectResponse(url, status_code=303)


def csv_download(text: str, filename: str) -> Response:
    """A CSV file the browser saves as ``filename`` (never cached: it holds a class's grades)."""
    headers = {"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"}
    return Response(text, media_type="text/csv; charset=utf-8", headers=headers)


def error_page(request: Request, status: int, message: str) -> Response:
    """The error page a browser gets."""
    return render(request, "error.html", status=status, status_code=status, message=message)
