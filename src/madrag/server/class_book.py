"""A run's gradebook rows and each student's feedback, the one home the gradebook and feedback pages, the JSON
API's LMS push (:mod:`madrag.server.lms_link`) and ``madrag lms push`` read them from.

A row per student from the run's grading protocol (:func:`madrag.server.results.grading_protocol`), each grade the
teacher's (her score in the class file, or her override on review) else the AI's (:func:`madrag.teacher.grades.
grade_of`), the roster carried from the import (``roster.json`` beside the run); a student's feedback drafted per
criterion by :mod:`madrag.teacher.feedback`, the teacher's edits kept in ``feedback.json`` beside the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from madrag.errors import MadragError
from madrag.files.atomic import copy_atomic, write_text_atomic
from madrag.lms.manifest import MANIFESTS
from madrag.lms.push import ClassGrades
from madrag.server import results
from madrag.server.http.faults import NotFound
from madrag.server.reviews import Review, all_reviews, latest
from madrag.server.runs import library_runs
from madrag.server.runs.repo import recorded_grading
from madrag.server.service import State
from madrag.teacher import feedback, gradebook
from madrag.teacher.grades import Grade
from madrag.teacher.scored_by import scored_by

ROSTER = "roster.json"
EDITS = "feedback.json"


def save_roster(folder: Path, roster: dict[str, dict[str, str]]) -> None:
    """Keep the students' identifiers (by essay id) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / ROSTER, json.dumps(roster, ensure_ascii=False))


def load_roster(folder: Path) -> dict[str, dict[str, str]]:
    path = folder / ROSTER
    found: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return found


def carry_roster(draft_dir: Path, run_dir: Path) -> None:
    """A draft's roster, and the LMS pull it came from (Canvas's or Classroom's manifest), go with the run made
    from it (nothing when the import had none)."""
    if not run_dir.is_dir():
        return
    for name in (ROSTER, *MANIFESTS.values()):
        if (draft_dir / name).is_file():
            copy_atomic(draft_dir / name, run_dir / name)


def load_edits(run_dir: Path) -> dict[str, dict[str, dict[str, str]]]:
    """The teacher's wording of the feedback, by essay id and criterion."""
    path = run_dir / EDITS
    found: dict[str, dict[str, dict[str, str]]] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return found


def student_rows(
    view: library_runs.RunView,
    table: dict[tuple[str, str, str], Grade],
    roster: dict[str, dict[str, str]],
    label: str,
    protocol: str,
) -> tuple[list[gradebook.Criterion], list[gradebook.StudentRow]]:
    """The criteria and one row per student of ``protocol``'s grades in ``table`` (the grade in force per
    (protocol, essay id, trait))."""
    criteria = [gradebook.Criterion(t.name, t.min, t.max) for t in view.rubric.traits]
    rows = [
        gradebook.student_row(
            essay.id,
            roster.get(essay.id, {}),
            criteria,
            {c.name: table[(protocol, essay.id, c.name)] for c in criteria},
            label,
        )
        for essay in view.essays
    ]
    return criteria, rows


def criteria_feedback(
    view: library_runs.RunView, run_dir: Path, essay_id: str, row: gradebook.StudentRow, protocol: str
) -> list[dict[str, Any]]:
    """One student's feedback per criterion (:func:`madrag.teacher.feedback.criteria`, the teacher's edits and
    grades in it); a 404 for an essay the run does not have."""
    essay = next((e for e in view.essays if e.id == essay_id), None)
    if essay is None:
        raise NotFound(f"the run has no essay {essay_id!r}", "essay_id")
    mine = {s.trait: s for s in view.scores if s.essay_id == essay_id and s.protocol == protocol}
    records = library_runs.essay_records(run_dir, sorted({s.record_key for s in mine.values() if s.record_key}))
    judges = {t: records.get(s.record_key) if s.record_key else None for t, s in mine.items()}
    edits = load_edits(run_dir).get(essay_id, {})
    return feedback.criteria(essay.text, view.rubric.traits, judges, records, edits, row.grades)


# -- in the server (built once per change of the run's scores or reviews) ------------------------------------------


def book(state: State, run_id: str) -> dict[str, Any]:
    """The gradebook's criteria and rows (the teacher's grades first), how many students are fully reviewed and
    how many grades are the teacher's own."""
    return state.memo("book", run_id, lambda: _book(state, run_id))  # type: ignore[no-any-return]


def _book(state: State, run_id: str) -> dict[str, Any]:
    label = scored_by(state.runs.describe(run_id)["backend"])
    table = results.grade_table(state, run_id)
    roster = load_roster(state.runs.run_dir(run_id))
    protocol = results.grading_protocol(state, run_id)
    criteria, rows = student_rows(state.runs.view(run_id), table, roster, label, protocol)
    return {
        "criteria": criteria,
        "rows": rows,
        "reviewed": sum(r.reviewed for r in rows),
        "teacher_grades": sum(g.teacher for r in rows for g in r.grades.values()),
        "scored_by": label,
    }


def student(state: State, run_id: str, essay_id: str, found: dict[str, Any] | None = None) -> dict[str, Any]:
    """One student's feedback: per criterion the score in force and the feedback, the essay highlighted."""
    view = state.runs.view(run_id)
    if not any(e.id == essay_id for e in view.essays):
        raise NotFound(f"run {run_id} has no essay {essay_id!r}", "essay_id")
    found = found or book(state, run_id)
    row = next(r for r in found["rows"] if r.essay_id == essay_id)
    protocol = results.grading_protocol(state, run_id)
    traits = criteria_feedback(view, state.runs.run_dir(run_id), essay_id, row, protocol)
    text = next(e.text for e in view.essays if e.id == essay_id)
    quotes = [q for t in traits for q in t["quotes"]]
    return {
        "essay_id": essay_id,
        "name": row.name,
        "row": row,
        "traits": traits,
        "pieces": feedback.highlight(text, quotes),
    }


# -- what a push to an LMS reads -----------------------------------------------------------------------------------


def feedback_text(item: dict[str, Any]) -> str:
    """A criterion's feedback as one paragraph: the teacher's comment, what works, what next, why this score."""
    return " ".join(str(item.get(k) or "").strip() for k in ("comment", "works", "next", "why") if item.get(k)).strip()


def _class_grades(
    view: library_runs.RunView,
    run_dir: Path,
    book_rows: tuple[list[gradebook.Criterion], list[gradebook.StudentRow]],
    protocol: str,
) -> ClassGrades:
    criteria, rows = book_rows
    texts = {}
    for row in rows:
        items = criteria_feedback(view, run_dir, row.essay_id, row, protocol)
        texts[row.essay_id] = {str(i["trait"]): feedback_text(i) for i in items}
    return ClassGrades(criteria, rows, texts)


def run_dir_grading(run_dir: Path, protocols: list[str]) -> str:
    """The protocol whose scores are a run folder's grades: the one the teacher chose (a web run's ``run.json``),
    else a run's only protocol; a run of several with none chosen is refused, in words (no grade from a method
    nobody picked)."""
    chosen = recorded_grading(run_dir)
    if chosen is not None:
        return chosen
    if len(protocols) > 1:
        raise MadragError(
            f"the run at {run_dir} was scored by {len(protocols)} methods ({', '.join(protocols)}) and records no "
            "choice of the one that gives the grades: score it with one, or from the web app, which asks"
        )
    return protocols[0] if protocols else ""


def class_grades(run_dir: Path, roster: dict[str, dict[str, str]], label: str = "madrag") -> ClassGrades:
    """A run folder's gradebook rows and feedback (``madrag lms push``: no server, the run read from its folder)."""
    view = library_runs.read_run(run_dir)
    reviews: dict[tuple[str, str, str], Review] = latest(all_reviews(run_dir))
    protocol = run_dir_grading(run_dir, view.protocols)
    table = results.run_grade_table(view, reviews, [protocol])
    return _class_grades(view, run_dir, student_rows(view, table, roster, label, protocol), protocol)


def run_class_grades(state: State, run_id: str) -> ClassGrades:
    """A server run's gradebook rows (:func:`book`: the rows its gradebook page shows) and feedback."""
    found = book(state, run_id)
    view = state.runs.view(run_id)
    protocol = results.grading_protocol(state, run_id)
    return _class_grades(view, state.runs.run_dir(run_id), (found["criteria"], found["rows"]), protocol)
