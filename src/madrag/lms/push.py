"""A run's grades back to the LMS: a preview of every change first (student, the LMS's grade now, the new grade,
the rubric assessment per criterion with points and comment), then each student's grade sent by the LMS's client
(its ``send``): Canvas, one ``PUT`` of ``submission[posted_grade]``,
``rubric_assessment[criterion][points|rating_id|comments]`` and ``comment[text_comment]`` (the feedback); Google
Classroom, ``assignedGrade`` and ``draftGrade`` patched, then the submission returned.

The grades are the gradebook's rows (:mod:`madrag.teacher.gradebook`; each grade the teacher's decision, else the
AI's, by :mod:`madrag.teacher.grades`). What is never sent: a student with a criterion nobody could grade; a
student with a grade nobody decided (an AI score not accepted or replaced) unless ``include_undecided``; a
student whose grade in the LMS changed since the pull (a conflict: shown, left alone); a Classroom coursework
made in Classroom's own pages (Google lets only the project that made it change its grades: ``by file``, the
Classroom grade file carries them). Posting is not touched: where a Canvas assignment posts grades manually they
stay hidden until the teacher posts them. The journal (:mod:`madrag.lms.journal`) makes a rerun send each student
once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from madrag.errors import InputError
from madrag.lms.journal import Entry, Journal, digest, our_scores, sent_digests
from madrag.lms.manifest import Lms, LmsId, PulledSubmission, PullManifest, grade_number
from madrag.teacher.gradebook import Criterion, StudentRow

Status = Literal["send", "sent before", "conflict", "undecided", "missing", "by file"]
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
    user_id: LmsId
    student: str
    old_score: float | None
    old_grade: str | None
    new_points: int | None
    lines: list[Line]
    comment: str
    status: Status
    reason: str = ""
    lms: Lms = "canvas"

    def payload(self) -> dict[str, Any]:
        """What is sent: Canvas, the fields of the ``PUT`` (canvasapi writes them as ``submission[posted_grade]``
        ...); Classroom, the ``StudentSubmission`` fields patched (the total only: its API takes no comment, nor
        rubric grades on an assignment without a Classroom rubric)."""
        if self.lms == "classroom":
            points = None if self.new_points is None else float(self.new_points)
            return {"assignedGrade": points, "draftGrade": points}
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
    said = [f"{line.trait}: {line.points}/{line.max}" + (f". {line.comment}" if line.comment else "") for line in lines]
    return "\n".join([f"Feedback on {manifest.assignment_name or 'your essay'}:", *said, f"Total: {total}/{possible}"])


def _changed(pulled: PulledSubmission, now: dict[str, Any]) -> bool:
    return (
        grade_number(now.get("score")) != pulled.score
        or grade_number(now.get("draft")) != pulled.draft
        or now.get("grade") != pulled.grade
        or bool(now.get("excused", False)) != pulled.excused
    )


def _ours(pulled: PulledSubmission, now: dict[str, Any], entries: list[Entry]) -> bool:
    """Whether the grade the LMS holds now is one madrag sent (or began to send): its score, and draft if any."""
    sent = our_scores(entries).get(pulled.user_id, set())
    held = [v for v in (grade_number(now.get("score")), grade_number(now.get("draft"))) if v is not None]
    return bool(held) and all(v in sent for v in held)


def _shown(now: dict[str, Any]) -> str | None:
    """The LMS's grade now as the preview shows it (Classroom: a draft grade not yet returned says so)."""
    draft = grade_number(now.get("draft"))
    if now.get("grade") or draft is None or now.get("score") is not None:
        return now.get("grade")
    return f"draft {draft:g}"


def _status(
    row: StudentRow, pulled: PulledSubmission, now: dict[str, Any], entries: list[Entry], change_digest: str, lms: str
) -> tuple[Status, str]:
    if row.total is None:
        return "missing", "a criterion has no grade"
    if sent_digests(entries).get(pulled.user_id) == change_digest:
        return "sent before", "sent already, exactly this (the push journal says so)"
    if not now:
        return "conflict", f"no longer in {lms} (the student left the course, or the submission was deleted)"
    if now.get("state") == "RECLAIMED_BY_STUDENT":
        return "conflict", "taken back by the student since the pull (unsubmitted): pull again"
    if now.get("attempt") != pulled.attempt:
        return (
            "conflict",
            f"handed in again since the pull (attempt {pulled.attempt} -> {now.get('attempt')}): pull again",
        )
    if bool(now.get("excused", False)):
        return "conflict", "excused in Canvas: left as it is"
    if _changed(pulled, now) and not _ours(pulled, now, entries):
        was = _shown({"score": pulled.score, "draft": pulled.draft, "grade": pulled.grade})
        return (
            "conflict",
            f"changed in {lms} since the pull (was {_grade_text(pulled.score, was)}, "
            f"now {_grade_text(grade_number(now.get('score')), _shown(now))})",
        )
    return "send", ""


def _grade_text(score: float | None, grade: str | None) -> str:
    return grade or ("no grade" if score is None else f"{score:g}")


BY_FILE = "the coursework was made in Classroom's own pages: the grade goes back in the Google Classroom file"


def plan_push(
    grades: ClassGrades,
    manifest: PullManifest,
    current: dict[LmsId, dict[str, Any]],
    journal: Journal,
    include_undecided: bool = False,
) -> PushPlan:
    """Every student's change, with what will be sent and what will not and why (``current``: each student's
    submission in the LMS now, by user id)."""
    pulled, entries = manifest.by_essay(), journal.entries(manifest.assignment_id)
    sendable = manifest.lms != "classroom" or manifest.made_by_madrag is not False
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
            row.essay_id,
            found.user_id,
            row.name,
            grade_number(now.get("score")),
            _shown(now),
            row.total,
            lines,
            text,
            "send",
            lms=manifest.lms,
        )
        status, reason = _status(row, found, now, entries, digest(change.payload()), manifest.lms_name)
        if status == "send" and not row.reviewed and not include_undecided:
            status, reason = (
                "undecided",
                "not every criterion decided by the teacher (--include-undecided sends the AI's)",
            )
        if status == "send" and not sendable:
            status, reason = "by file", BY_FILE
        changes.append(Change(**{**change.__dict__, "status": status, "reason": reason}))
    return PushPlan(manifest, changes)


class Sender(Protocol):
    """An LMS's client as a push uses it (:class:`madrag.lms.client.CanvasClient`,
    :class:`madrag.lms.classroom_client.ClassroomClient`)."""

    def current_state(self, manifest: PullManifest) -> dict[LmsId, dict[str, Any]]:
        """Each student's submission in the LMS now (score, grade, excused, attempt ...), by user id."""
        ...

    def send(self, manifest: PullManifest, change: Change) -> None:
        """Send one student's change, retried on what a retry may fix, never twice what a failed try did."""
        ...


def current_state(client: Sender, manifest: PullManifest) -> dict[LmsId, dict[str, Any]]:
    """Each student's submission in the LMS now, by user id (the client's own reading)."""
    return client.current_state(manifest)


@dataclass
class PushResult:
    sent: list[Change] = field(default_factory=list)
    left: list[Change] = field(default_factory=list)


def push(
    client: Sender,
    plan: PushPlan,
    run_dir: Path,
    after_each: Callable[[Change], None] | None = None,
) -> PushResult:
    """Send every change of ``plan`` whose status is ``send``, each journalled before and after."""
    journal, result = Journal(run_dir, plan.manifest.lms), PushResult()
    for change in plan.changes:
        if change.status not in WILL_SEND or change.new_points is None:
            result.left.append(change)
            continue
        mark = digest(change.payload())
        journal.write(Entry("sending", plan.manifest.assignment_id, change.user_id, float(change.new_points), mark))
        client.send(plan.manifest, change)
        if after_each is not None:
            after_each(change)
        journal.write(Entry("sent", plan.manifest.assignment_id, change.user_id, float(change.new_points), mark))
        result.sent.append(change)
    return result
