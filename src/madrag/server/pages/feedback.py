"""The student feedback pages: one student's feedback to read and edit, every student's printable one page
each, and the CSV export."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from madrag.server import feedback, gradebook
from madrag.server.http.security import check_csrf
from madrag.server.pages.rendering import redirect, render, state_of

router = APIRouter(include_in_schema=False)


@router.get("/runs/{run_id}/feedback")
def print_all(run_id: str, request: Request) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    book = gradebook.book(s, run_id)
    students = [feedback.student(s, run_id, e.id, book) for e in s.runs.view(run_id).essays]
    return render(request, "feedback_print.html", run=run, students=students)


@router.get("/runs/{run_id}/feedback.csv")
def export(run_id: str, request: Request) -> Response:
    headers = {"Content-Disposition": 'attachment; filename="feedback.csv"', "Cache-Control": "no-store"}
    return Response(
        feedback.export_csv(state_of(request), run_id), media_type="text/csv; charset=utf-8", headers=headers
    )


@router.get("/runs/{run_id}/feedback/{essay_id:path}")
def one_student(run_id: str, essay_id: str, request: Request, saved: str = "") -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    return render(request, "feedback.html", run=run, student=feedback.student(s, run_id, essay_id), saved=saved)


@router.post("/runs/{run_id}/feedback/{essay_id:path}")
async def edit(run_id: str, essay_id: str, request: Request) -> Response:
    await check_csrf(request)
    form = await request.form()
    s = state_of(request)
    trait = str(form.get("trait") or "")
    feedback.student(s, run_id, essay_id)  # 404 for an unknown essay
    if trait not in [t.name for t in s.runs.view(run_id).rubric.traits]:
        return redirect(f"/runs/{run_id}/feedback/{quote(essay_id, safe='')}")
    feedback.save_edit(
        s.runs.run_dir(run_id), essay_id, trait, str(form.get("works") or ""), str(form.get("next") or "")
    )
    return redirect(f"/runs/{run_id}/feedback/{quote(essay_id, safe='')}?saved={quote(trait)}#fb-{quote(trait)}")
