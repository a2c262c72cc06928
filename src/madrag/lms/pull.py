"""One Canvas assignment pulled as madrag's inputs, in a folder: ``essays.jsonl`` (one essay per student: the
text entry's text, HTML stripped, or the text of the ``.docx`` / ``.pdf`` / ``.txt`` attached, read by
:mod:`madrag.data.documents`), ``rubric.json`` (the assignment's rubric, :mod:`madrag.lms.rubric_import`),
``roster.json`` (each student's name, SIS id, login and email, by essay id: the gradebook's identifiers) and
``canvas-pull.json`` (:mod:`madrag.lms.manifest`). A student without a submission, or whose file holds no text
madrag reads, is listed in the manifest as refused, with why; the pull goes on."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from madrag.data.documents import DOCUMENT_SUFFIXES, document_text, html_text
from madrag.errors import InputError
from madrag.lms.client import CanvasClient
from madrag.lms.manifest import Criterion, Pulled, PulledSubmission, PullManifest, gather, grade_number, save_pull
from madrag.lms.rubric_import import import_rubric


def _who(user: dict[str, Any]) -> dict[str, str]:
    """A student's identifiers as the gradebook reads them (teacher/columns.py's keys)."""
    return {
        "name": str(user.get("name") or ""),
        "sortable_name": str(user.get("sortable_name") or ""),
        "email": str(user.get("email") or ""),
        "sis_id": str(user.get("sis_user_id") or ""),
        "login_id": str(user.get("login_id") or ""),
        "canvas_id": str(user.get("id") or ""),
    }


def submission_text(client: CanvasClient, submission: Any) -> tuple[str, str]:
    """(text, where it came from) of one submission; an InputError saying why there is none."""
    kind = getattr(submission, "submission_type", None)
    if kind == "online_text_entry":
        text = html_text(str(getattr(submission, "body", "") or ""))[1].strip()
        if not text:
            raise InputError("the text entry is empty")
        return text, "text entry"
    if kind == "online_upload":
        files = list(getattr(submission, "attachments", []) or [])
        readable = [
            f for f in files if PurePosixPath(str(getattr(f, "filename", ""))).suffix.lower() in DOCUMENT_SUFFIXES
        ]
        if not readable:
            names = ", ".join(str(getattr(f, "display_name", "")) for f in files) or "no file"
            raise InputError(f"no .docx, .pdf or .txt among the files handed in ({names})")
        chosen = readable[0]
        name = str(getattr(chosen, "display_name", "") or getattr(chosen, "filename", ""))
        return document_text(client.download(chosen), str(getattr(chosen, "filename", name))), name
    if kind is None or getattr(submission, "workflow_state", "") == "unsubmitted":
        raise InputError("nothing handed in")
    raise InputError(f"a {kind} submission: madrag reads text entries and uploaded documents")


def _record(submission: Any, essay_id: str, source: str) -> PulledSubmission:
    return PulledSubmission(
        essay_id=essay_id,
        user_id=int(submission.user_id),
        submission_id=getattr(submission, "id", None),
        attempt=getattr(submission, "attempt", None),
        submission_type=getattr(submission, "submission_type", None),
        source=source,
        score=grade_number(getattr(submission, "score", None)),
        grade=getattr(submission, "grade", None),
        excused=bool(getattr(submission, "excused", False)),
        graded_at=getattr(submission, "graded_at", None),
    )


def pull(client: CanvasClient, course_id: int, assignment_id: int, folder: Path, canvas_url: str) -> Pulled:
    """Pull the assignment's submissions, roster and rubric into ``folder`` (see the module)."""
    assignment = client.assignment(course_id, assignment_id)
    rubric, links = import_rubric(assignment)
    students = {int(u["id"]): u for u in client.students(course_id)}
    folder.mkdir(parents=True, exist_ok=True)
    submissions = sorted(client.submissions(course_id, assignment_id), key=lambda s: int(s.user_id))
    # a submission of no student of the course: a test student, or one no longer enrolled
    found = [(int(s.user_id), s, _who(students[int(s.user_id)])) for s in submissions if int(s.user_id) in students]
    gathered = gather(found, lambda s: submission_text(client, s), _record)
    manifest = PullManifest(
        canvas_url=canvas_url,
        course_id=course_id,
        course_name=str(client.course(course_id).get("name") or ""),
        assignment_id=assignment_id,
        assignment_name=str(assignment.get("name") or ""),
        points_possible=grade_number(assignment.get("points_possible")),
        post_manually=bool(assignment.get("post_manually", False)),
        pulled_at=datetime.now(UTC).isoformat(timespec="seconds"),
        criteria=[Criterion.of(link) for link in links],
        submissions=gathered.submissions,
        refused=gathered.refused,
    )
    return save_pull(folder, gathered, rubric, manifest)
