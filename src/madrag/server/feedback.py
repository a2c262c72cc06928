"""Student feedback for the pages: drafted per essay and criterion by :mod:`madrag.teacher.feedback` from the
run's first protocol, the teacher's edits kept in ``feedback.json`` beside the run, and its CSV export. The score
shown is the grade in force (the teacher's, else the AI's); where it is the teacher's, the teacher's comment is
shown and the AI's reasoning for its own score is not."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from madrag.csv_safe import csv_text
from madrag.records import AgentRecord
from madrag.server import gradebook
from madrag.server.http.errors import ApiError
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
    tmp = run_dir / (EDITS + ".tmp")
    tmp.write_text(json.dumps(edits, ensure_ascii=False), encoding="utf-8")
    tmp.replace(run_dir / EDITS)


def _latest(turns: list[AgentRecord], role: str) -> str:
    mine = [t for t in turns if t.role == role]
    return max(mine, key=lambda t: t.round).text if mine else ""


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
    traits = []
    for trait in view.rubric.traits:
        found = mine.get(trait.name)
        judge = records.get(found.record_key) if found is not None else None
        turns = [records[k] for k in (judge.context.get("debate") or [] if judge else []) if k in records]
        judged = "" if judge is None else (judge.rationale or judge.text)
        item = feedback.draft(trait.name, _latest(turns, "advocate"), _latest(turns, "skeptic"), judged, essay.text)
        if trait.name in edits:
            item.works, item.next, item.edited = edits[trait.name]["works"], edits[trait.name]["next"], True
        traits.append(feedback.with_grade(asdict(item), row.grades[trait.name], trait.max))
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
