"""The gradebook pages: a run's gradebook (its rows built by :func:`madrag.server.class_book.book`: one row per
student, each grade the teacher's else the AI's, the roster carried from the import), how each student is shown;
the class overview; and the downloads (madrag, Canvas, Google Classroom and Moodle
layouts, one assignment or one per criterion)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import Response

from madrag.server.class_book import book, load_roster
from madrag.server.http.errors import ApiError
from madrag.server.pages.rendering import csv_download, paginate, render, state_of
from madrag.server.service import State
from madrag.teacher import gradebook, overview
from madrag.teacher.columns import student_label

LAYOUTS = {
    "madrag": "gradebook.csv",
    "canvas": "canvas-gradebook.csv",
    "classroom": "classroom-grades.csv",
    "moodle": "moodle-grades.csv",
}


def names(state: State, run_id: str) -> dict[str, str]:
    """How each student is shown on the teacher's pages, by essay id (the mapped name, else the email or SIS
    id, else the essay id); read once per change of the run."""
    return state.memo("names", run_id, lambda: _names(state, run_id))  # type: ignore[no-any-return]


def _names(state: State, run_id: str) -> dict[str, str]:
    roster = load_roster(state.runs.run_dir(run_id))
    return {e.id: student_label(roster.get(e.id, {}), e.id) for e in state.runs.view(run_id).essays}


def canvas_matching(state: State, run_id: str) -> str:
    """How Canvas will match the run's students (the gradebook's and the review desk's export say it): from their
    identifiers, which no review changes (kept until the scores change)."""
    return state.memo(  # type: ignore[no-any-return]
        "canvas-matching", run_id, lambda: gradebook.canvas_matching(book(state, run_id)["rows"]), reviews=False
    )


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
    return csv_download(text, filename)
