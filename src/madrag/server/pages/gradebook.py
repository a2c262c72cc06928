"""The gradebook pages: a run's gradebook, one row per student from the run's grading protocol (the teacher's
choice), each grade the teacher's (their score in the class file, or their override on review) else the AI's
(:func:`madrag.teacher.grades.grade_of`), the roster carried from the import (``roster.json`` beside the run),
how each student is shown; the class overview; and the downloads (madrag, Canvas, Google Classroom and Moodle
layouts, one assignment or one per criterion)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from madrag import csv_safe
from madrag.atomic_files import copy_atomic, write_text_atomic
from madrag.server import results
from madrag.server.http.errors import ApiError
from madrag.server.pages.rendering import paginate, render, state_of
from madrag.server.service import State
from madrag.teacher import gradebook, overview
from madrag.teacher.columns import student_label
from madrag.teacher.grades import Grade
from madrag.teacher.scored_by import scored_by

ROSTER = "roster.json"
LAYOUTS = {
    "madrag": "gradebook.csv",
    "canvas": "canvas-gradebook.csv",
    "classroom": "classroom-grades.csv",
    "moodle": "moodle-grades.csv",
}


def save_roster(folder: Path, roster: dict[str, dict[str, str]]) -> None:
    """Keep the students' identifiers (by essay id) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / ROSTER, json.dumps(roster, ensure_ascii=False))


def carry_roster(draft_dir: Path, run_dir: Path) -> None:
    """A draft's roster goes with the run made from it (nothing when the import had none)."""
    if (draft_dir / ROSTER).is_file() and run_dir.is_dir():
        copy_atomic(draft_dir / ROSTER, run_dir / ROSTER)


def load_roster(folder: Path) -> dict[str, dict[str, str]]:
    path = folder / ROSTER
    found: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return found


def grades(state: State, run_id: str) -> dict[tuple[str, str], Grade]:
    """The grade in force per (essay id, trait) of the run's grading protocol (:func:`madrag.server.results.
    grade_table`, the one table every page and file reads)."""
    first = results.grading_protocol(state, run_id)
    return {
        (essay, trait): g
        for (protocol, essay, trait), g in results.grade_table(state, run_id).items()
        if protocol == first
    }


def names(state: State, run_id: str) -> dict[str, str]:
    """How each student is shown on the teacher's pages, by essay id (the mapped name, else the email or SIS
    id, else the essay id); read once per change of the run."""
    return state.memo("names", run_id, lambda: _names(state, run_id))  # type: ignore[no-any-return]


def _names(state: State, run_id: str) -> dict[str, str]:
    roster = load_roster(state.runs.run_dir(run_id))
    return {e.id: student_label(roster.get(e.id, {}), e.id) for e in state.runs.view(run_id).essays}


def book(state: State, run_id: str) -> dict[str, Any]:
    """The gradebook's criteria and rows (the teacher's grades first), how many students are fully reviewed and
    how many grades are the teacher's own; built once per change of the run's scores or reviews."""
    return state.memo("book", run_id, lambda: _book(state, run_id))  # type: ignore[no-any-return]


def _book(state: State, run_id: str) -> dict[str, Any]:
    view = state.runs.view(run_id)
    meta = state.runs.describe(run_id)
    roster = load_roster(state.runs.run_dir(run_id))
    criteria = [gradebook.Criterion(t.name, t.min, t.max) for t in view.rubric.traits]
    label = scored_by(meta["backend"])
    found = grades(state, run_id)
    rows = [
        gradebook.student_row(
            essay.id, roster.get(essay.id, {}), criteria, {c.name: found[(essay.id, c.name)] for c in criteria}, label
        )
        for essay in view.essays
    ]
    return {
        "criteria": criteria,
        "rows": rows,
        "reviewed": sum(r.reviewed for r in rows),
        "teacher_grades": sum(g.teacher for r in rows for g in r.grades.values()),
        "scored_by": label,
    }


def canvas_matching(state: State, run_id: str) -> str:
    """How Canvas will match the run's students (the gradebook's and the review desk's export say it): from their
    identifiers, which no review changes (kept until the scores change)."""
    return state.memo(  # type: ignore[no-any-return]
        "canvas-matching", run_id, lambda: gradebook.canvas_matching(book(state, run_id)["rows"]), reviews=False
    )


def safe_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text (formula-like text quoted; None empty)."""
    return csv_safe.safe_cell(value)


@dataclass(frozen=True)
class Assignment:
    """The LMS assignment a file is for: its title (default: the run's name) and, for Canvas, the id of an
    existing assignment to update."""

    title: str = ""
    canvas_id: str = ""


def download(
    state: State, run_id: str, layout: str, by_criterion: bool = False, target: Assignment | None = None
) -> tuple[str, str]:
    """(CSV text, file name) of the gradebook in one of :data:`LAYOUTS`: one assignment (the total), or one
    per criterion when ``by_criterion``."""
    if layout not in LAYOUTS:
        raise ApiError(422, f"layout must be one of {', '.join(LAYOUTS)}", "layout")
    target = target or Assignment()
    pasted = re.fullmatch(r"(.*\S)\s*\((\d+)\)", target.title.strip())
    if pasted and not target.canvas_id.strip():  # a title pasted from Canvas's export: ``Title (id)``
        target = Assignment(pasted.group(1), pasted.group(2))
    found = book(state, run_id)
    name = " ".join(target.title.split()) or state.runs.describe(run_id)["name"] or "Essay"
    criteria, rows = found["criteria"], found["rows"]
    if layout == "canvas":
        try:
            text = gradebook.canvas_csv(rows, criteria, name, by_criterion, target.canvas_id)
        except ValueError as exc:
            raise ApiError(422, str(exc), "assignment_id") from exc
        return text, LAYOUTS[layout]
    if layout == "classroom":
        return gradebook.classroom_csv(rows, criteria, name, by_criterion), LAYOUTS[layout]
    if layout == "moodle":
        return gradebook.moodle_csv(rows, criteria, name, by_criterion), LAYOUTS[layout]
    return gradebook.plain_csv(rows, criteria), LAYOUTS[layout]


# -- the pages ---------------------------------------------------------------------------------------------------------

router = APIRouter(include_in_schema=False)


@router.get("/runs/{run_id}/gradebook")
def gradebook_page(run_id: str, request: Request) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    found = book(s, run_id)
    matching = canvas_matching(s, run_id)
    rows, pager = paginate(request, found["rows"])
    return render(request, "gradebook.html", run=run, book=found, rows=rows, pager=pager, canvas_matching=matching)


@router.get("/runs/{run_id}/overview")
def overview_page(run_id: str, request: Request) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    found = book(s, run_id)
    summary = overview.overview(found["rows"], found["criteria"])
    return render(request, "overview.html", run=run, book=found, view=summary)


@router.get("/runs/{run_id}/gradebook.csv")
def gradebook_file(
    run_id: str,
    request: Request,
    layout: str = "madrag",
    criteria: bool = False,
    title: str = "",
    assignment_id: str = "",
) -> Response:
    target = Assignment(title[:255], assignment_id[:20])
    text, filename = download(state_of(request), run_id, layout, criteria, target)
    headers = {"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"}
    return Response(text, media_type="text/csv; charset=utf-8", headers=headers)
