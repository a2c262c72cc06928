"""The gradebook pages: a run's gradebook (one row per student, the teacher's grades first) with its downloads
(madrag, Canvas, Google Classroom and Moodle layouts, one assignment or one per criterion), and the
column-mapping step of an essay import."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from madrag.errors import MadragError
from madrag.server import class_import, gradebook
from madrag.server.http.security import check_csrf
from madrag.server.pages.rendering import redirect, render, state_of
from madrag.teacher import columns, overview

router = APIRouter(include_in_schema=False)
FIELDS = [
    ("text", "The essay"),
    ("email", "Student email"),
    ("sis_id", "Student id (SIS)"),
    ("name", "Student full name"),
    ("first_name", "First name"),
    ("last_name", "Last name"),
    ("section", "Section or class period"),
    ("id", "Essay id (optional)"),
]


@router.get("/runs/{run_id}/gradebook")
def gradebook_page(run_id: str, request: Request) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    return render(request, "gradebook.html", run=run, book=gradebook.book(s, run_id))


@router.get("/runs/{run_id}/overview")
def overview_page(run_id: str, request: Request) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    found = gradebook.book(s, run_id)
    summary = overview.overview(found["rows"], found["criteria"])
    return render(request, "overview.html", run=run, book=found, view=summary)


@router.get("/runs/{run_id}/gradebook.csv")
def gradebook_file(run_id: str, request: Request, layout: str = "madrag", criteria: bool = False) -> Response:
    text, filename = gradebook.download(state_of(request), run_id, layout, criteria)
    headers = {"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"}
    return Response(text, media_type="text/csv; charset=utf-8", headers=headers)


def _mapping_page(request: Request, draft_id: str, error: str = "", status: int = 200) -> Response:
    s = state_of(request)
    draft = s.drafts.get(draft_id)
    rubric = s.catalog.get(draft.rubric_id) if draft.rubric_id else None
    found = class_import.pending(s.drafts.folder(draft_id))
    if found is None or rubric is None:
        return redirect(f"/drafts/{draft_id}/essays")
    header, rows = found
    traits = [t.name for t in rubric.traits]
    guess = columns.guess(header, traits, rows)
    return render(
        request,
        "columns.html",
        status=status,
        draft=draft,
        header=header,
        sample=rows[:3],
        n_rows=len(rows),
        fields=FIELDS,
        guess=guess,
        traits=traits,
        error=error,
        read=class_import.held(s.drafts.folder(draft_id)),
    )


@router.get("/drafts/{draft_id}/columns")
def columns_page(draft_id: str, request: Request) -> Response:
    return _mapping_page(request, draft_id)


@router.post("/drafts/{draft_id}/columns")
async def columns_submit(draft_id: str, request: Request) -> Response:
    await check_csrf(request)
    form = await request.form()
    s = state_of(request)
    draft = s.drafts.get(draft_id)
    rubric = s.catalog.get(draft.rubric_id) if draft.rubric_id else None
    if rubric is None:
        return redirect(f"/drafts/{draft_id}/rubric")
    chosen = {name: str(form.get(f"col-{name}") or "") or None for name, _label in FIELDS}
    scores = {t.name: str(form.get(f"score-{i}")) for i, t in enumerate(rubric.traits) if form.get(f"score-{i}")}
    mapping = columns.Mapping(scores=scores, **chosen)
    limits = s.config.limits
    try:
        upload, replaced = class_import.read_mapped(
            s.drafts.folder(draft_id), rubric, mapping, limits.max_rows, limits.max_essay_chars
        )
    except MadragError as exc:
        return _mapping_page(request, draft_id, str(exc), 400)
    s.drafts.set_essays(draft, upload.essays, upload.refused)
    rows = ",".join(f"{old}-{new}" for _essay_id, old, new in replaced[:20])
    return redirect(f"/drafts/{draft_id}/essays" + (f"?replaced={rows}" if replaced else ""))
