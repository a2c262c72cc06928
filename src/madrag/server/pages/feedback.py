"""The student feedback pages: one student's feedback to read and edit, every student's printable one page
each, and the CSV export. Drafted per essay and criterion by :mod:`madrag.teacher.feedback` from the run's first
protocol, the teacher's edits kept in ``feedback.json`` beside the run. The score shown is the grade in force
(the teacher's, else the AI's); where it is the teacher's, the teacher's comment is shown and the AI's reasoning
for its own score is not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from madrag.atomic_files import write_text_atomic
from madrag.csv_safe import csv_text
from madrag.server.http.errors import ApiError
from madrag.server.http.security import check_csrf
from madrag.server.pages import gradebook
from madrag.server.pages.rendering import redirect, render, state_of
from madrag.server.runs import library_runs
from madrag.server.service import State
from madrag.teacher import feedback

EDITS = "feedback.json"


def load_edits(run_dir: Path) -> dict[str, dict[str, dict[str, str]]]:
    path = run_dir / EDITS
    found: dict[str, dict[str, dict[str, str]]] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return found


def save_edit(run_dir: Path, essay_id: str, trait: str, works: str, next_step: str) -> None:
    """Keep the teacher's wording of one criterion's feedback (written whole, then moved into place)."""
    edits = load_edits(run_dir)
    edits.setdefault(essay_id, {})[trait] = {"works": works[:2000], "next": next_step[:2000]}
    write_text_atomic(run_dir / EDITS, json.dumps(edits, ensure_ascii=False))


def student(state: State, run_id: str, essay_id: str, book: dict[str, Any] | None = None) -> dict[str, Any]:
    """One student's feedback: per criterion the score in force and the feedback, the essay highlighted."""
    view = state.runs.view(run_id)
    essay = next((e for e in view.essays if e.id == essay_id), None)
    if essay is None:
        raise ApiError(404, f"run {run_id} has no essay {essay_id!r}", "essay_id")
    first = view.protocols[0] if view.protocols else ""
    mine = {s.trait: s for s in view.scores if s.essay_id == essay_id and s.protocol == first}
    run_dir = state.runs.run_dir(run_id)
    records = library_runs.essay_records(run_dir, sorted({s.record_key for s in mine.values() if s.record_key}))
    edits = load_edits(run_dir).get(essay_id, {})
    book = book or gradebook.book(state, run_id)
    row = next(r for r in book["rows"] if r.essay_id == essay_id)
    judges = {t: records.get(s.record_key) if s.record_key else None for t, s in mine.items()}
    traits = feedback.criteria(essay.text, view.rubric.traits, judges, records, edits, row.grades)
    quotes = [q for t in traits for q in t["quotes"]]
    return {
        "essay_id": essay_id,
        "name": row.name,
        "row": row,
        "traits": traits,
        "pieces": feedback.highlight(essay.text, quotes),
    }


def export_csv(state: State, run_id: str) -> str:
    """One row per student and criterion: who, the grade in force, what works, what next, the AI's reasoning
    (only where the AI's score stands), who graded it, the teacher's comment, edited."""
    rows: list[list[Any]] = [
        [
            "student",
            "email",
            "sis_id",
            "essay_id",
            "criterion",
            "score",
            "max",
            "what_works",
            "work_on_next",
            "why_this_score",
            "graded_by",
            "teacher_comment",
            "edited_by_teacher",
        ]
    ]
    book = gradebook.book(state, run_id)
    for essay in state.runs.view(run_id).essays:
        found = student(state, run_id, essay.id, book)
        row = found["row"]
        for t in found["traits"]:
            cells = [
                row.name,
                row.email,
                row.sis_id,
                essay.id,
                t["trait"],
                t["score"],
                t["max"],
                t["works"],
                t["next"],
                t["why"],
                "teacher" if t["teacher"] else "AI",
                t["comment"],
                "yes" if t["edited"] else "no",
            ]
            rows.append(cells)
    return csv_text(rows)


# -- the pages ---------------------------------------------------------------------------------------------------------

router = APIRouter(include_in_schema=False)


@router.get("/runs/{run_id}/feedback")
def print_all(run_id: str, request: Request) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    book = gradebook.book(s, run_id)
    students = [student(s, run_id, e.id, book) for e in s.runs.view(run_id).essays]
    return render(request, "feedback_print.html", run=run, students=students)


@router.get("/runs/{run_id}/feedback.csv")
def export(run_id: str, request: Request) -> Response:
    headers = {"Content-Disposition": 'attachment; filename="feedback.csv"', "Cache-Control": "no-store"}
    return Response(export_csv(state_of(request), run_id), media_type="text/csv; charset=utf-8", headers=headers)


@router.get("/runs/{run_id}/feedback/{essay_id:path}")
def one_student(run_id: str, essay_id: str, request: Request, saved: str = "") -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    return render(request, "feedback.html", run=run, student=student(s, run_id, essay_id), saved=saved)


@router.post("/runs/{run_id}/feedback/{essay_id:path}")
async def edit(run_id: str, essay_id: str, request: Request) -> Response:
    await check_csrf(request)
    form = await request.form()
    s = state_of(request)
    trait = str(form.get("trait") or "")
    student(s, run_id, essay_id)  # 404 for an unknown essay
    if trait not in [t.name for t in s.runs.view(run_id).rubric.traits]:
        return redirect(f"/runs/{run_id}/feedback/{quote(essay_id, safe='')}")
    save_edit(s.runs.run_dir(run_id), essay_id, trait, str(form.get("works") or ""), str(form.get("next") or ""))
    return redirect(f"/runs/{run_id}/feedback/{quote(essay_id, safe='')}?saved={quote(trait)}#fb-{quote(trait)}")
