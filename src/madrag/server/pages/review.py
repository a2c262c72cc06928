"""The review queue page: a run's trait scores of its grading protocol (the gradebook's), ranked by
:mod:`madrag.teacher.review_queue` (most likely wrong first), with the review in force and the unreviewed
counter, and the one-click approvals (every agreeing score, or one essay's). An approval only accepts scores
nobody has reviewed yet: a teacher's override stays until the teacher changes it. A bulk approval is recorded as
one (``bulk-accept``, "approved in bulk"), written whole in one transaction on a worker thread; agreement with the
teacher counts only the scores decided one by one. What a review form's POST asks for is read from the button that
sent it (:func:`chosen_action`): Enter in a comment saves the comment, never a level. Who signs the decisions: one
name, asked once per browser (:data:`REVIEWER_COOKIE`)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote, unquote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from madrag.errors import MadragError
from madrag.server import results
from madrag.server.http.faults import NotFound
from madrag.server.http.security import check_csrf
from madrag.server.pages import gradebook, reading_pane
from madrag.server.pages.rendering import paginate, redirect, render, state_of
from madrag.server.results import view_scores
from madrag.server.reviews import BulkProgress, Review, add_bulk_approvals
from madrag.server.runs import library_runs
from madrag.server.service import State
from madrag.teacher import calibration
from madrag.teacher.grades import Grade, suggested
from madrag.teacher.review_queue import ItemSignals, QueueItem, rank


def signals(state: State, run_id: str) -> list[ItemSignals]:
    """What the run's agents answered, per essay-trait of its grading protocol (the others' scores beside): its score
    rows alone, their signals kept with them as they were written (:mod:`madrag.store.signals`), no record read."""
    view = state.runs.view(run_id)
    if not view.protocols:
        return []
    first, by_key = results.grading_protocol(state, run_id), view_scores(view)
    kept = library_runs.score_signals(state.runs.run_dir(run_id), first)  # the score rows', no record read
    items = []
    for essay in view.essays:
        for trait in view.rubric.traits:
            found = by_key.get((first, essay.id, trait.name))
            if found is None:
                continue
            others = [by_key.get((p, essay.id, trait.name)) for p in view.protocols if p != first]
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
                    **kept.get((essay.id, trait.name), {}),
                )
            )
    return items


def _row(item: QueueItem, grade: Grade) -> dict[str, Any]:
    """One queue row: the grade in force as the score, madrag's own score beside it, and who decided it."""
    return {
        "essay_id": item.essay_id,
        "trait": item.trait,
        "score": grade.points,
        "ai": item.score,
        "suggested": suggested(grade),
        "how": grade.how,
        "words": grade.words,
        "open": grade.open,
        "one_by_one": grade.one_by_one,
        "doubt": item.doubt,
        "reasons": item.reasons,
        "notes": item.notes,
        "flagged": item.flagged,
        "comment": grade.comment,
        "reviewer": grade.reviewer,
    }


def queue(state: State, run_id: str) -> dict[str, Any]:
    """The ranked queue (undecided scores first, flagged ones first among them, most doubtful first) and its
    counts."""
    return state.memo("review-queue", run_id, lambda: _queue(state, run_id))  # type: ignore[no-any-return]


def _queue(state: State, run_id: str) -> dict[str, Any]:
    first = results.grading_protocol(state, run_id)
    found = results.grade_table(state, run_id)
    ranked = state.memo("review-ranking", run_id, lambda: rank(signals(state, run_id)), reviews=False)
    rows = [_row(i, found[(first, i.essay_id, i.trait)]) for i in ranked]
    rows.sort(key=lambda r: (not r["open"], not r["flagged"]))  # stable: the ranking holds within each part
    open_rows = [r for r in rows if r["open"]]
    return {
        "protocol": first,
        "rows": rows,
        "total": len(rows),
        "unreviewed": len(open_rows),
        "flagged": sum(1 for r in open_rows if r["flagged"]),
        "agreeing": sum(1 for r in open_rows if not r["flagged"] and r["ai"] is not None),
        "in_bulk": sum(1 for r in rows if r["how"] == "bulk"),
        "agreement": _agreement(state, run_id, rows),
    }


def _agreement(state: State, run_id: str, rows: list[dict[str, Any]]) -> list[calibration.TraitAgreement]:
    """Per criterion, madrag's suggestions against the teacher's decisions so far, updated with each decision:
    only the scores decided one by one (their own scores, overrides, scores confirmed one at a time); a score
    approved in bulk is madrag agreeing with itself, so it is left out and counted apart (``in_bulk``)."""
    traits = [t.name for t in state.runs.view(run_id).rubric.traits]
    pairs: dict[str, list[tuple[str, int, int | None]]] = {t: [] for t in traits}
    in_bulk = dict.fromkeys(traits, 0)
    for r in rows:
        if r["how"] == "bulk":
            in_bulk[r["trait"]] += 1
        elif r["one_by_one"] and r["score"] is not None:
            pairs[r["trait"]].append((r["essay_id"], r["score"], r["ai"]))
    return [calibration.pair_agreement(t, pairs[t], in_bulk=in_bulk[t]) for t in traits]


@dataclass(frozen=True)
class QueueFilter:
    """What the review desk shows: one criterion, flagged or agreeing scores, one student, decided or undecided
    (an empty field: all)."""

    trait: str = ""
    flag: str = ""  # "flagged", "agreeing" or ""
    essay_id: str = ""
    state: str = ""  # "open", "decided" or ""

    @property
    def active(self) -> bool:
        return bool(self.trait or self.flag or self.essay_id or self.state)

    def shows(self, row: dict[str, Any]) -> bool:
        return (
            (not self.trait or row["trait"] == self.trait)
            and (not self.flag or row["flagged"] == (self.flag == "flagged"))
            and (not self.essay_id or row["essay_id"] == self.essay_id)
            and (not self.state or row["open"] == (self.state == "open"))
        )

    def query(self) -> str:
        """The filter as a query string (empty fields left out)."""
        fields = {"trait": self.trait, "flag": self.flag, "essay": self.essay_id, "state": self.state}
        return urlencode({k: v for k, v in fields.items() if v})


def read_filter(fields: Mapping[str, Any]) -> QueueFilter:
    """A filter from a query string or a form (unknown values of ``flag`` / ``state`` ignored)."""
    flag = str(fields.get("flag") or "")
    state = str(fields.get("state") or "")
    return QueueFilter(
        trait=str(fields.get("trait") or ""),
        flag=flag if flag in ("flagged", "agreeing") else "",
        essay_id=str(fields.get("essay") or fields.get("essay_id") or ""),
        state=state if state in ("open", "decided") else "",
    )


def approve(
    state: State, run_id: str, reviewer: str, shown: QueueFilter | None = None, progress: BulkProgress | None = None
) -> int:
    """Approve in bulk, in one go, madrag's score on every undecided row the filter shows (no filter: every score
    nothing casts doubt on): recorded as ``bulk-accept`` ("approved in bulk"), never as the teacher's decision on
    each score, and written whole, in one transaction (:func:`madrag.server.reviews.add_bulk_approvals`: all or
    none). A score the teacher already decided (their own score in the class file, an override, a confirmation),
    even while this approval was being prepared, is never touched. Blocking: the page runs it on a worker thread,
    ``progress`` told how far it has got. Returns how many were approved."""
    found = queue(state, run_id)
    chosen_filter = shown if shown is not None and shown.active else QueueFilter(flag="agreeing")
    chosen = [r for r in found["rows"] if r["open"] and r["ai"] is not None and chosen_filter.shows(r)]
    approvals = [
        Review(
            essay_id=r["essay_id"],
            trait=r["trait"],
            protocol=found["protocol"],
            action="bulk-accept",
            agent_score=r["ai"],
            new_score=r["ai"],
            reviewer=reviewer,
        )
        for r in chosen
    ]
    return add_bulk_approvals(state.runs.run_dir(run_id), approvals, None if progress is None else progress.advance)


def chosen_action(form: FormData) -> Literal["accept", "override", "comment"]:
    """What a review form's POST asks for, read from the button that sent it: ``accept`` ("use madrag's score"),
    ``override`` (a level's own button, which alone sends a ``score``), else ``comment``: Enter in a field sends the
    form's default button (``action=comment``, first in the form), and a form that names no level sets none."""
    actions = {str(a) for a in form.getlist("action")}
    if "comment" in actions:
        return "comment"
    if "accept" in actions:
        return "accept"
    return "override" if str(form.get("score") or "").strip() else "comment"


# -- the pages ---------------------------------------------------------------------------------------------------------

router = APIRouter(include_in_schema=False)


REVIEWER_COOKIE = "madrag_reviewer"
STUDENT_MENU = 500
"""Up to this many students, the filter offers a menu of them; a larger class types the student's id."""


def reviewer_of(request: Request, given: str = "") -> str:
    """Who reviews: the name typed, else the one this browser remembers, else ``teacher``."""
    return (given.strip() or remembered_reviewer(request) or "teacher")[:200]


def remembered_reviewer(request: Request) -> str:
    """The reviewer's name this browser remembers (empty when none)."""
    return unquote(request.cookies.get(REVIEWER_COOKIE, ""))


def remember_reviewer(response: Response, reviewer: str) -> None:
    """This browser keeps the reviewer's name, so it is asked once (a year; changed whenever another is typed)."""
    if reviewer and reviewer != "teacher":  # quoted: a header is Latin-1, a name (李, Ōta) may be any script
        cookie = quote(reviewer[:200], safe="")
        response.set_cookie(REVIEWER_COOKIE, cookie, max_age=365 * 86400, httponly=True, samesite="strict", path="/")


def _local(back: str) -> str:
    """``back`` when it is a path of this server (a page to return to), else the home page."""
    return back if back.startswith("/") and not back.startswith("//") and "\\" not in back else "/"


@router.post("/reviewer")
async def reviewer_submit(request: Request) -> Response:
    """The name that signs this browser's decisions (overrides, confirmations, bulk approvals), asked once and
    kept in a cookie; an empty name forgets it. Back to the page it was typed on, its filter and page kept."""
    form = await check_csrf(request)
    name = str(form.get("reviewer") or "").strip()[:200]
    response = redirect(_local(str(form.get("back") or "/")))
    if name:
        remember_reviewer(response, name)
    else:
        response.delete_cookie(REVIEWER_COOKIE, path="/", httponly=True, samesite="strict")
    return response


@router.get("/runs/{run_id}/review")
def review_page(run_id: str, request: Request, approved: int | None = None) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    found = queue(s, run_id)
    shown = read_filter(request.query_params)
    matching = [r for r in found["rows"] if shown.shows(r)] if shown.active else found["rows"]
    rows, pager = paginate(request, matching)
    names = gradebook.names(s, run_id)
    traits = [t.name for t in s.runs.view(run_id).rubric.traits]
    return render(
        request,
        "review.html",
        run=run,
        queue=found,
        rows=rows,
        pager=pager,
        shown=shown,
        open_shown=sum(1 for r in matching if r["open"] and r["ai"] is not None),
        pick_student=len(names) <= STUDENT_MENU,
        traits=traits,
        levels={t.name: list(range(t.min, t.max + 1)) for t in s.runs.view(run_id).rubric.traits},
        approved=approved,
        names=names,
        reviewer=remembered_reviewer(request),
        reading=reading_pane.pane(s, run_id, request, rows, found["rows"]),
        canvas_matching=gradebook.canvas_matching(s, run_id),
    )


APPROVAL_WAIT_S = 2.0
"""How long the approve button's request waits for the approval: one that takes longer answers with its progress
page ("n of N" checked; followed by the page's script, or by its "check again" link without one)."""
APPROVALS_KEPT_S = 600.0
"""How long an ended approval's progress page still answers."""


@router.post("/runs/{run_id}/approve")
async def approve_submit(run_id: str, request: Request) -> Response:
    form = await check_csrf(request)
    shown = read_filter(form)
    reviewer = reviewer_of(request, str(form.get("reviewer") or ""))
    if shown.essay_id and str(form.get("back") or "") == "essay":
        back = f"/runs/{run_id}/essays/{quote(shown.essay_id, safe='')}?approved="
    else:
        query = shown.query()
        back = f"/runs/{run_id}/review?{query + '&' if query else ''}approved="
    s = state_of(request)
    job = BulkProgress(run_id=run_id, back=back)
    # a large approval takes a while: on a worker thread, so the server answers other requests meanwhile
    work = asyncio.ensure_future(run_in_threadpool(approve, s, run_id, reviewer, shown, job))
    await asyncio.wait([work], timeout=APPROVAL_WAIT_S)
    if work.done():
        response = redirect(back + str(work.result()))  # its error, when it failed, is the page's answer
    else:
        response = redirect(f"/runs/{run_id}/approvals/{_follow(s, job, work)}")
    remember_reviewer(response, reviewer)
    return response


def _follow(s: State, job: BulkProgress, work: asyncio.Future[int]) -> str:
    """Keep an approval still being written under a new id, told its end when it ends; the id."""

    def ended(done: asyncio.Future[int]) -> None:
        error = done.exception() if not done.cancelled() else None
        if done.cancelled() or error is not None:
            job.end(None, str(error) if isinstance(error, MadragError) else "the approval stopped")
        else:
            job.end(done.result())

    now = time.time()
    for old in [k for k, v in s.approvals.items() if v.ended_at is not None and now - v.ended_at > APPROVALS_KEPT_S]:
        del s.approvals[old]
    job.work = work
    work.add_done_callback(ended)
    job_id = secrets.token_hex(8)
    s.approvals[job_id] = job
    return job_id


@router.get("/runs/{run_id}/approvals/{job_id}")
def approval_page(run_id: str, job_id: str, request: Request) -> Response:
    """An approval being written: how far it has got, "n of N" (read again by the page's script each second, or
    by its "check again" link); once written, the page it was asked from, with the count approved; stopped: that
    none was approved."""
    s = state_of(request)
    job = s.approvals.get(job_id)
    if job is None or job.run_id != run_id:
        raise NotFound(f"no approval {job_id!r} of run {run_id!r} (an ended one is kept a few minutes)", "job_id")
    if job.written is not None:
        return redirect(job.back + str(job.written))
    return render(request, "approval.html", run=s.runs.describe(run_id), job=job, back=job.back.rsplit("?", 1)[0])
