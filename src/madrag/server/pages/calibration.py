"""Calibration: score the teacher's anchor papers first (the essays of the class set the teacher scored,
each with the other anchors as its examples), then say per trait how madrag agreed, before the batch."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from madrag.data.refusals import Refusals
from madrag.rubric import Rubric
from madrag.server import library, service
from madrag.server.drafts import Draft
from madrag.server.http.errors import ApiError
from madrag.server.http.schemas import RunCreate
from madrag.server.pages.rendering import redirect, render, state_of
from madrag.server.runs import archive
from madrag.server.service import State
from madrag.teacher import calibration

router = APIRouter(include_in_schema=False)
MIN_ANCHORS = 3


def start(s: State, draft: Draft, rubric: Rubric) -> Response:
    """Score the draft's anchor papers (with the backend just chosen) and go to the calibration page."""
    marked = calibration.anchors(s.drafts.essays(draft, rubric))
    if len(marked) < MIN_ANCHORS:
        raise ApiError(409, f"score at least {MIN_ANCHORS} essays yourself first (you scored {len(marked)})", "kind")
    pool = "asap" if draft.pool == "asap" else "same" if draft.pool in ("same", "folds") else "none"
    protocols = [p for p in draft.protocols if pool != "none" or not library.uses_retrieval(p)] or ["MA"]
    body = RunCreate(
        name=f"Calibration: {draft.name or rubric.name or 'class'}",
        rubric_id=draft.rubric_id,
        essays=[],
        protocols=protocols,
        grading_protocol=draft.grading_protocol if draft.grading_protocol in protocols else None,
        backend=s.drafts.backend(draft),
    )
    meta = service.create_run(s, rubric, library.EssayUpload(marked, Refusals()), pool, body)  # type: ignore[arg-type]
    archive.mark_from_pages(s.runs.run_dir(meta.id))
    return redirect(f"/runs/{meta.id}/calibration?draft={draft.id}")


@router.get("/runs/{run_id}/calibration")
def calibration_page(run_id: str, request: Request, draft: str = "") -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    done = run["status"] == "finished"
    view = s.runs.view(run_id) if done else None
    agreement: list[calibration.TraitAgreement] = []
    empty: dict[str, list[int]] = {}
    if view is not None:
        first = s.runs.meta(run_id).grading
        scores = {(x.essay_id, x.trait): x.score for x in view.scores if x.protocol == first}
        marked = calibration.anchors(view.essays)
        agreement = calibration.agreement(view.rubric, marked, scores)
        empty = calibration.empty_levels(view.rubric, marked)
    return render(
        request,
        "calibration.html",
        run=run,
        done=done,
        agreement=agreement,
        empty=empty,
        draft_id=draft,
        looks_right=calibration.looks_right(agreement),
        threshold=calibration.THRESHOLD_WORDS,
    )
