"""The JSON API under ``/api`` (documented at ``/docs``): rubrics, runs, progress, scores, one essay's
records, reviews (overrides), cancel and resume, export, evaluation, and scoring one essay synchronously."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response, StreamingResponse

from madrag import __version__
from madrag.server import library, lms_link, results, service
from madrag.server.http.faults import WrongState
from madrag.server.http.numbers import whole_number
from madrag.server.http.responses import (
    EssayRecords,
    EvaluationOut,
    Health,
    ProtocolInfo,
    RubricOut,
    RubricSummary,
    RunScores,
    SingleScore,
)
from madrag.server.http.schemas import BackendSettings, OverrideIn, ResumeIn, RubricCreate, RunCreate, SingleScoreIn
from madrag.server.reviews import Review, all_reviews
from madrag.server.runs import library_runs
from madrag.server.runs.probe import ProbeResult
from madrag.server.runs.responses import RunOut
from madrag.server.service import State

router = APIRouter(prefix="/api")
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {
        "description": text,
        "content": {"application/json": {"example": {"error": {"status": code, "message": text}}}},
    }
    for code, text in {
        400: "bad input (essays, rubric or settings)",
        403: "a model server or a Canvas at an address the server's operator did not allow (madrag serve "
        "--allow-backend-url, --allow-lms-url)",
        404: "no such rubric, run or essay",
        409: "the run is in the wrong state for this (or a push's preview is no longer what would be sent)",
        413: "upload over the limits",
        422: "invalid request fields",
        503: "the backend failed or the time limit passed",
    }.items()
}


StateDep = Annotated[State, Depends(service.state_of)]


@router.get("/health", summary="Server status and version")
def health(s: StateDep) -> Health:
    return Health(version=__version__, token_required=s.config.token_required)


@router.get("/protocols", summary="Scoring protocols and whether each needs an exemplar pool")
def protocols() -> list[ProtocolInfo]:
    return [ProtocolInfo(name=n, retrieval=library.uses_retrieval(n)) for n in library.protocol_names()]


@router.get("/rubrics", summary="Shipped and created rubrics")
def list_rubrics(s: StateDep) -> list[RubricSummary]:
    return [
        RubricSummary(
            id=rid,
            name=r.name,
            traits=r.trait_names,
            shipped=rid in s.catalog.shipped,
            shipped_pool=s.catalog.pool_available(r),
        )
        for rid, r in s.catalog.all().items()
    ]


@router.post("/rubrics", status_code=201, summary="Create a rubric", responses=ERRORS)
def create_rubric(body: RubricCreate, s: StateDep) -> RubricOut:
    rubric = library.rubric_from_dict(body.model_dump())
    rid = s.catalog.add(rubric)
    return RubricOut(id=rid, rubric=rubric.model_dump(mode="json"))


@router.get("/rubrics/{rubric_id}", summary="One rubric", responses=ERRORS)
def get_rubric(rubric_id: str, s: StateDep) -> RubricOut:
    return RubricOut(id=rubric_id, rubric=s.catalog.get(rubric_id).model_dump(mode="json"))


@router.post(
    "/backends/test",
    summary="Test an OpenAI-compatible backend: does it answer, which model, does it return logprobs",
    responses=ERRORS,
)
async def backend_test(body: BackendSettings, s: StateDep) -> ProbeResult:
    """One short chat request with logprobs asked for. ``logprobs`` in the answer is the setting a run on this
    server should use (``false``: self-reported confidence); a run whose ``logprobs`` is unset does this test
    itself before it starts."""
    return await service.try_backend(s, body)


@router.post("/runs", status_code=201, summary="Create and start a run (or a dry-run estimate)", responses=ERRORS)
def create_run(body: RunCreate, s: StateDep, response: Response) -> RunOut:
    """The inputs are checked here (every refusal is this request's answer); the run is kept, ``queued``, and
    started by the server's worker: poll ``Location`` (``GET /api/runs/{run_id}``) or its ``/events``."""
    meta = service.start_run(s, body)
    response.headers["Location"] = f"/api/runs/{meta.id}"
    return s.runs.describe_run(meta.id)


@router.get("/runs", summary="Every run, newest first (interrupted ones can be resumed)")
def list_runs(s: StateDep) -> list[RunOut]:
    return [s.runs.describe_run(m.id) for m in s.runs.all()]


@router.get("/runs/{run_id}", summary="A run's status and progress", responses=ERRORS)
def get_run(run_id: str, s: StateDep) -> RunOut:
    return s.runs.describe_run(run_id)


SSE: dict[int | str, dict[str, Any]] = {
    200: {"description": "an event stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}}
}


@router.get(
    "/runs/{run_id}/events",
    summary="Live progress as server-sent events",
    response_class=StreamingResponse,
    responses={**SSE, **ERRORS},
)
async def run_events(
    run_id: str,
    request: Request,
    s: StateDep,
    after: Annotated[int | None, Query(description="Replay only events after this id (as Last-Event-ID).")] = None,
) -> StreamingResponse:
    """A snapshot, then the run's recent events (those after ``Last-Event-ID`` / ``after``), then every new
    one until the run stops; each event carries its ``id`` so a reconnecting client misses nothing recent."""
    s.runs.run_dir(run_id)
    prog = s.runs.events.of(run_id)
    queue = prog.subscribe(asyncio.get_running_loop())
    header = request.headers.get("last-event-id", "")
    last = after if after is not None else max(0, whole_number(header) or 0)
    backlog = [e for e in list(prog.recent) if e["seq"] > last]

    async def stream() -> AsyncIterator[str]:
        sent = last
        try:
            yield _sse({"type": "snapshot", "progress": prog.snapshot()})
            for event in backlog:
                sent = event["seq"]
                yield _sse(event)
            while prog.snapshot()["status"] in ("queued", "running") or not queue.empty():
                try:
                    event = await asyncio.wait_for(queue.get(), 15)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if event["seq"] > sent:
                    sent = event["seq"]
                    yield _sse(event)
                if await request.is_disconnected():
                    return
            yield _sse({"type": "end", "progress": prog.snapshot()})
        finally:
            prog.unsubscribe(queue)

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


def _sse(event: dict[str, Any]) -> str:
    head = f"id: {event['seq']}\n" if "seq" in event else ""
    return f"{head}event: {event.get('type', 'message')}\ndata: {json.dumps(event)}\n\n"


@router.post("/runs/{run_id}/cancel", summary="Stop a running run (finished calls are kept)", responses=ERRORS)
async def cancel_run(run_id: str, s: StateDep) -> RunOut:
    await s.runs.cancel(run_id)
    return s.runs.describe_run(run_id)


@router.post(
    "/runs/{run_id}/resume",
    status_code=202,
    summary="Resume an interrupted or cancelled run, or retry the failed calls of a finished one",
    responses=ERRORS,
)
def resume_run(run_id: str, s: StateDep, body: ResumeIn | None = None) -> RunOut:
    s.runs.resume(run_id, None if body is None else body.api_key)
    return s.runs.describe_run(run_id)


@router.get("/runs/{run_id}/scores", summary="Trait scores per essay, with reviews", responses=ERRORS)
def run_scores(run_id: str, s: StateDep) -> RunScores:
    found: RunScores = s.memo(  # checked once per change of the scores or reviews, not on every request
        "scores", run_id, lambda: RunScores.model_validate({"run_id": run_id, "rows": results.export_rows(s, run_id)})
    )
    return found


@router.get(
    "/runs/{run_id}/essays/{essay_id:path}",
    summary="One essay's records: rationales, debate, exemplars",
    responses=ERRORS,
)
def essay_records(run_id: str, essay_id: str, s: StateDep) -> EssayRecords:
    return EssayRecords.model_validate(results.essay_detail(s, run_id, essay_id))


@router.get("/runs/{run_id}/overrides", summary="Every review of the run, oldest first", responses=ERRORS)
def list_overrides(run_id: str, s: StateDep) -> list[Review]:
    return all_reviews(s.runs.run_dir(run_id))


@router.post("/runs/{run_id}/overrides", status_code=201, summary="Accept or override a trait score", responses=ERRORS)
def add_override(run_id: str, body: OverrideIn, s: StateDep) -> Review:
    return results.add_override(s, run_id, body)


EXPORT: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the scores file (one row per essay, trait and protocol)",
        "content": {"text/csv": {"schema": {"type": "string"}}, "application/x-ndjson": {"schema": {"type": "string"}}},
    }
}


@router.get(
    "/runs/{run_id}/export",
    summary="Scores with reviews as CSV or JSONL",
    response_class=Response,
    responses={**EXPORT, **ERRORS},
)
def export(run_id: str, s: StateDep, format: Annotated[Literal["csv", "jsonl"], Query()] = "csv") -> Response:
    content, media = results.export(s, run_id, format)
    name = f"madrag-{run_id}-scores.{format}"
    return Response(content, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'})


@router.get("/runs/{run_id}/evaluation", summary="madrag eval's tables (needs human scores)", responses=ERRORS)
def evaluation(run_id: str, s: StateDep) -> EvaluationOut:
    view = s.runs.view(run_id)
    if not view.has_human:
        raise WrongState("this run's essays have no human scores to evaluate against")
    return EvaluationOut(run_id=run_id, tables=library_runs.evaluation_tables(s.runs.run_dir(run_id))[0])


@router.post("/score", summary="Score one essay now, within a time limit", responses=ERRORS)
async def score_one(body: SingleScoreIn, s: StateDep) -> SingleScore:
    return await service.score_one(s, body)


# -- Canvas: a class pulled from it and its grades sent back (docs/lms.md) ---------------------------------------------


@router.get("/lms/connection", summary="Canvas: whether the server holds a connection, and to which address")
def lms_connection(s: StateDep) -> lms_link.Connection:
    return lms_link.connection(s)


@router.post("/lms/connect", summary="Canvas: check and keep an address and access token", responses=ERRORS)
def lms_connect(body: lms_link.ConnectIn, s: StateDep) -> lms_link.Connection:
    """The token is checked (Canvas lists the courses it may teach), then kept in the server's data directory
    (mode 0600); no answer ever shows it again."""
    return lms_link.connect(s, body)


@router.get(
    "/lms/courses",
    summary="Canvas: the courses the connection's user teaches",
    responses=ERRORS,
    response_model=list[lms_link.CourseOut],
)
def lms_courses(s: StateDep) -> list[dict[str, Any]]:
    return lms_link.courses(s)


@router.get(
    "/lms/courses/{course_id}/assignments",
    summary="Canvas: a course's assignments",
    responses=ERRORS,
    response_model=list[lms_link.AssignmentOut],
)
def lms_assignments(course_id: int, s: StateDep) -> list[dict[str, Any]]:
    return lms_link.assignments(s, course_id)


@router.post("/lms/pull", status_code=201, summary="Canvas: pull an assignment into a new class", responses=ERRORS)
def lms_pull(body: lms_link.PullIn, s: StateDep) -> lms_link.PulledClass:
    """Its submissions (text entries, .docx and .pdf files), roster and rubric; start its run with
    ``POST /api/lms/pulls/{pull_id}/run``."""
    return lms_link.pull_class(s, body)


@router.post("/lms/pulls/{pull_id}/run", status_code=201, summary="Canvas: score a pulled class", responses=ERRORS)
def lms_run(pull_id: str, body: RunCreate, s: StateDep) -> RunOut:
    """A run of the pulled essays with the pulled rubric (give neither): its name, protocols, backend and
    settings as ``POST /api/runs`` takes them."""
    meta = lms_link.start_run(s, pull_id, body)
    return s.runs.describe_run(meta.id)


@router.get(
    "/lms/runs/{run_id}/preview",
    summary="Canvas: what a push of the run would send",
    responses=ERRORS,
    response_model=lms_link.PreviewOut,
)
def lms_preview(run_id: str, s: StateDep, include_undecided: bool = False) -> dict[str, Any]:
    """Per student Canvas's grade now, the new grade, the rubric assessment and comment, and the status (``send``,
    ``undecided``, ``conflict`` ...); its ``fingerprint`` is what ``push`` asks for."""
    return lms_link.preview(s, run_id, include_undecided)


@router.post(
    "/lms/runs/{run_id}/push",
    summary="Canvas: send the previewed grades",
    responses=ERRORS,
    response_model=lms_link.PushOut,
)
def lms_push(run_id: str, body: lms_link.PushIn, s: StateDep) -> dict[str, Any]:
    """Sends only when the plan is still the one previewed (its ``fingerprint``); 409, nothing sent, otherwise."""
    return lms_link.send(s, run_id, body)
