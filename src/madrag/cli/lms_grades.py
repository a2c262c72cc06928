"""What ``madrag lms push`` reads of a scored run: the gradebook's rows (the teacher's decision per criterion,
else the AI's: :func:`madrag.server.results.run_grade_table` over the run and its reviews, the rows by
:func:`madrag.teacher.gradebook.student_row`) and each student's feedback (:func:`madrag.teacher.feedback.criteria`
with the teacher's edits), as the web app's gradebook and feedback pages read them."""

from __future__ import annotations

from pathlib import Path

from madrag.lms.push import ClassGrades
from madrag.server.pages.feedback import load_edits
from madrag.server.results import run_grade_table
from madrag.server.reviews import all_reviews, latest
from madrag.server.runs.library_runs import essay_records, read_run
from madrag.teacher import feedback, gradebook


def _text(item: dict[str, object]) -> str:
    """A criterion's feedback as one paragraph: the teacher's comment, what works, what next, why this score."""
    return " ".join(str(item.get(k) or "").strip() for k in ("comment", "works", "next", "why") if item.get(k)).strip()


def class_grades(run_dir: Path, roster: dict[str, dict[str, str]]) -> ClassGrades:
    """The run's first protocol's gradebook rows and feedback (see the module)."""
    view = read_run(run_dir)
    table = run_grade_table(view, latest(all_reviews(run_dir)))
    first = view.protocols[0] if view.protocols else ""
    criteria = [gradebook.Criterion(t.name, t.min, t.max) for t in view.rubric.traits]
    edits = load_edits(run_dir)
    rows, texts = [], {}
    for essay in view.essays:
        mine = {c.name: table[(first, essay.id, c.name)] for c in criteria}
        rows.append(gradebook.student_row(essay.id, roster.get(essay.id, {}), criteria, mine, "madrag"))
        scores = {s.trait: s for s in view.scores if s.essay_id == essay.id and s.protocol == first}
        records = essay_records(run_dir, sorted({s.record_key for s in scores.values() if s.record_key}))
        judges = {t: records.get(s.record_key) if s.record_key else None for t, s in scores.items()}
        items = feedback.criteria(essay.text, view.rubric.traits, judges, records, edits.get(essay.id, {}), mine)
        texts[essay.id] = {str(i["trait"]): _text(i) for i in items}
    return ClassGrades(criteria, rows, texts)
