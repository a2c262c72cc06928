"""A run's gradebook for the pages: one row per student from the run's first protocol with the teacher's
reviews in force, the roster carried from the import (``roster.json`` beside the run), and its downloads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from madrag import csv_safe
from madrag.server.errors import ApiError
from madrag.server.results import view_scores
from madrag.server.reviews import all_reviews, latest
from madrag.server.service import State
from madrag.teacher import gradebook
from madrag.teacher.scored_by import scored_by

ROSTER = "roster.json"
LAYOUTS = ("madrag", "canvas", "classroom")


def save_roster(folder: Path, roster: dict[str, dict[str, str]]) -> None:
    """Keep the students' identifiers (by essay id) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ROSTER).write_text(json.dumps(roster, ensure_ascii=False), encoding="utf-8")


def carry_roster(draft_dir: Path, run_dir: Path) -> None:
    """A draft's roster goes with the run made from it (nothing when the import had none)."""
    if (draft_dir / ROSTER).is_file() and run_dir.is_dir():
        shutil.copyfile(draft_dir / ROSTER, run_dir / ROSTER)


def load_roster(folder: Path) -> dict[str, dict[str, str]]:
    path = folder / ROSTER
    found: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return found


def book(state: State, run_id: str) -> dict[str, Any]:
    """The gradebook's criteria and rows (overrides applied), and how many students are fully reviewed."""
    view = state.runs.view(run_id)
    meta = state.runs.describe(run_id)
    first = view.protocols[0] if view.protocols else ""
    reviews = latest(all_reviews(state.runs.run_dir(run_id)))
    scores = view_scores(view)
    roster = load_roster(state.runs.run_dir(run_id))
    criteria = [gradebook.Criterion(t.name, t.min, t.max) for t in view.rubric.traits]
    label = scored_by(meta["backend"])
    rows = []
    for essay in view.essays:
        finals: dict[str, int | None] = {}
        reviewed = True
        for c in criteria:
            found = scores.get((first, essay.id, c.name))
            review = reviews.get((essay.id, c.name, first))
            reviewed = reviewed and review is not None
            finals[c.name] = review.final if review is not None else (None if found is None else found.score)
        rows.append(gradebook.student_row(essay.id, roster.get(essay.id, {}), criteria, finals, reviewed, label))
    return {"criteria": criteria, "rows": rows, "reviewed": sum(r.reviewed for r in rows), "scored_by": label}


def safe_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text (formula-like text quoted; None empty)."""
    return csv_safe.safe_cell(value)


def download(state: State, run_id: str, layout: str) -> tuple[str, str]:
    """(CSV text, file name) of the gradebook in one of :data:`LAYOUTS`."""
    if layout not in LAYOUTS:
        raise ApiError(422, f"layout must be one of {', '.join(LAYOUTS)}", "layout")
    found = book(state, run_id)
    name = state.runs.describe(run_id)["name"] or "essay"
    criteria, rows = found["criteria"], found["rows"]
    if layout == "canvas":
        return gradebook.canvas_csv(rows, criteria, name), "canvas-gradebook.csv"
    if layout == "classroom":
        return gradebook.classroom_csv(rows, criteria, name), "classroom-grades.csv"
    return gradebook.plain_csv(rows, criteria), "gradebook.csv"
