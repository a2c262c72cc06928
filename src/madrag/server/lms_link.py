"""The Canvas round trip in the web app, shared by the JSON API (``/api/lms/...``) and the teacher's pages
(:mod:`madrag.server.pages.lms`): connect (the address and access token kept in the server's data directory by
:func:`madrag.lms.credentials.save_credentials`, mode 0600, never shown again nor logged), list courses and
assignments, pull an assignment into a new class (a draft as the set-up pages make one: the imported rubric, the
essays, the roster and the pull's manifest, then a run of it), preview a run's push and push it.

Every call to Canvas first checks its address against the operator's rule (:func:`madrag.server.access.check_lms`:
loopback, else ``madrag serve --allow-lms-url``). A push sends only the plan the teacher previewed: the preview
carries a ``fingerprint`` of everything it shows (each student's Canvas grade now, the new grade, the rubric
assessment and comment, the status); the push recomputes the plan and refuses (409) when its fingerprint is not the
one given, so a review, an edit or a grade changed in Canvas after the preview sends nothing she has not seen."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from typing import Any

from pydantic import BaseModel, Field, SecretStr

from madrag.data.refusals import Refusals
from madrag.errors import ConfigError
from madrag.files.atomic import copy_atomic
from madrag.lms.calls import LmsError, LmsTransient
from madrag.lms.client import CanvasClient
from madrag.lms.credentials import (
    CanvasCredentials,
    check_url,
    credentials_path,
    load_credentials,
    save_credentials,
)
from madrag.lms.journal import Journal
from madrag.lms.manifest import ESSAYS, MANIFESTS, ROSTER, RUBRIC, PullManifest, load_manifest
from madrag.lms.preview import preview_json
from madrag.lms.pull import pull
from madrag.lms.push import Line, PushPlan, plan_push, push
from madrag.server import access, class_book, library, service
from madrag.server.http.faults import BadInput, NotFound, Unavailable, WrongState
from madrag.server.http.schemas import RunCreate
from madrag.server.runs.scheduler import RunMeta
from madrag.server.service import State

PULLED = "canvas"
"""The sub-folder of a draft a pull writes its four files in."""
_pushing: dict[str, threading.Lock] = {}
_guard = threading.Lock()


class ConnectIn(BaseModel):
    """A Canvas address and an access token (Account > Settings > New access token)."""

    url: str = Field(min_length=1, max_length=500)
    token: SecretStr = Field(min_length=1, max_length=500)


class Connection(BaseModel):
    """Whether the server holds a Canvas connection, and to which address (never the token)."""

    connected: bool
    url: str | None = None
    courses: int | None = None


class PullIn(BaseModel):
    course_id: int
    assignment_id: int


class PulledClass(BaseModel):
    """A pulled assignment as a new class: the draft that holds it (start its run with ``POST
    /api/lms/pulls/{pull_id}/run`` or on the pages' backend step), the imported rubric, how many essays and who
    was not pulled and why."""

    pull_id: str
    rubric_id: str
    course: str
    assignment: str
    essays: int
    refused: list[dict[str, Any]]


class PushIn(BaseModel):
    """The fingerprint of the preview the teacher saw, and whether grades she did not decide go too."""

    fingerprint: str = Field(min_length=8, max_length=128)
    include_undecided: bool = False


class CourseOut(BaseModel):
    """A course the connection's user teaches."""

    id: int
    name: str


class AssignmentOut(BaseModel):
    """An assignment of a course, and whether it has a rubric (madrag's rubric is imported from it)."""

    id: int
    name: str
    points_possible: float | None
    rubric: bool


class PreviewChange(BaseModel):
    """One student's line of the preview: Canvas's grade now, the new grade, and what is sent when ``status`` is
    ``send`` (else why not: ``undecided``, ``conflict``, ``sent before`` ...)."""

    essay_id: str
    user_id: int | str
    student: str
    old_score: float | None
    old_grade: str | None
    new_grade: int | None
    status: str
    reason: str
    rubric_assessment: list[Line]  # each criterion as the push sends it (points None: nobody graded it)
    comment: str


class PreviewOut(BaseModel):
    """What a push of the run would send (``madrag lms push --json``'s shape), its counts by status and the
    ``fingerprint`` a push must give back."""

    lms: str
    course_id: int | str
    assignment_id: int | str
    post_manually: bool
    made_by_madrag: bool | None  # Classroom: whether madrag made the coursework (None: not asked, Canvas)
    assignment_name: str
    course_name: str
    changes: list[PreviewChange]
    include_undecided: bool
    counts: dict[str, int]
    fingerprint: str


class SentOut(BaseModel):
    essay_id: str
    student: str
    grade: int | None


class LeftOut(BaseModel):
    essay_id: str
    student: str
    status: str


class PushOut(BaseModel):
    """The students whose grades were sent, and those left as they are in Canvas (with why)."""

    sent: list[SentOut]
    left: list[LeftOut]


# -- connecting ----------------------------------------------------------------------------------------------------


def _client(state: State, creds: CanvasCredentials | None = None) -> CanvasClient:
    creds = creds or load_credentials(state.config.data_dir)
    access.check_lms(state.config, creds.url)
    return CanvasClient(creds)


def _call(what: Any) -> Any:
    """A Canvas call's answer; a failure a retry may fix as 503, a refusal as its one sentence (400)."""
    try:
        return what()
    except LmsTransient as exc:
        raise Unavailable(str(exc)) from None
    except LmsError as exc:
        raise BadInput(str(exc), "canvas") from None


def connection(state: State) -> Connection:
    if not credentials_path(state.config.data_dir).is_file():
        return Connection(connected=False)
    try:
        return Connection(connected=True, url=load_credentials(state.config.data_dir).url)
    except ConfigError:
        return Connection(connected=False)


def connect(state: State, body: ConnectIn) -> Connection:
    """Check the address (the operator's rule) and the token (Canvas lists her courses), then keep them."""
    try:
        url = check_url(body.url)
    except ConfigError as exc:
        raise BadInput(str(exc), "url") from None
    token = body.token.get_secret_value().strip()
    if not token:
        raise BadInput("the Canvas access token is empty", "token")
    creds = CanvasCredentials(url=url, token=SecretStr(token))
    courses = _call(lambda: _client(state, creds).courses())  # a wrong token is refused, not kept
    save_credentials(url, token, state.config.data_dir)
    return Connection(connected=True, url=url, courses=len(courses))


def courses(state: State) -> list[dict[str, Any]]:
    found = _call(lambda: _client(state).courses())
    return [{"id": c.get("id"), "name": c.get("name", "")} for c in found]


def assignments(state: State, course_id: int) -> list[dict[str, Any]]:
    found = _call(lambda: _client(state).assignments(course_id))
    return [
        {
            "id": a.get("id"),
            "name": a.get("name", ""),
            "points_possible": a.get("points_possible"),
            "rubric": bool(a.get("rubric") or a.get("rubric_settings")),
        }
        for a in found
    ]


# -- pulling into a class -------------------------------------------------------------------------------------------


def pull_class(state: State, body: PullIn) -> PulledClass:
    """Pull the assignment into a new draft: the rubric kept in the catalog, the essays (within the server's
    limits), the roster and the manifest beside them, the exemplar pool none (the pulled essays are unscored)."""
    creds = load_credentials(state.config.data_dir)
    client = _client(state, creds)
    draft = state.drafts.new()
    folder = state.drafts.folder(draft.id)
    pulled = _call(lambda: pull(client, body.course_id, body.assignment_id, folder / PULLED, creds.url))
    rubric = library.rubric_from_upload((folder / PULLED / RUBRIC).read_bytes(), RUBRIC)
    rubric_id = state.catalog.add(rubric)
    pulled_essays = library.read_essays(folder / PULLED / ESSAYS, rubric)
    upload = library.apply_limits(library.EssayUpload(pulled_essays, Refusals()), state.config.limits)
    for name in (ROSTER, MANIFESTS["canvas"]):
        copy_atomic(folder / PULLED / name, folder / name)
    m = pulled.manifest
    draft = draft.model_copy(update={"rubric_id": rubric_id, "name": m.assignment_name or "Canvas assignment"})
    draft = state.drafts.set_essays(draft, upload.essays, upload.refused)
    state.drafts.save(draft.model_copy(update={"pool": "none", "protocols": ["MAD"]}))
    return PulledClass(
        pull_id=draft.id,
        rubric_id=rubric_id,
        course=m.course_name or str(m.course_id),
        assignment=m.assignment_name or str(m.assignment_id),
        essays=len(upload.essays),
        refused=[r.model_dump() for r in m.refused],
    )


def start_run(state: State, pull_id: str, req: RunCreate) -> RunMeta:
    """Start the run of a pulled class (``req``: its name, protocols, backend and settings; its rubric and essays
    are the pull's), the roster and the manifest carried into the run's folder."""
    if req.rubric_id is not None or req.rubric is not None or req.essays or req.data is not None:
        raise BadInput("a pulled class's rubric and essays are the pull's: give neither", "rubric_id")
    draft = state.drafts.get(pull_id)
    folder = state.drafts.folder(pull_id)
    if draft.rubric_id is None or not (folder / MANIFESTS["canvas"]).is_file():
        raise NotFound(f"no pulled class {pull_id!r}", "pull_id")
    rubric = state.catalog.get(draft.rubric_id)
    upload = library.EssayUpload(state.drafts.essays(draft, rubric), draft.refusals())
    if not upload.essays:
        raise BadInput("the pull brought no essays to score", "pull_id")
    pool = service.choose_pool(state, rubric, upload, req.pool, req.eval_fold)
    named = req if req.name else req.model_copy(update={"name": draft.name})
    meta = service.create_run(state, rubric, upload, pool, named)
    class_book.carry_roster(folder, state.runs.run_dir(meta.id))
    return meta


# -- preview and push -----------------------------------------------------------------------------------------------


def pulled_manifest(state: State, run_id: str) -> PullManifest:
    """The Canvas pull a run was scored from; 404 for a run that was not pulled from Canvas."""
    run_dir = state.runs.run_dir(run_id)
    if not (run_dir / MANIFESTS["canvas"]).is_file():
        raise NotFound(f"run {run_id} was not pulled from Canvas", "run_id")
    return load_manifest(run_dir)


def fingerprint(preview: dict[str, Any]) -> str:
    """A digest of everything a preview shows."""
    return hashlib.sha256(json.dumps(preview, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


def _plan(state: State, run_id: str, include_undecided: bool) -> tuple[CanvasClient, PushPlan]:
    manifest = pulled_manifest(state, run_id)
    if state.runs.describe(run_id)["status"] != "finished":
        raise WrongState(f"run {run_id} has not finished scoring: preview it when it has", "run_id")
    client = _client(state)
    grades = class_book.run_class_grades(state, run_id)
    journal = Journal(state.runs.run_dir(run_id), manifest.lms)
    current = _call(lambda: client.current_state(manifest))
    return client, plan_push(grades, manifest, current, journal, include_undecided)


def preview(state: State, run_id: str, include_undecided: bool = False) -> dict[str, Any]:
    """What a push would send (``madrag lms push --json``'s shape), with its ``fingerprint`` and the counts."""
    _, plan = _plan(state, run_id, include_undecided)
    return _shown(plan, include_undecided)


def _shown(plan: PushPlan, include_undecided: bool) -> dict[str, Any]:
    found = preview_json(plan)
    counts = dict(Counter(c.status for c in plan.changes))
    found |= {"assignment_name": plan.manifest.assignment_name, "course_name": plan.manifest.course_name}
    return found | {"include_undecided": include_undecided, "counts": counts, "fingerprint": fingerprint(found)}


def send(state: State, run_id: str, body: PushIn) -> dict[str, Any]:
    """Push the run's grades to Canvas, only when the plan is the one previewed (409 otherwise, nothing sent)."""
    with _guard:
        lock = _pushing.setdefault(run_id, threading.Lock())
    if not lock.acquire(blocking=False):
        raise WrongState(f"run {run_id} is being sent to Canvas already", "run_id")
    try:
        client, plan = _plan(state, run_id, body.include_undecided)
        if _shown(plan, body.include_undecided)["fingerprint"] != body.fingerprint:
            raise WrongState(
                "what would be sent changed since your preview (a review, a feedback edit, or a grade in Canvas): "
                "preview again, then send",
                "fingerprint",
            )
        result = _call(lambda: push(client, plan, state.runs.run_dir(run_id)))
    finally:
        lock.release()
    return {
        "sent": [{"essay_id": c.essay_id, "student": c.student, "grade": c.new_points} for c in result.sent],
        "left": [{"essay_id": c.essay_id, "student": c.student, "status": c.status} for c in result.left],
    }
