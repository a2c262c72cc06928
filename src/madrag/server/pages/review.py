"""The review pages: a run's queue of trait scores, most likely wrong first, with the unreviewed counter, and
the one-click approvals (every agreeing score, one essay's scores)."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from madrag.server import gradebook, review_queue
from madrag.server.http.security import check_csrf
from madrag.server.pages.rendering import redirect, render, state_of

router = APIRouter(include_in_schema=False)


def reviewer_of(request: Request, given: str = "") -> str:
    """Who reviews: the name typed, else the one remembered, else ``teacher``."""
    return (given.strip() or request.cookies.get("madrag_reviewer", "") or "teacher")[:200]


@router.get("/runs/{run_id}/review")
def review_page(run_id: str, request: Request, approved: int | None = None) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    found = review_queue.queue(s, run_id)
    names = gradebook.names(s, run_id)
    return render(request, "review.html", run=run, queue=found, approved=approved, names=names)


@router.post("/runs/{run_id}/approve")
async def approve(run_id: str, request: Request) -> Response:
    await check_csrf(request)
    form = await request.form()
    essay_id = str(form.get("essay_id") or "") or None
    reviewer = reviewer_of(request, str(form.get("reviewer") or ""))
    count = review_queue.approve(state_of(request), run_id, reviewer, essay_id)
    if essay_id is not None and str(form.get("back") or "") == "essay":
        return redirect(f"/runs/{run_id}/essays/{quote(essay_id, safe='')}?approved={count}")
    return redirect(f"/runs/{run_id}/review?approved={count}")
