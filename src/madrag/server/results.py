"""A run's results as the API and the pages show them: the grid of scores, one essay with its records, the
teacher's reviews, and the export with both (built once per change of scores or reviews)."""

from __future__ import annotations

import json
from typing import Any

from madrag.errors import MadragError
from madrag.files.csv_safe import csv_text, dict_rows
from madrag.server.http.faults import InvalidRequest, NotFound, WrongState
from madrag.server.http.schemas import OverrideIn
from madrag.server.reviews import Review, add_review, all_reviews, latest
from madrag.server.runs import library_runs
from madrag.server.service import State
from madrag.teacher import grades
from madrag.teacher.grades import Grade, grade_of
from madrag.teacher.scored_by import scored_by, warning


def cell_class(score: int | None, reference: int | None) -> str:
    """How a results cell is shown: missing, agreeing, off by one, or off by more."""
    if score is None:
        return "missing"
    if reference is None:
        return "plain"
    gap = abs(score - reference)
    return "agree" if gap == 0 else "near" if gap == 1 else "far"


def grid(state: State, run_id: str) -> dict[str, Any]:
    """The results grid: one row per essay, per protocol and trait the grade in force (madrag's score in it), the
    human reference and how far madrag's score is from the teacher's (else the reference)."""
    return state.memo("grid", run_id, lambda: _grid(state, run_id))  # type: ignore[no-any-return]


def _grid(state: State, run_id: str) -> dict[str, Any]:
    view = state.runs.view(run_id)
    found_grades = grade_table(state, run_id)  # the reviews are in it: read once, there
    scored = {(s.protocol, s.essay_id, s.trait) for s in view.scores}
    traits = view.rubric.traits
    protocols = ordered_protocols(state, run_id)
    rows = []
    for essay in view.essays:
        refs = {t.name: essay.reference(t) for t in traits}
        cells = []
        for protocol in protocols:
            for trait in traits:
                grade = found_grades[(protocol, essay.id, trait.name)]
                # madrag's suggestion against the teacher's decision where there is one, else the human reference
                against = grade.points if grade.teacher else refs[trait.name]
                was_scored = (protocol, essay.id, trait.name) in scored
                cells.append(
                    {
                        "protocol": protocol,
                        "trait": trait.name,
                        "scored": was_scored,
                        "reference": refs[trait.name],
                        "grade": grade,
                        "class": cell_class(grade.ai, against) if was_scored else "pending",
                    }
                )
        rows.append({"essay_id": essay.id, "cells": cells})
    return {"protocols": protocols, "traits": [t.name for t in traits], "rows": rows, "has_human": view.has_human}


def grade_table(state: State, run_id: str) -> dict[tuple[str, str, str], Grade]:
    """The grade in force per (protocol, essay id, trait), by :func:`madrag.teacher.grades.grade_of`: the
    teacher's override, else the teacher's own score from the class file (the essay's human reference), else the
    AI's score (accepted or not). The one table every page, file and API answer reads a grade from."""
    return state.memo("grades", run_id, lambda: _grade_table(state, run_id))  # type: ignore[no-any-return]


def _grade_table(state: State, run_id: str) -> dict[tuple[str, str, str], Grade]:
    view = state.runs.view(run_id)
    return run_grade_table(view, latest(all_reviews(state.runs.run_dir(run_id))), ordered_protocols(state, run_id))


def run_grade_table(
    view: library_runs.RunView, reviews: dict[tuple[str, str, str], Review], protocols: list[str] | None = None
) -> dict[tuple[str, str, str], Grade]:
    """:func:`madrag.teacher.grades.grade_table` of a run's view and its reviews in force, for ``protocols``
    (default: those with scores; the server lists the grading protocol first, even before it has one)."""
    ai = {key: s.score for key, s in view_scores(view).items()}
    essays = {e.id: {t.name: e.reference(t) for t in view.rubric.traits} for e in view.essays}
    return grades.grade_table(view.protocols if protocols is None else protocols, essays, ai, reviews)


def grading_protocol(state: State, run_id: str) -> str:
    """The protocol whose scores are the run's grades (the gradebook's, the review queue's, the feedback's, every
    file's): the one the teacher chose for the run, recorded in its ``run.json``; the others are for comparison."""
    return state.runs.meta(run_id).grading


def ordered_protocols(state: State, run_id: str) -> list[str]:
    """The run's protocols, its grading protocol first (listed even before it has a score), then the others in
    the run's order (shown for comparison)."""
    grading = grading_protocol(state, run_id)
    found = state.runs.view(run_id).protocols
    return ([grading] if grading else []) + [p for p in found if p != grading]


def view_scores(view: library_runs.RunView) -> dict[tuple[str, str, str], Any]:
    return {(s.protocol, s.essay_id, s.trait): s for s in view.scores}


def essay_detail(state: State, run_id: str, essay_id: str) -> dict[str, Any]:
    """One essay's text and, per trait and protocol, the Judge's rationale, score distribution, exemplars, the
    debate with confidences, and the reviews."""
    view = state.runs.view(run_id)
    essay = next((e for e in view.essays if e.id == essay_id), None)
    if essay is None:
        raise NotFound(f"run {run_id} has no essay {essay_id!r}", "essay_id")
    mine = [s for s in view.scores if s.essay_id == essay_id]
    records = library_runs.essay_records(
        state.runs.run_dir(run_id), sorted({s.record_key for s in mine if s.record_key})
    )
    reviews = all_reviews(state.runs.run_dir(run_id), essay_id)
    found_grades = grade_table(state, run_id)
    traits = []
    for trait in view.rubric.traits:
        entries = []
        for protocol in ordered_protocols(state, run_id):
            found = next((s for s in mine if s.protocol == protocol and s.trait == trait.name), None)
            judge = records.get(found.record_key) if found is not None else None
            debate = [records[k] for k in (judge.context.get("debate") or [] if judge else []) if k in records]
            history = [r.model_dump() for r in reviews if r.trait == trait.name and r.protocol == protocol]
            entry = _protocol_entry(protocol, found, judge, debate, history)
            grade = found_grades[(protocol, essay_id, trait.name)]
            entry |= {"in_force": grade, "grade": grade.points, "graded_by": grade.by, "graded_how": grade.how}
            entry["grading"] = protocol == grading_protocol(state, run_id)  # the others: for comparison
            entries.append(entry)
        traits.append(
            {
                "trait": trait.name,
                "min": trait.min,
                "max": trait.max,
                "levels": trait.levels,
                "reference": essay.reference(trait),
                "raters": essay.rater_scores.get(trait.name, []),
                "protocols": entries,
            }
        )
    return {"run_id": run_id, "essay": {"id": essay.id, "text": essay.text, "fold": essay.fold}, "traits": traits}


def _protocol_entry(
    protocol: str, found: Any, judge: Any, debate: list[Any], history: list[dict[str, Any]]
) -> dict[str, Any]:
    result = None if found is None else found.result
    return {
        "protocol": protocol,
        "scored": found is not None,
        "score": None if found is None else found.score,
        "score_mode": None if result is None else result.mode,
        "distribution": None
        if result is None or result.distribution is None
        else {str(k): round(v, 4) for k, v in sorted(result.distribution.items())},
        "expected": None if result is None else result.expected,
        "rationale": "" if found is None else found.rationale,
        "judge_error": None if judge is None else judge.error,
        "exemplars": [] if judge is None else judge.context.get("exemplars") or [],
        "confidences": {} if judge is None else judge.context.get("confidences") or {},
        "debate": [r.model_dump(include={"role", "round", "text", "confidence", "confidence_source"}) for r in debate],
        "reviews": history,
        "review": history[-1] if history else None,
    }


# -- reviews and export ---------------------------------------------------------------------------------------


def _scored_cell(
    state: State, run_id: str, essay_id: str, trait_name: str, protocol: str | None
) -> tuple[Any, str, Any]:
    """(trait, protocol, the AI's stored score) of one essay-trait a review is about; a 404 for an essay, trait or
    protocol the run does not have, a 409 before it is scored."""
    view = state.runs.view(run_id)
    if not any(e.id == essay_id for e in view.essays):
        raise NotFound(f"run {run_id} has no essay {essay_id!r}", "essay_id")
    try:
        trait = view.rubric.trait(trait_name)
    except MadragError:
        raise NotFound(f"the rubric has no trait {trait_name!r}", "trait") from None
    chosen = protocol or grading_protocol(state, run_id)
    if chosen not in view.protocols:
        raise NotFound(f"run {run_id} has no scores of protocol {chosen!r}", "protocol")
    found = view_scores(view).get((chosen, essay_id, trait.name))
    if found is None:
        raise WrongState(f"essay {essay_id} has no {chosen} score for {trait.name} yet", "trait")
    return trait, chosen, found


def add_override(state: State, run_id: str, req: OverrideIn) -> Review:
    """Record a review of one trait score (the agent's record stays as it is)."""
    trait, protocol, found = _scored_cell(state, run_id, req.essay_id, req.trait, req.protocol)
    if req.action == "override":
        if req.score is None or not trait.contains(req.score):
            raise InvalidRequest(f"score must be an integer from {trait.min} to {trait.max}", "score")
    review = Review(
        essay_id=req.essay_id,
        trait=trait.name,
        protocol=protocol,
        action=req.action,
        agent_score=found.score,
        new_score=req.score if req.action == "override" else found.score,
        comment=req.comment,
        reviewer=req.reviewer,
    )
    return add_review(state.runs.run_dir(run_id), review)


COMMENT_LIMIT = 5000
"""The longest comment kept (as the review's own limit)."""


def add_comment(
    state: State, run_id: str, cell: tuple[str, str, str | None], comment: str, reviewer: str
) -> Review | None:
    """Save the teacher's comment on one trait score (``cell``: essay id, trait, protocol or None for the
    grading one) alone: no score is set and nothing is decided (an undecided grade stays undecided, a decided one
    stays as it was, with this comment). None when the comment is already the one in force (nothing written)."""
    essay_id, trait_name, protocol = cell
    if len(comment) > COMMENT_LIMIT:
        raise InvalidRequest(f"a comment holds at most {COMMENT_LIMIT} characters", "comment")
    trait, chosen, found = _scored_cell(state, run_id, essay_id, trait_name, protocol)
    run_dir = state.runs.run_dir(run_id)
    standing = latest(all_reviews(run_dir, essay_id)).get((essay_id, trait.name, chosen))
    if (standing.comment if standing is not None else "") == comment:
        return None
    note = Review(
        essay_id=essay_id,
        trait=trait.name,
        protocol=chosen,
        action="comment",
        agent_score=found.score,
        comment=comment,
        reviewer=reviewer,
    )
    return add_review(run_dir, note)


def override_in_force(state: State, run_id: str, essay_id: str, trait: str, protocol: str | None) -> Review | None:
    """The teacher's override in force on one essay-trait (None when its latest review is not an override)."""
    chosen = protocol or grading_protocol(state, run_id)
    found = latest(all_reviews(state.runs.run_dir(run_id), essay_id)).get((essay_id, trait, chosen))
    return found if found is not None and found.action == "override" else None


def export_rows(state: State, run_id: str) -> list[dict[str, Any]]:
    """The library's score rows with the review in force beside each agent score; the grade (``grade``,
    ``final_score``, ``graded_by``) only on the grading protocol's rows (``grading``), empty on a comparison
    method's."""
    return state.memo("export", run_id, lambda: _export_rows(state, run_id))  # type: ignore[no-any-return]


def _export_rows(state: State, run_id: str) -> list[dict[str, Any]]:
    view = state.runs.view(run_id)
    reviews = latest(all_reviews(state.runs.run_dir(run_id)))
    found_grades = grade_table(state, run_id)
    backend = state.runs.describe(run_id)["backend"]
    label, valid = scored_by(backend), warning(backend) is None
    grading = grading_protocol(state, run_id)
    rows = []
    for row in library_runs.export_rows(view):
        review = reviews.get((row["essay_id"], row["trait"], row["protocol"]))
        grade = found_grades.get((row["protocol"], row["essay_id"], row["trait"])) or grade_of(row["score"])
        if row["protocol"] != grading:  # a method shown for comparison: its scores are never a grade
            grade = Grade(None, None, "missing")
        rows.append(
            {
                **row,
                "review": None if review is None else review.action,
                "override_score": None if review is None or review.action != "override" else review.new_score,
                "final_score": grade.points,  # the grade in force (the same value as ``grade``)
                "review_comment": None if review is None else review.comment,
                "reviewer": None if review is None else review.reviewer,
                "reviewed_at": None if review is None else review.created_at,
                "grade": grade.points,
                "graded_by": grade.by,
                "grading": row["protocol"] == grading,  # this protocol's scores are the run's grades
                "scored_by": label,
                "valid_scores": valid,
            }
        )
    return rows


def export(state: State, run_id: str, fmt: str) -> tuple[str, str]:
    """(content, media type) of the scores export with reviews: CSV or JSONL."""
    rows = export_rows(state, run_id)
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "application/x-ndjson"
    if fmt != "csv":
        raise InvalidRequest("format must be csv or jsonl", "format")
    if not rows:
        return "", "text/csv"
    flat = [{k: json.dumps(v) if isinstance(v, dict) else v for k, v in row.items()} for row in rows]
    return csv_text(dict_rows(flat)), "text/csv"
