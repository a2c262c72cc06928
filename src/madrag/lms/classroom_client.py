"""Google Classroom and Drive through Google's own client, google-api-python-client (``pip install
'madrag[lms]'``), its services built from the discovery documents the package ships (nothing is fetched to describe
the API). The calls madrag makes, each retried with backoff (:mod:`.calls`) on a 429, a 5xx, a 403 rate limit or a
dropped connection; a 401 / 403 / 404 one sentence. Answers are handed on as plain dicts (Google's JSON).

Google lets only the Cloud project that made a coursework change its grades or return its submissions: any other
project's ``studentSubmissions.patch`` / ``return`` is answered 403 ``@ProjectPermissionDenied``, which madrag says
plainly (:class:`NotMadragsCoursework`): such a coursework's grades go back through the Google Classroom grade
file (:func:`madrag.teacher.gradebook.classroom_csv`)."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any, TypeVar

from madrag.data.documents import DOCUMENT_SUFFIXES, document_text
from madrag.errors import InputError
from madrag.extras import require
from madrag.lms.calls import Backoff, Judge, LmsError, with_retries
from madrag.lms.manifest import LmsId, PullManifest
from madrag.lms.push import Change

T = TypeVar("T")
GOOGLE_DOC = "application/vnd.google-apps.document"
RATE_LIMITS = {"rateLimitExceeded", "userRateLimitExceeded", "quotaExceeded"}
NOT_MADRAGS = (
    "Google Classroom lets only the Cloud project that made a coursework change its grades, and this one was made "
    "in Classroom's own pages (403 ProjectPermissionDenied): its grades go back through the Google Classroom grade "
    "file madrag writes (classroom-grades.csv: `madrag lms push` writes it beside the run, the gradebook page "
    "downloads it); to have madrag send grades directly, create the assignment with `madrag lms classroom create`"
)


class NotMadragsCoursework(LmsError):
    """A coursework made by another Cloud project than madrag's (Classroom's own pages): no grade can be sent."""


def _error(exc: Exception) -> tuple[int | None, str, set[str]]:
    """(HTTP status, Google's message, the reasons of its ``errors``) of a failed call (None for no answer)."""
    resp = getattr(exc, "resp", None)
    if resp is None:
        return None, str(exc), set()
    try:
        body = json.loads(getattr(exc, "content", b"") or b"{}").get("error", {})
    except (ValueError, AttributeError):
        body = {}
    message = str(body.get("message") or getattr(exc, "reason", "") or "")
    return int(resp.status), message, {str(e.get("reason", "")) for e in body.get("errors", []) or []}


def _refreshing_refused(exc: Exception) -> bool:
    """google-auth's RefreshError: Google would not renew the sign-in (revoked, expired, the client deleted)."""
    return exc.__class__.__name__ == "RefreshError" and exc.__class__.__module__.startswith("google.auth")


def _transient(exc: Exception) -> bool:
    status, _message, reasons = _error(exc)
    if status is None:  # no answer: a dropped connection, a timeout
        return not _refreshing_refused(exc) and (
            isinstance(exc, OSError | ConnectionError)
            or exc.__class__.__module__.startswith(("httplib2", "google.auth"))
        )
    return status == 429 or status >= 500 or (status == 403 and bool(reasons & RATE_LIMITS))


def _refusal(exc: Exception, what: str) -> LmsError | None:
    if _transient(exc):
        return None
    status, message, _ = _error(exc)
    if status == 401 or _refreshing_refused(exc):
        return LmsError(f"Google refused the kept sign-in while {what} (401): run `madrag lms classroom connect` again")
    if status == 403 and "@ProjectPermissionDenied" in message:
        return NotMadragsCoursework(NOT_MADRAGS)
    if status == 403:
        return LmsError(
            f"Google refused {what} (403: {message[:200]}): the signed-in account must teach the course, and the "
            "school's Workspace must allow the Classroom API"
        )
    if status == 404:
        return LmsError(f"Google Classroom has no such course, coursework or file while {what} (404): check the ids")
    return None


class ClassroomClient:
    """The calls madrag makes to Google Classroom and Drive, over two built services."""

    def __init__(
        self, classroom: Any, drive: Any, backoff: Backoff | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._classroom, self._drive = classroom, drive
        self.backoff = backoff or Backoff()
        self.sleep = sleep
        self.judge = Judge("Google Classroom", _transient, _refusal)

    @classmethod
    def signed_in(cls, credentials: Any, transport: Any = None) -> ClassroomClient:
        """The services built from the discovery documents google-api-python-client ships, each request authorised
        by the kept credentials (``transport``: the HTTP object under them, httplib2's by default)."""
        discovery = require("lms", "googleapiclient.discovery")
        authorized = require("lms", "google_auth_httplib2").AuthorizedHttp
        http = authorized(credentials, http=transport) if transport is not None else authorized(credentials)
        kw = {"http": http, "static_discovery": True, "cache_discovery": False}
        return cls(discovery.build("classroom", "v1", **kw), discovery.build("drive", "v3", **kw))

    def call(self, what: str, request: Callable[[], Any]) -> Any:
        """``request().execute()``, retried (:func:`madrag.lms.calls.with_retries`)."""
        return with_retries(what, lambda: request().execute(), self.judge, self.backoff, self.sleep)

    def _listed(self, what: str, key: str, collection: Any, **params: Any) -> list[dict[str, Any]]:
        """Every item of a listed collection, page by page (``nextPageToken``)."""
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self.call(what, functools.partial(collection.list, **params, pageToken=token))
            out.extend(page.get(key, []) or [])
            token = page.get("nextPageToken")
            if not token:
                return out

    def _work(self) -> Any:
        return self._classroom.courses().courseWork()

    def courses(self) -> list[dict[str, Any]]:
        """The active courses the signed-in account teaches."""
        courses = self._classroom.courses()
        return self._listed("listing courses", "courses", courses, teacherId="me", courseStates=["ACTIVE"])

    def course(self, course_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self.call(
            f"opening course {course_id}", lambda: self._classroom.courses().get(id=course_id)
        )
        return found

    def courseworks(self, course_id: str) -> list[dict[str, Any]]:
        return self._listed(
            f"listing the coursework of course {course_id}", "courseWork", self._work(), courseId=course_id
        )

    def coursework(self, course_id: str, coursework_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self.call(
            f"opening coursework {coursework_id}", lambda: self._work().get(courseId=course_id, id=coursework_id)
        )
        return found

    def create_coursework(self, course_id: str, title: str, description: str, max_points: int) -> dict[str, Any]:
        """A published assignment made by madrag's project, so madrag may send its grades."""
        body = {
            "title": title,
            "description": description,
            "workType": "ASSIGNMENT",
            "state": "PUBLISHED",
            "maxPoints": max_points,
        }
        made: dict[str, Any] = self.call(
            f"creating the assignment {title!r}", lambda: self._work().create(courseId=course_id, body=body)
        )
        return made

    def students(self, course_id: str) -> list[dict[str, Any]]:
        """The course's students: ``userId`` and ``profile`` (name, email)."""
        students = self._classroom.courses().students()
        return self._listed(f"listing the students of course {course_id}", "students", students, courseId=course_id)

    def submissions(self, course_id: LmsId, coursework_id: LmsId) -> list[dict[str, Any]]:
        return self._listed(
            f"listing the submissions of coursework {coursework_id}",
            "studentSubmissions",
            self._work().studentSubmissions(),
            courseId=str(course_id),
            courseWorkId=str(coursework_id),
        )

    def file_text(self, file_id: str) -> tuple[str, str]:
        """(text, name) of a Drive file handed in: a Google Doc exported as plain text, a .docx / .pdf / .txt
        downloaded and read by madrag's readers; an InputError for any other file."""
        files = self._drive.files()
        meta = self.call(f"opening Drive file {file_id}", lambda: files.get(fileId=file_id, fields="id,name,mimeType"))
        name = str(meta.get("name") or file_id)
        if meta.get("mimeType") == GOOGLE_DOC:
            data = self.call(f"exporting {name}", lambda: files.export(fileId=file_id, mimeType="text/plain"))
            text = bytes(data).decode("utf-8-sig").replace("\r\n", "\n")
            return text.strip(), f"{name} (Google Doc)"
        if PurePosixPath(name).suffix.lower() not in DOCUMENT_SUFFIXES:
            raise InputError(f"{name}: madrag reads Google Docs and .docx, .pdf or .txt files")
        data = self.call(f"downloading {name}", lambda: files.get_media(fileId=file_id))
        return document_text(bytes(data), name), name

    def current_state(self, manifest: PullManifest) -> dict[LmsId, dict[str, Any]]:
        """Each student's submission now (``score`` its assignedGrade, ``draft`` its draftGrade, its state), by
        user id."""
        return {
            str(s["userId"]): {
                "id": s.get("id"),
                "score": s.get("assignedGrade"),
                "draft": s.get("draftGrade"),
                "state": s.get("state"),
            }
            for s in self.submissions(manifest.course_id, manifest.assignment_id)
        }

    def send(self, manifest: PullManifest, change: Change) -> None:
        """The student's grade as assignedGrade and draftGrade (``studentSubmissions.patch`` with its
        ``updateMask``), then the submission returned; read first, so what a killed or failed try already did
        is not done again."""
        ids = {"courseId": str(manifest.course_id), "courseWorkId": str(manifest.assignment_id)}
        sub_id = str(manifest.by_essay()[change.essay_id].submission_id)
        subs = self._work().studentSubmissions()
        who = f"the grade of {change.student}"
        now = self.call(f"reading {who}", lambda: subs.get(**ids, id=sub_id))
        body = change.payload()
        if any(now.get(k) != v for k, v in body.items()):
            self.call(
                f"sending {who}",
                lambda: subs.patch(**ids, id=sub_id, updateMask="assignedGrade,draftGrade", body=body),
            )
        if now.get("state") != "RETURNED":
            self.call(f"returning {who}'s work", lambda: subs.return_(**ids, id=sub_id, body={}))
