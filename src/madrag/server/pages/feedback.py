"""The student feedback pages: one student's feedback to read and edit, every student's printable one page
each, and the CSV export. Drafted per essay and criterion by :mod:`madrag.teacher.feedback` from the run's first
protocol (:func:`madrag.server.class_book.student`), the teacher's edits kept in ``feedback.json`` beside the run.
The score shown is the grade in force (the teacher's, else the AI's); where it is the teacher's, the teacher's
comment is shown and the AI's reasoning for its own score is not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from madrag.files.atomic import write_text_atomic
from madrag.files.csv_safe import csv_text
from madrag.server.class_book import EDITS, book, load_edits, student
from madrag.server.http.security import check_csrf
from madrag.server.pages.rendering import csv_download, redirect, render, state_of
from madrag.server.service import State


def save_edit(run_dir: Path, essay_id: str, trait: str, works: str, next_step: str) -> None:
    """Keep the teacher's wording of one criterion's feedback (written whole, then moved into place)."""
    edits = load_edits(run_dir)
    edits.setdefault(essay_id, {})[trait] = {"works": works[:2000], "next": next_step[:2000]}
    write_text_atomic(run_dir / EDITS, json.dumps(edits, ensure_ascii=False))


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
    found_book = book(state, run_id)
    for essay in state.runs.view(run_id).essays:
        found = student(state, run_id, essay.id, found_book)
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
    found = book(s, run_id)
    students = [student(s, run_id, e.id, found) for e in s.runs.view(run_id).essays]
    return render(request, "feedback_print.html", run=run, students=students)


@router.get("/runs/{run_id}/feedback.csv")
def export(run_id: str, request: Request) -> Response:
    return csv_download(export_csv(state_of(request), run_id), "feedback.csv")


@router.get("/runs/{run_id}/feedback/{essay_id:path}")
def one_student(run_id: str, essay_id: str, request: Request, saved: str = "") -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    return render(request, "feedback.html", run=run, student=student(s, run_id, essay_id), saved=saved)


@router.post("/runs/{run_id}/feedback/{essay_id:path}")
async def edit(run_id: str, essay_id: str, request: Request) -> Response:
    form = await check_csrf(request)
    s = state_of(request)
    trait = str(form.get("trait") or "")
    student(s, run_id, essay_id)  # 404 for an unknown essay
    if trait not in [t.name for t in s.runs.view(run_id).rubric.traits]:
        return redirect(f"/runs/{run_id}/feedback/{quote(essay_id, safe='')}")
    save_edit(s.runs.run_dir(run_id), essay_id, trait, str(form.get("works") or ""), str(form.get("next") or ""))
    return redirect(f"/runs/{run_id}/feedback/{quote(essay_id, safe='')}?saved={quote(trait)}#fb-{quote(trait)}")
