"""A local Canvas double for madrag's LMS tests: an aiohttp server on 127.0.0.1, in a thread, answering exactly the
REST endpoints canvasapi calls for ``madrag lms`` with the rules canvas-lms's own source sets for them.

Followed from instructure/canvas-lms at commit 0088c23eacf462cb7f275db5be83d026945fdb4f (read, not copied):

- ``app/controllers/submissions_api_controller.rb`` ``index`` / ``show`` / ``update``: a submission is addressed by
  the student's user id; ``submission[posted_grade]`` in points ("13.5") or percent ("40%") sets ``score`` and
  ``grade`` (anything else is a 400 ``{"error": ...}``); ``rubric_assessment[criterion_id][points|rating_id|
  comments]`` is refused with a 400 ``{"message": "invalid rubric_assessment"}`` when none of its keys is a criterion
  of the assignment's rubric; ``comment[text_comment]`` appends a comment, ``hidden`` while the submission's grade is
  hidden from the student (``hide_grade_from_student?``: a manually posted assignment whose submission is not
  posted); the answer is the submission with ``submission_comments``;
- post policies: an automatically posted assignment posts a submission when it is graded (``posted_at`` set); a
  manually posted one leaves it unposted;
- ``lib/api.rb`` ``paginate``: ``per_page`` capped (``max_per_page``), ``Link`` header with ``rel="current"``,
  ``"next"``, ``"first"``, ``"last"``;
- ``lib/api/v1/assignment.rb``: the assignment carries ``rubric`` (criteria with ``id``, ``description``,
  ``long_description``, ``points``, ``ratings``) and ``rubric_settings`` when it has a rubric, and ``post_manually``;
- the users API (``courses/:id/users`` and ``courses/:id/search_users``, both ``courses#users``,
  with ``enrollment_type[]=student``, ``include[]=email``): ``id``,
  ``name``, ``sortable_name``, ``sis_user_id``, ``login_id``;
- an invalid token: 401 with ``WWW-Authenticate`` and ``{"errors": [{"message": "Invalid access token."}]}``.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp import web


@dataclass
class Sub:
    user_id: int
    id: int
    submission_type: str | None = None
    body: str | None = None
    attachments: list[int] = field(default_factory=list)
    attempt: int | None = 1
    score: float | None = None
    grade: str | None = None
    graded_at: str | None = None
    posted_at: str | None = None
    excused: bool = False
    comments: list[dict[str, Any]] = field(default_factory=list)
    assessment: dict[str, dict[str, Any]] = field(default_factory=dict)
    updates: int = 0


@dataclass
class CanvasData:
    token: str
    course: dict[str, Any]
    assignment: dict[str, Any]
    users: list[dict[str, Any]]
    subs: dict[int, Sub]
    files: dict[int, tuple[str, str, bytes]]  # id -> (display name, content type, bytes)
    max_per_page: int = 10
    fail_next: list[int] = field(default_factory=list)  # statuses answered to the next requests, in order
    requests: list[tuple[str, str]] = field(default_factory=list)
    before_update: Callable[[int], None] | None = None
    fail_after_update: list[int] = field(default_factory=list)  # statuses answered after an update was applied


def _parse_form(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Rails's nested parameters: ``a[b][c]=v`` -> ``{"a": {"b": {"c": "v"}}}``."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        parts = re.findall(r"[^\[\]]+", key)
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


class CanvasDouble:
    def __init__(self, data: CanvasData) -> None:
        self.data = data
        self.base = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None

    # -- the JSON of each object ------------------------------------------------------------------------------
    def _file_json(self, fid: int) -> dict[str, Any]:
        name, ctype, data = self.data.files[fid]
        return {
            "id": fid,
            "display_name": name,
            "filename": name,
            "content-type": ctype,
            "size": len(data),
            "url": f"{self.base}/files/{fid}/download?download_frd=1",
        }

    def _hidden(self, sub: Sub) -> bool:
        return bool(self.data.assignment.get("post_manually")) and sub.posted_at is None

    def sub_json(self, sub: Sub, includes: list[str]) -> dict[str, Any]:
        a = self.data.assignment
        out: dict[str, Any] = {
            "id": sub.id,
            "user_id": sub.user_id,
            "assignment_id": a["id"],
            "attempt": sub.attempt if sub.submission_type else None,
            "body": sub.body,
            "submission_type": sub.submission_type,
            "score": sub.score,
            "grade": sub.grade,
            "graded_at": sub.graded_at,
            "posted_at": sub.posted_at,
            "excused": sub.excused,
            "workflow_state": "graded"
            if sub.grade is not None
            else "submitted"
            if sub.submission_type
            else "unsubmitted",
            "grade_matches_current_submission": True,
        }
        if sub.attachments:
            out["attachments"] = [self._file_json(f) for f in sub.attachments]
        if "submission_comments" in includes:
            out["submission_comments"] = [dict(c) for c in sub.comments]
        if "rubric_assessment" in includes and sub.assessment:
            out["rubric_assessment"] = {k: dict(v) for k, v in sub.assessment.items()}
        if "user" in includes:
            out["user"] = next(dict(u) for u in self.data.users if u["id"] == sub.user_id)
        return out

    # -- pagination -------------------------------------------------------------------------------------------
    def _page(self, request: web.Request, items: list[Any]) -> web.Response:
        per_page = min(max(int(request.query.get("per_page", 10)), 1), self.data.max_per_page)
        page = max(int(request.query.get("page", 1)), 1)
        last = max((len(items) + per_page - 1) // per_page, 1)
        chunk = items[(page - 1) * per_page : page * per_page]
        params = [(k, v) for k, v in request.query.items() if k not in ("page", "per_page")]

        def link(n: int, rel: str) -> str:
            query = urlencode([*params, ("page", str(n)), ("per_page", str(per_page))])
            return f'<{self.base}{request.path}?{query}>; rel="{rel}"'

        links = [link(page, "current")]
        if page < last:
            links.append(link(page + 1, "next"))
        links += [link(1, "first"), link(last, "last")]
        return web.json_response(chunk, headers={"Link": ",".join(links)})

    # -- the handlers -----------------------------------------------------------------------------------------
    def _check(self, request: web.Request) -> web.Response | None:
        self.data.requests.append((request.method, request.path_qs))
        if self.data.fail_next:
            status = self.data.fail_next.pop(0)
            return web.json_response({"errors": [{"message": "double: injected"}]}, status=status)
        if request.headers.get("Authorization") != f"Bearer {self.data.token}":
            return web.json_response(
                {"errors": [{"message": "Invalid access token."}]},
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="canvas-lms"'},
            )
        return None

    def _ids(self, request: web.Request) -> web.Response | None:
        if int(request.match_info["course"]) != self.data.course["id"]:
            return web.json_response({"errors": [{"message": "The specified resource does not exist."}]}, status=404)
        if "assignment" in request.match_info and int(request.match_info["assignment"]) != self.data.assignment["id"]:
            return web.json_response({"errors": [{"message": "The specified resource does not exist."}]}, status=404)
        return None

    async def courses(self, request: web.Request) -> web.Response:
        return self._check(request) or self._page(request, [self.data.course])

    async def course(self, request: web.Request) -> web.Response:
        return self._check(request) or self._ids(request) or web.json_response(self.data.course)

    async def assignments(self, request: web.Request) -> web.Response:
        return self._check(request) or self._ids(request) or self._page(request, [self._assignment_json()])

    def _assignment_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.data.assignment.items()}

    async def assignment(self, request: web.Request) -> web.Response:
        return self._check(request) or self._ids(request) or web.json_response(self._assignment_json())

    async def users(self, request: web.Request) -> web.Response:
        found = self._check(request) or self._ids(request)
        if found:
            return found
        users = [dict(u) for u in self.data.users]
        if "email" not in request.query.getall("include[]", []):
            for u in users:
                u.pop("email", None)
        return self._page(request, users)

    async def submissions(self, request: web.Request) -> web.Response:
        found = self._check(request) or self._ids(request)
        if found:
            return found
        includes = request.query.getall("include[]", [])
        subs = [self.sub_json(s, includes) for _uid, s in sorted(self.data.subs.items())]
        return self._page(request, subs)

    async def submission(self, request: web.Request) -> web.Response:
        found = self._check(request) or self._ids(request)
        if found:
            return found
        sub = self.data.subs.get(int(request.match_info["user"]))
        if sub is None:
            return web.json_response({"errors": [{"message": "The specified resource does not exist."}]}, status=404)
        return web.json_response(self.sub_json(sub, request.query.getall("include[]", [])))

    async def download(self, request: web.Request) -> web.Response:
        found = self._check(request)
        if found:
            return found
        _name, ctype, data = self.data.files[int(request.match_info["file"])]
        return web.Response(body=data, content_type=ctype)

    async def update(self, request: web.Request) -> web.Response:
        found = self._check(request) or self._ids(request)
        if found:
            return found
        sub = self.data.subs.get(int(request.match_info["user"]))
        if sub is None:
            return web.json_response({"status": "unauthorized"}, status=401)
        params = _parse_form(list((await request.post()).items()))  # type: ignore[arg-type]
        if self.data.before_update is not None:
            self.data.before_update(sub.user_id)
        refused = self._apply(sub, params)
        if refused is not None:
            return refused
        sub.updates += 1
        if self.data.fail_after_update:  # applied, but the answer lost (a gateway's 502 after Canvas saved it)
            return web.json_response(
                {"errors": [{"message": "double: lost"}]}, status=self.data.fail_after_update.pop(0)
            )
        return web.json_response(self.sub_json(sub, ["submission_comments"]))

    def _apply(self, sub: Sub, params: dict[str, Any]) -> web.Response | None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        posted = (params.get("submission") or {}).get("posted_grade")
        assessment = params.get("rubric_assessment")
        criteria = {str(c["id"]) for c in self.data.assignment.get("rubric") or []}
        if isinstance(assessment, dict) and criteria and not set(assessment) & criteria:
            return web.json_response({"message": "invalid rubric_assessment"}, status=400)
        if posted is not None:
            score = _posted_score(str(posted), float(self.data.assignment["points_possible"]))
            if score is None:
                return web.json_response({"error": f"invalid grade {posted!r}"}, status=400)
            sub.score, sub.grade, sub.graded_at = score, f"{score:g}", now
            if not self.data.assignment.get("post_manually") and sub.posted_at is None:
                sub.posted_at = now
        if isinstance(assessment, dict):
            sub.assessment = {
                k: {
                    "points": None if v.get("points") in (None, "") else float(v["points"]),
                    "rating_id": v.get("rating_id"),
                    "comments": v.get("comments", ""),
                }
                for k, v in assessment.items()
                if k in criteria
            }
        comment = params.get("comment")
        if isinstance(comment, dict) and comment.get("text_comment"):
            sub.comments.append(
                {
                    "id": sum(len(s.comments) for s in self.data.subs.values()) + 1,
                    "author_id": 1,
                    "comment": comment["text_comment"],
                    "created_at": now,
                    "hidden": self._hidden(sub),
                }
            )
        return None

    # -- the server -------------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        api = "/api/v1/courses/{course}"
        app.router.add_get("/api/v1/courses", self.courses)
        app.router.add_get(api, self.course)
        app.router.add_get(api + "/assignments", self.assignments)
        app.router.add_get(api + "/assignments/{assignment}", self.assignment)
        app.router.add_get(api + "/users", self.users)
        app.router.add_get(api + "/search_users", self.users)  # canvasapi's Course.get_users; courses#users too
        app.router.add_get(api + "/assignments/{assignment}/submissions", self.submissions)
        app.router.add_get(api + "/assignments/{assignment}/submissions/{user}", self.submission)
        app.router.add_put(api + "/assignments/{assignment}/submissions/{user}", self.update)
        app.router.add_get("/files/{file}/download", self.download)
        return app

    def start(self) -> str:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._runner = web.AppRunner(self.app(), access_log=None)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.base = f"http://127.0.0.1:{port}"
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self.base

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


def _posted_score(posted: str, possible: float) -> float | None:
    """``submission[posted_grade]`` as Canvas reads points or a percentage (letter grades: not in this double)."""
    text = posted.strip()
    try:
        if text.endswith("%"):
            return round(float(text[:-1]) * possible / 100, 2)
        return float(text)
    except ValueError:
        return None


# -- a class of 25 ----------------------------------------------------------------------------------------------------

RUBRIC = [
    {
        "id": "_101",
        "description": "Ideas",
        "long_description": "How well the essay develops its ideas",
        "points": 4.0,
        "ratings": [
            {"id": "r1", "description": "Excellent", "long_description": "Rich, well supported", "points": 4.0},
            {"id": "r2", "description": "Good", "long_description": "", "points": 3.0},
            {"id": "r3", "description": "Fair", "long_description": "", "points": 2.0},
            {"id": "r4", "description": "Weak", "long_description": "", "points": 0.0},
        ],
    },
    {
        "id": "_102",
        "description": "Conventions",
        "long_description": "Spelling, grammar, punctuation",
        "points": 3.0,
        "ratings": [
            {"id": "c1", "description": "Clean", "points": 3.0},
            {"id": "c2", "description": "Some errors", "points": 2.0},
            {"id": "c3", "description": "Many errors", "points": 1.0},
            {"id": "c4", "description": "Unreadable", "points": 0.0},
        ],
    },
]


def essay_words(i: int) -> list[str]:
    return [
        f"Student {i} writes about the river that runs past the school.",
        "The water is cold in spring and the children watch the birds there every morning.",
        f"In paragraph {i} the writer explains why the river matters to the town and its people.",
    ]


def class_of(token: str, n: int = 25, post_manually: bool = False) -> CanvasData:
    """A course with one assignment (rubric above, 7 points) and ``n`` students: text entries, .docx and .pdf."""
    from tests.class_file_makers import docx_bytes, pdf_bytes

    users, subs, files = [], {}, {}
    for i in range(1, n + 1):
        uid = 1000 + i
        users.append(
            {
                "id": uid,
                "name": f"Pupil{i} Family{i}",
                "sortable_name": f"Family{i}, Pupil{i}",
                "short_name": f"Pupil{i}",
                "sis_user_id": f"S{i:03d}",
                "login_id": f"pupil{i}",
                "email": f"pupil{i}@school.example",
            }
        )
        sub = Sub(user_id=uid, id=5000 + i)
        if i % 3 == 1:
            sub.submission_type, sub.body = "online_text_entry", "<p>" + "</p><p>".join(essay_words(i)) + "</p>"
        elif i % 3 == 2:
            files[9000 + i] = (
                f"essay{i}.docx",
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                docx_bytes(essay_words(i)),
            )
            sub.submission_type, sub.attachments = "online_upload", [9000 + i]
        else:
            files[9000 + i] = (f"essay{i}.pdf", "application/pdf", pdf_bytes(essay_words(i)))
            sub.submission_type, sub.attachments = "online_upload", [9000 + i]
        subs[uid] = sub
    assignment = {
        "id": 77,
        "course_id": 7,
        "name": "River essay",
        "description": "<p>Write about the <b>river</b>.</p>",
        "points_possible": 7.0,
        "grading_type": "points",
        "post_manually": post_manually,
        "use_rubric_for_grading": False,
        "rubric": RUBRIC,
        "rubric_settings": {"id": 31, "title": "River rubric", "points_possible": 7.0},
    }
    course = {"id": 7, "name": "English 9", "course_code": "ENG9"}
    return CanvasData(token=token, course=course, assignment=assignment, users=users, subs=subs, files=files)
