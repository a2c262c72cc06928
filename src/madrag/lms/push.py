"""A run's grades back to Canvas: a preview of every change first (student, Canvas's grade now, the new grade,
the rubric assessment per criterion with points and comment), then, for each student, one ``PUT`` of
``submission[posted_grade]``, ``rubric_assessment[criterion][points|rating_id|comments]`` and
``comment[text_comment]`` (the feedback).

The grades are the gradebook's rows (:mod:`madrag.teacher.gradebook`; each grade the teacher's decision, else the
AI's, by :mod:`madrag.teacher.grades`). What is never sent: a student with a criterion nobody could grade; a
student with a grade nobody decided (an AI score not accepted or replaced) unless ``include_undecided``; a
student whose Canvas grade changed since the pull (a conflict: shown, left alone). Posting is not touched: where
the assignment posts grades manually they stay hidden until the teacher posts them in Canvas. The journal
(:mod:`madrag.lms.journal`) makes a rerun send each student once, and a comment already on the submission is
never added twice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from madrag.errors import InputError
from madrag.lms.client import CanvasClient, LmsTransient
from madrag.lms.journal import Entry, Journal, digest, our_scores, sent_digests
from madrag.lms.manifest import PulledSubmission, PullManifest
from madrag.teacher.gradebook import Criterion, StudentRow

Status = Literal["send", "sent before", "conflict", "undecided", "missing"]
WILL_SEND: tuple[Status, ...] = ("send",)


@dataclass(frozen=True)
class ClassGrades:
    """What a push reads of a run: the criteria, the gradebook's rows and each student's feedback per criterion
    (essay id -> trait -> text, the teacher's comment where she wrote one)."""

    criteria: list[Criterion]
    rows: list[StudentRow]
    feedback: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Line:
    """One criterion of a student's rubric assessment."""

    trait: str
    criterion_id: str
    points: int | None
    max: int
    comment: str
    rating_id: str | None
    by: str


@dataclass(frozen=True)
class Change:
    """One student's line of the preview, and what is sent when ``status`` is ``send``."""

    essay_id: str
    user_id: int
    student: str
    old_score: float | None
    old_grade: str | None
    new_points: int | None
    lines: list[Line]
    comment: str
    status: Status
    reason: str = ""

    def payload(self) -> dict[str, Any]:
        """The fields of the ``PUT`` (canvasapi writes them as ``submission[posted_grade]`` ...)."""
        assessment: dict[str, dict[str, Any]] = {}
        for line in self.lines:
            item: dict[str, Any] = {"points": line.points, "comments": line.comment}
            if line.rating_id:
                item["rating_id"] = line.rating_id
            assessment[line.criterion_id] = item
        return {
            "submission": {"posted_grade": str(self.new_points)},
            "rubric_assessment": assessment,
            "comment": {"text_comment": self.comment},
        }


@dataclass(frozen=True)
class PushPlan:
    manifest: PullManifest
    changes: list[Change]

    def to_send(self) -> list[Change]:
        return [c for c in self.changes if c.status in WILL_SEND]


def _lines(row: StudentRow, manifest: PullManifest, feedback: dict[str, str], criteria: list[Criterion]) -> list[Line]:
    links = {c.trait: c for c in manifest.criteria}
    out = []
    for c in criteria:
        grade, link = row.grades[c.name], links[c.name]
        text = feedback.get(c.name, "").strip() or grade.comment.strip()
        rating = None if grade.points is None else link.ratings.get(grade.points)
        by = "teacher" if grade.teacher else "AI, accepted" if grade.reviewed else "AI"
        out.append(Line(c.name, link.criterion_id, grade.points, c.max, text, rating, by))
    return out


def comment_text(manifest: PullManifest, lines: list[Line], total: int | None, possible: int) -> str:
    """The submission comment: the assignment, each criterion's points and feedback, the total."""
    parts = [f"Feedback on {manifest.assignment_name or 'your essay'}:"]
    for line in lines:
        parts.append(f"{line.trait}: {line.points}/{line.max}" + (f". {line.comment}" if line.comment else ""))
    parts.append(f"Total: {total}/{possible}")
    return "\n".join(parts)


def _changed(pulled: PulledSubmission, now: dict[str, Any]) -> bool:
    score = now.get("score")
    return (
        (None if score is None else float(score)) != pulled.score
        or now.get("grade") != pulled.grade
        or bool(now.get("excused", False)) != pulled.excused
    )


def _status(
    row: StudentRow, pulled: PulledSubmission, now: dict[str, Any], entries: list[Entry], change_digest: str
) -> tuple[Status, str]:
    if row.total is None:
        return "missing", "a criterion has no grade"
    if sent_digests(entries).get(pulled.user_id) == change_digest:
        return "sent before", "this grade and feedback were sent already"
    if not now:
        return "conflict", "no longer in Canvas (the student left the course, or the submission was deleted)"
    if now.get("attempt") != pulled.attempt:
        return (
            "conflict",
            f"handed in again since the pull (attempt {pulled.attempt} -> {now.get('attempt')}): pull again",
        )
    if bool(now.get("excused", False)):
        return "conflict", "excused in Canvas: left as it is"
    score = now.get("score")
    ours = score is not None and float(score) in our_scores(entries).get(pulled.user_id, set())
    if _changed(pulled, now) and not ours:
        return (
            "conflict",
            f"changed in Canvas since the pull (was {pulled.grade or 'no grade'}, "
            f"now {now.get('grade') or 'no grade'})",
        )
    return "send", ""


def plan_push(
    grades: ClassGrades,
    manifest: PullManifest,
    current: dict[int, dict[str, Any]],
    journal: Journal,
    include_undecided: bool = False,
) -> PushPlan:
    """Every student's change, with what will be sent and what will not and why (``current``: each student's
    submission in Canvas now, by user id)."""
    pulled, entries = manifest.by_essay(), journal.entries(manifest.assignment_id)
    linked = {c.trait for c in manifest.criteria}
    if {c.name for c in grades.criteria} != linked:
        raise InputError(
            f"the run's rubric ({', '.join(c.name for c in grades.criteria)}) is not the pulled assignment's "
            f"({', '.join(sorted(linked))}): score the essays with the rubric.json of the pull"
        )
    changes = []
    for row in grades.rows:
        found = pulled.get(row.essay_id)
        if found is None:
            continue
        lines = _lines(row, manifest, grades.feedback.get(row.essay_id, {}), grades.criteria)
        text = comment_text(manifest, lines, row.total, row.possible)
        now = current.get(found.user_id, {})
        change = Change(
            row.essay_id, found.user_id, row.name, _score(now), now.get("grade"), row.total, lines, text, "send"
        )
        status, reason = _status(row, found, now, entries, digest(change.payload()))
        if status == "send" and not row.reviewed and not include_undecided:
            status, reason = (
                "undecided",
                "not every criterion decided by the teacher (--include-undecided sends the AI's)",
            )
        changes.append(Change(**{**change.__dict__, "status": status, "reason": reason}))
    return PushPlan(manifest, changes)


def _score(now: dict[str, Any]) -> float | None:
    score = now.get("score")
    return None if score is None else float(score)


def current_state(client: CanvasClient, manifest: PullManifest) -> dict[int, dict[str, Any]]:
    """Each student's submission in Canvas now (score, grade, excused, comments), by user id."""
    found = client.submissions(manifest.course_id, manifest.assignment_id)
    return {int(s.user_id): {k: v for k, v in vars(s).items() if not k.startswith("_")} for s in found}


@dataclass
class PushResult:
    sent: list[Change] = field(default_factory=list)
    left: list[Change] = field(default_factory=list)


def _has_comment(submission: Any, text: str) -> bool:
    return any(
        str(c.get("comment", "")).strip() == text.strip() for c in getattr(submission, "submission_comments", []) or []
    )


def _send_one(client: CanvasClient, manifest: PullManifest, change: Change) -> None:
    """One student's grade, assessment and comment, retried on what a retry may fix; before each try it reads
    the submission, so a comment a failed try already added is not added again."""
    wait = client.backoff.first_s
    for attempt in range(1, client.backoff.tries + 1):
        submission = client.submission(manifest.course_id, manifest.assignment_id, change.user_id)
        fields = change.payload()
        if _has_comment(submission, change.comment):
            fields.pop("comment")
        try:
            client.grade(submission, f"sending the grade of {change.student}", fields)
            return
        except LmsTransient:
            if attempt == client.backoff.tries:
                raise
            client.sleep(wait)
            wait = min(wait * 2, client.backoff.max_s)


def push(
    client: CanvasClient,
    plan: PushPlan,
    run_dir: Path,
    after_each: Callable[[Change], None] | None = None,
) -> PushResult:
    """Send every change of ``plan`` whose status is ``send``, each journalled before and after."""
    journal, result = Journal(run_dir), PushResult()
    for change in plan.changes:
        if change.status not in WILL_SEND or change.new_points is None:
            result.left.append(change)
            continue
        mark = digest(change.payload())
        journal.write(Entry("sending", plan.manifest.assignment_id, change.user_id, float(change.new_points), mark))
        _send_one(client, plan.manifest, change)
        if after_each is not None:
            after_each(change)
        journal.write(Entry("sent", plan.manifest.assignment_id, change.user_id, float(change.new_points), mark))
        result.sent.append(change)
    return result
