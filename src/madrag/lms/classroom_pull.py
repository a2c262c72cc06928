"""One Google Classroom coursework pulled as madrag's inputs, in the same four files as a Canvas pull
(:func:`madrag.lms.manifest.save_pull`): ``essays.jsonl`` (per student the text of the first file handed in that
madrag reads: a Google Doc exported as plain text through Drive, or a ``.docx`` / ``.pdf`` / ``.txt`` read by
:mod:`madrag.data.documents`), ``rubric.json`` (the rubric madrag is given: Classroom's API hands no rubric madrag
can score by), ``roster.json`` (name, first and last name, email by essay id: what the Google Classroom grade file
needs) and ``classroom-pull.json`` (whether madrag's project made the coursework, and each submission's grades at
the pull). A student who turned nothing in, or whose files madrag cannot read, is listed as refused, with why."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from madrag.errors import InputError
from madrag.lms.classroom_client import ClassroomClient
from madrag.lms.manifest import Criterion, Pulled, PulledSubmission, PullManifest, gather, grade_number, save_pull
from madrag.rubric import Rubric

NOT_HANDED_IN = {"NEW", "CREATED", "RECLAIMED_BY_STUDENT", "SUBMISSION_STATE_UNSPECIFIED"}


def _who(student: dict[str, Any]) -> dict[str, str]:
    profile = student.get("profile") or {}
    name = profile.get("name") or {}
    return {
        "name": str(name.get("fullName") or ""),
        "first_name": str(name.get("givenName") or ""),
        "last_name": str(name.get("familyName") or ""),
        "email": str(profile.get("emailAddress") or ""),
        "classroom_id": str(student.get("userId") or ""),
    }


def submission_text(client: ClassroomClient, submission: dict[str, Any]) -> tuple[str, str]:
    """(text, where it came from) of one submission; an InputError saying why there is none."""
    state = str(submission.get("state") or "")
    if state in NOT_HANDED_IN:
        raise InputError(f"not turned in ({state})")
    attachments = (submission.get("assignmentSubmission") or {}).get("attachments") or []
    files = [a["driveFile"] for a in attachments if a.get("driveFile", {}).get("id")]
    reasons = []
    for f in files:
        try:
            text, source = client.file_text(str(f["id"]))
        except InputError as exc:
            reasons.append(str(exc))
            continue
        if text.strip():
            return text, source
        reasons.append(f"{f.get('title') or f['id']} holds no text")
    if not files:
        raise InputError("no Drive file among what was turned in (a link, a video or a form is not an essay)")
    raise InputError("; ".join(reasons))


def _record(submission: dict[str, Any], essay_id: str, source: str) -> PulledSubmission:
    return PulledSubmission(
        essay_id=essay_id,
        user_id=essay_id,
        submission_id=str(submission["id"]),
        submission_type=submission.get("courseWorkType"),
        source=source,
        score=grade_number(submission.get("assignedGrade")),
        draft=grade_number(submission.get("draftGrade")),
        state=submission.get("state"),
    )


def pull_classroom(client: ClassroomClient, course_id: str, coursework_id: str, folder: Path, rubric: Rubric) -> Pulled:
    """Pull the coursework's submissions and roster into ``folder`` with ``rubric`` (see the module)."""
    work = client.coursework(course_id, coursework_id)
    students = {str(s["userId"]): s for s in client.students(course_id)}
    folder.mkdir(parents=True, exist_ok=True)
    submissions = sorted(client.submissions(course_id, coursework_id), key=lambda s: str(s["userId"]))
    # a submission of no student of the course: a teacher's own test submission, or a student no longer in it
    found = [
        (str(s["userId"]), s, _who(students[str(s["userId"])])) for s in submissions if str(s["userId"]) in students
    ]
    gathered = gather(found, lambda s: submission_text(client, s), _record)
    manifest = PullManifest(
        lms="classroom",
        course_id=course_id,
        course_name=str(client.course(course_id).get("name") or ""),
        assignment_id=coursework_id,
        assignment_name=str(work.get("title") or ""),
        points_possible=None if work.get("maxPoints") is None else float(work["maxPoints"]),
        made_by_madrag=bool(work.get("associatedWithDeveloper", False)),
        pulled_at=datetime.now(UTC).isoformat(timespec="seconds"),
        criteria=[Criterion(trait=t.name, criterion_id="", ratings={}, points=float(t.max)) for t in rubric.traits],
        submissions=gathered.submissions,
        refused=gathered.refused,
    )
    return save_pull(folder, gathered, rubric, manifest)
