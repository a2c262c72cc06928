"""The Canvas round trip in the teacher's pages (:mod:`madrag.server.lms_link` does the work, as for the JSON API):
connect (her Canvas address and access token, kept in the server's data directory, never shown again), pick a
course and an assignment, pull it into a new class (then the usual backend step, scoring and review desk), and
after review a preview of every change (student, Canvas's grade now, the new grade, the points and comment per
criterion, conflicts and undecided grades listed) with one "Send to Canvas" button that posts the preview's
fingerprint, so only what she saw is sent."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import SecretStr, ValidationError
from starlette.concurrency import run_in_threadpool

from madrag.lms.manifest import MANIFESTS
from madrag.server import lms_link
from madrag.server.http.faults import ServerError
from madrag.server.http.security import check_csrf
from madrag.server.pages.rendering import redirect, render, state_of
from madrag.server.service import State

router = APIRouter(include_in_schema=False)


def _pulled_runs(s: State) -> list[dict[str, Any]]:
    """The runs of classes pulled from Canvas, newest first."""
    return [
        s.runs.describe(m.id)
        for m in s.runs.all()
        if m.kind == "run" and (s.runs.run_dir(m.id) / MANIFESTS["canvas"]).is_file()
    ]


def _connect_page(request: Request, errors: dict[str, str], url: str = "", status: int = 200) -> Response:
    return render(request, "lms.html", status=status, step="connect", errors=errors, url=url)


@router.get("/lms")
def lms_page(request: Request, course: int | None = None, change: bool = False) -> Response:
    s = state_of(request)
    found = lms_link.connection(s)
    if not found.connected or change:
        return _connect_page(request, {}, found.url or "")
    context: dict[str, Any] = {"connection": found, "course_id": course, "errors": {}, "pulled": _pulled_runs(s)}
    try:
        context["courses"] = lms_link.courses(s)
        context["assignments"] = lms_link.assignments(s, course) if course is not None else []
    except ServerError as exc:
        context |= {"courses": context.get("courses", []), "assignments": [], "errors": {"canvas": exc.message}}
    return render(request, "lms.html", step="pick", **context)


@router.post("/lms/connect")
async def connect(request: Request) -> Response:
    form = await check_csrf(request)
    url = str(form.get("url") or "").strip()
    try:
        body = lms_link.ConnectIn(url=url, token=SecretStr(str(form.get("token") or "")))
        await run_in_threadpool(lms_link.connect, state_of(request), body)
    except ValidationError as exc:
        where = str(exc.errors()[0]["loc"][0])
        return _connect_page(request, {where: f"give your Canvas {where}"}, url, 400)
    except ServerError as exc:  # the token is never put back in the form
        field = exc.field if exc.field in ("url", "token") else "token"
        return _connect_page(request, {field: exc.message}, url, 403 if "allow-lms-url" in exc.message else 400)
    return redirect("/lms")


@router.post("/lms/pull")
async def pull(request: Request) -> Response:
    form = await check_csrf(request)
    course, assignment = str(form.get("course_id") or ""), str(form.get("assignment_id") or "")
    if not course.isdigit() or not assignment.isdigit():
        return redirect("/lms" + (f"?course={course}" if course.isdigit() else ""))
    body = lms_link.PullIn(course_id=int(course), assignment_id=int(assignment))
    pulled = await run_in_threadpool(lms_link.pull_class, state_of(request), body)
    return redirect(f"/drafts/{pulled.pull_id}/backend")


@router.get("/runs/{run_id}/lms")
def preview_page(run_id: str, request: Request, undecided: bool = False, sent: int | None = None) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    preview = lms_link.preview(s, run_id, undecided) if run["status"] == "finished" else None
    return render(request, "lms.html", step="preview", run=run, preview=preview, sent=sent, errors={})


@router.post("/runs/{run_id}/lms/push")
async def push(run_id: str, request: Request) -> Response:
    form = await check_csrf(request)
    s = state_of(request)
    undecided = str(form.get("include_undecided") or "") == "yes"
    body = lms_link.PushIn(fingerprint=str(form.get("fingerprint") or "x" * 8), include_undecided=undecided)
    try:
        result = await run_in_threadpool(lms_link.send, s, run_id, body)
    except ServerError as exc:
        if exc.field != "fingerprint":
            raise
        preview = await run_in_threadpool(lms_link.preview, s, run_id, undecided)
        run = s.runs.describe(run_id)
        errors = {"fingerprint": exc.message}
        return render(
            request, "lms.html", status=409, step="preview", run=run, preview=preview, sent=None, errors=errors
        )
    return redirect(f"/runs/{run_id}/lms?sent={len(result['sent'])}" + ("&undecided=true" if undecided else ""))
