"""Canvas over its REST API through canvasapi (``pip install 'madrag[lms]'``): the calls madrag makes, each
retried with backoff on a 429, Canvas's 403 ``Rate Limit Exceeded``, a 5xx or a dropped connection, and a 401 or
403 turned into one sentence. Answers are handed on as plain dicts (Canvas's JSON), so the rest of
:mod:`madrag.lms` never touches a canvasapi object."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from madrag.errors import MadragError
from madrag.extras import require
from madrag.lms.credentials import CanvasCredentials

T = TypeVar("T")
SUBMISSION_INCLUDES = ["submission_comments", "rubric_assessment", "user"]
_STATUS = re.compile(r"status code (\d{3})")


class LmsError(MadragError):
    """Canvas refused or could not answer a request; one line saying what to do."""


class LmsTransient(LmsError):
    """An answer a retry may change (429, 5xx, a dropped connection), after the retries ran out."""


@dataclass(frozen=True)
class Backoff:
    """How often and how long a failed call is retried: ``tries`` in all, waiting ``first_s``, doubled each
    time, at most ``max_s``."""

    tries: int = 5
    first_s: float = 1.0
    max_s: float = 30.0


def _transient(exc: Exception, errors: Any) -> bool:
    if isinstance(exc, errors.RateLimitExceeded):
        return True
    if isinstance(exc, errors.Forbidden):
        return "rate limit exceeded" in str(exc).lower()
    if isinstance(exc, errors.CanvasException):
        found = _STATUS.search(str(exc))
        return found is not None and found.group(1).startswith("5")
    return exc.__class__.__module__.startswith("requests") or isinstance(exc, ConnectionError)


def _refusal(exc: Exception, errors: Any, what: str) -> LmsError | None:
    """The one sentence for a 401 / 403 / 404 (None for anything else, a rate limit's 429 / 403 too)."""
    if _transient(exc, errors):
        return None
    if isinstance(exc, errors.InvalidAccessToken | errors.Unauthorized):
        return LmsError(
            f"Canvas refused the access token while {what} (401): it is wrong, expired or deleted, or its user may "
            "not do this; make a new one under Account > Settings and run `madrag lms connect` again"
        )
    if isinstance(exc, errors.Forbidden):
        return LmsError(
            f"Canvas refused {what} (403): the token's user is not allowed to do this in this course (a teacher's "
            "or TA's token with the right to grade is needed)"
        )
    if isinstance(exc, errors.ResourceDoesNotExist):
        return LmsError(f"Canvas has no such course, assignment or student while {what} (404): check the ids")
    return None


def plain(obj: Any) -> dict[str, Any]:
    """A canvasapi object's Canvas fields (its requester, which holds the token, and other private parts left
    out)."""
    return {k: v for k, v in vars(obj).items() if not k.startswith("_")}


class CanvasClient:
    """The calls madrag makes to one Canvas instance, with its credentials."""

    def __init__(
        self, creds: CanvasCredentials, backoff: Backoff | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._api = require("lms", "canvasapi")
        self._errors = require("lms", "canvasapi.exceptions")
        self._canvas = self._api.Canvas(creds.url, creds.token.get_secret_value())
        self.backoff = backoff or Backoff()
        self.sleep = sleep

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()``, retried on what a retry may fix; a 401/403/404 or the last failure as one LmsError line."""
        wait = self.backoff.first_s
        for attempt in range(1, self.backoff.tries + 1):
            try:
                return fn()
            except Exception as exc:  # canvasapi's and requests' exceptions
                refused = _refusal(exc, self._errors, what)
                if refused is not None:
                    raise refused from None
                if not _transient(exc, self._errors):
                    raise LmsError(f"Canvas answered an error while {what}: {str(exc)[:300]}") from None
                if attempt == self.backoff.tries:
                    raise LmsTransient(
                        f"Canvas did not answer while {what} after {attempt} tries ({str(exc)[:200]}): try again later"
                    ) from None
                self.sleep(wait)
                wait = min(wait * 2, self.backoff.max_s)
        raise AssertionError("unreachable")

    def courses(self) -> list[dict[str, Any]]:
        """The courses the token's user teaches."""
        return self.call(
            "listing courses",
            lambda: [plain(c) for c in self._canvas.get_courses(enrollment_type="teacher")],
        )

    def _course(self, course_id: int) -> Any:
        return self.call(f"opening course {course_id}", lambda: self._canvas.get_course(course_id))

    def course(self, course_id: int) -> dict[str, Any]:
        return plain(self._course(course_id))

    def _assignment(self, course_id: int, assignment_id: int) -> Any:
        course = self._course(course_id)
        return self.call(
            f"opening assignment {assignment_id}", lambda: course.get_assignment(assignment_id, include=["rubric"])
        )

    def assignments(self, course_id: int) -> list[dict[str, Any]]:
        course = self._course(course_id)
        return self.call(
            f"listing the assignments of course {course_id}", lambda: [plain(a) for a in course.get_assignments()]
        )

    def assignment(self, course_id: int, assignment_id: int) -> dict[str, Any]:
        """The assignment's JSON, its ``rubric`` and ``rubric_settings`` in it when it has a rubric."""
        return plain(self._assignment(course_id, assignment_id))

    def students(self, course_id: int) -> list[dict[str, Any]]:
        """The course's students: id, name, sortable name, SIS user id, login id, email (what the token may see)."""
        course = self._course(course_id)
        return self.call(
            f"listing the students of course {course_id}",
            lambda: [plain(u) for u in course.get_users(enrollment_type=["student"], include=["email"])],
        )

    def submissions(self, course_id: int, assignment_id: int) -> list[Any]:
        """The assignment's submissions (canvasapi objects: their attachments download through the client)."""
        found = self._assignment(course_id, assignment_id)
        return self.call(
            f"listing the submissions of assignment {assignment_id}",
            lambda: list(found.get_submissions(include=SUBMISSION_INCLUDES)),
        )

    def download(self, attachment: Any) -> bytes:
        name = getattr(attachment, "display_name", "") or getattr(attachment, "filename", "a file")
        data: bytes = self.call(f"downloading {name}", lambda: attachment.get_contents(binary=True))
        return data

    def submission(self, course_id: int, assignment_id: int, user_id: int) -> Any:
        found = self._assignment(course_id, assignment_id)
        return self.call(
            f"reading the submission of student {user_id}",
            lambda: found.get_submission(user_id, include=["submission_comments", "rubric_assessment"]),
        )

    def grade(self, submission: Any, what: str, fields: dict[str, Any]) -> dict[str, Any]:
        """``PUT .../submissions/:user_id`` with ``fields`` (``submission[posted_grade]``, ``rubric_assessment``,
        ``comment[text_comment]``); the submission's JSON after it. Not retried here: a retry must first look at
        what the failed call already did (:mod:`madrag.lms.push`)."""
        try:
            return plain(submission.edit(**fields))
        except Exception as exc:
            refused = _refusal(exc, self._errors, what)
            if refused is not None:
                raise refused from None
            if _transient(exc, self._errors):
                raise LmsTransient(f"Canvas did not answer while {what} ({str(exc)[:200]})") from None
            raise LmsError(f"Canvas answered an error while {what}: {str(exc)[:300]}") from None
