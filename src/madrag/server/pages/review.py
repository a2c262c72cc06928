"""The review queue page: a run's trait scores of its first protocol (the one the gradebook uses), ranked by
:mod:`madrag.teacher.review_queue` (most likely wrong first), with the review in force and the unreviewed
counter, and the one-click approvals (every agreeing score, or one essay's). An approval only accepts scores
nobody has reviewed yet: a teacher's override stays until the teacher changes it."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from madrag.records import AgentRecord
from madrag.server.http.security import check_csrf
from madrag.server.pages import gradebook
from madrag.server.pages.rendering import redirect, render, state_of
from madrag.server.results import view_scores
from madrag.server.reviews import Review, add_review, all_reviews, latest
from madrag.server.runs import library_runs
from madrag.server.service import State
from madrag.teacher.review_queue import ItemSignals, QueueItem, rank


def _debate_signals(judge: AgentRecord | None, records: dict[str, AgentRecord]) -> dict[str, Any]:
    if judge is None:
        return {}
    turns = [records[k] for k in judge.context.get("debate") or [] if k in records]
    out: dict[str, Any] = {}
    for role in ("advocate", "skeptic"):
        mine = [t for t in turns if t.role == role and t.confidence is not None]
        if mine:
            out[f"{role}_confidence"] = max(mine, key=lambda t: t.round).confidence
    checked = [r.evidence for r in [judge, *turns] if r.evidence is not None and r.evidence.checked]
    if checked:
        out["unverified_quotes"] = sum(e.quotes_unverified for e in checked)
    return out


def signals(state: State, run_id: str) -> list[ItemSignals]:
    """What the run's agents answered, per essay-trait of its first protocol."""
    view = state.runs.view(run_id)
    if not view.protocols:
        return []
    first, by_key = view.protocols[0], view_scores(view)
    keys = sorted({s.record_key for s in view.scores if s.protocol == first and s.record_key})
    records = library_runs.essay_records(state.runs.run_dir(run_id), keys)
    items = []
    for essay in view.essays:
        for trait in view.rubric.traits:
            found = by_key.get((first, essay.id, trait.name))
            if found is None:
                continue
            others = [by_key.get((p, essay.id, trait.name)) for p in view.protocols[1:]]
            result = found.result
            items.append(
                ItemSignals(
                    essay_id=essay.id,
                    trait=trait.name,
                    score=found.score,
                    lo=trait.min,
                    hi=trait.max,
                    distribution=None if result is None else result.distribution,
                    other_scores=[o.score for o in others if o is not None and o.score is not None],
                    **_debate_signals(records.get(found.record_key), records),
                )
            )
    return items


def _row(item: QueueItem, review: Review | None) -> dict[str, Any]:
    return {
        "essay_id": item.essay_id,
        "trait": item.trait,
        "score": item.score,
        "doubt": item.doubt,
        "reasons": item.reasons,
        "notes": item.notes,
        "flagged": item.flagged,
        "review": None if review is None else review.action,
        "final": item.score if review is None else review.final,
        "comment": "" if review is None else review.comment,
    }


def queue(state: State, run_id: str) -> dict[str, Any]:
    """The ranked queue (unreviewed items first, most doubtful first) and its counts."""
    return state.memo("review-queue", run_id, lambda: _queue(state, run_id))  # type: ignore[no-any-return]


def _queue(state: State, run_id: str) -> dict[str, Any]:
    view = state.runs.view(run_id)
    first = view.protocols[0] if view.protocols else ""
    reviews = latest(all_reviews(state.runs.run_dir(run_id)))
    ranked = rank(signals(state, run_id))
    rows = [_row(i, reviews.get((i.essay_id, i.trait, first))) for i in ranked]
    rows.sort(key=lambda r: r["review"] is not None)  # stable: the ranking holds within each part
    open_rows = [r for r in rows if r["review"] is None]
    return {
        "protocol": first,
        "rows": rows,
        "total": len(rows),
        "unreviewed": len(open_rows),
        "flagged": sum(1 for r in open_rows if r["flagged"]),
        "agreeing": sum(1 for r in open_rows if not r["flagged"] and r["score"] is not None),
    }


def approve(state: State, run_id: str, reviewer: str, essay_id: str | None = None) -> int:
    """Accept, in one go, the unreviewed scores of one essay (``essay_id``) or every agreeing one (None).
    Scores already reviewed (accepted or overridden) are left as they are. Returns how many were accepted."""
    found = queue(state, run_id)
    chosen = [
        r
        for r in found["rows"]
        if r["review"] is None
        and r["score"] is not None
        and (r["essay_id"] == essay_id if essay_id is not None else not r["flagged"])
    ]
    run_dir = state.runs.run_dir(run_id)
    for r in chosen:
        add_review(
            run_dir,
            Review(
                essay_id=r["essay_id"],
                trait=r["trait"],
                protocol=found["protocol"],
                action="accept",
                agent_score=r["score"],
                new_score=r["score"],
                reviewer=reviewer,
            ),
        )
    return len(chosen)


# -- the pages ---------------------------------------------------------------------------------------------------------

router = APIRouter(include_in_schema=False)


def reviewer_of(request: Request, given: str = "") -> str:
    """Who reviews: the name typed, else the one remembered, else ``teacher``."""
    return (given.strip() or request.cookies.get("madrag_reviewer", "") or "teacher")[:200]


@router.get("/runs/{run_id}/review")
def review_page(run_id: str, request: Request, approved: int | None = None) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    found = queue(s, run_id)
    names = gradebook.names(s, run_id)
    return render(request, "review.html", run=run, queue=found, approved=approved, names=names)


@router.post("/runs/{run_id}/approve")
async def approve_submit(run_id: str, request: Request) -> Response:
    await check_csrf(request)
    form = await request.form()
    essay_id = str(form.get("essay_id") or "") or None
    reviewer = reviewer_of(request, str(form.get("reviewer") or ""))
    count = approve(state_of(request), run_id, reviewer, essay_id)
    if essay_id is not None and str(form.get("back") or "") == "essay":
        return redirect(f"/runs/{run_id}/essays/{quote(essay_id, safe='')}?approved={count}")
    return redirect(f"/runs/{run_id}/review?approved={count}")
