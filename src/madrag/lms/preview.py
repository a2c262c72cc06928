"""The preview of a push, before anything is sent: per student Canvas's grade now, the new grade, the rubric
assessment (points and comment per criterion, who decided it) and whether it will be sent, with why not; as text
for ``madrag lms push --dry-run`` and as JSON for a program."""

from __future__ import annotations

from collections import Counter
from typing import Any

from madrag.lms.push import PushPlan


def _old(score: float | None, grade: str | None) -> str:
    if score is None and not grade:
        return "no grade"
    return grade or f"{score:g}"


def preview_text(plan: PushPlan, verbose: bool = True) -> str:
    """The preview as lines of text."""
    m = plan.manifest
    out = [f"Canvas: {m.course_name or m.course_id} / {m.assignment_name or m.assignment_id}"]
    if m.post_manually:
        out.append(
            "This assignment posts grades manually: grades sent stay hidden from students until you post them "
            "in Canvas."
        )
    possible = sum(c.points for c in m.criteria)
    if m.points_possible is not None and abs(possible - m.points_possible) > 1e-9:
        out.append(
            f"The rubric totals {possible:g} points and the assignment is worth {m.points_possible:g}: the grade sent "
            "is the rubric's points."
        )
    for c in plan.changes:
        head = f"{c.student}: {_old(c.old_score, c.old_grade)} -> {'-' if c.new_points is None else c.new_points}"
        out.append(f"{head}  [{c.status}{': ' + c.reason if c.reason else ''}]")
        if verbose and c.status == "send":
            for line in c.lines:
                note = f" - {line.comment}" if line.comment else ""
                out.append(f"    {line.trait}: {line.points}/{line.max} ({line.by}){note}")
    counts = Counter(c.status for c in plan.changes)
    out.append("; ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "nothing to send")
    return "\n".join(out)


def preview_json(plan: PushPlan) -> dict[str, Any]:
    """The preview as JSON: the assignment and one entry per student."""
    m = plan.manifest
    return {
        "course_id": m.course_id,
        "assignment_id": m.assignment_id,
        "post_manually": m.post_manually,
        "changes": [
            {
                "essay_id": c.essay_id,
                "user_id": c.user_id,
                "student": c.student,
                "old_score": c.old_score,
                "old_grade": c.old_grade,
                "new_grade": c.new_points,
                "status": c.status,
                "reason": c.reason,
                "rubric_assessment": [line.__dict__ for line in c.lines],
                "comment": c.comment,
            }
            for c in plan.changes
        ],
    }
