"""The pages of runs: the list (with unfinished runs to resume), a run's live progress, the results grid,
one essay with its records and the review form, the evaluation tables and the HTML report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response
from markupsafe import Markup, escape
from pydantic import SecretStr
from starlette.concurrency import run_in_threadpool

from madrag.audit.report import audit_html
from madrag.errors import MadragError
from madrag.server import library, results
from madrag.server.http.errors import ApiError
from madrag.server.http.numbers import whole_number
from madrag.server.http.schemas import OverrideIn
from madrag.server.http.security import check_csrf
from madrag.server.pages import gradebook
from madrag.server.pages import review as review_pages
from madrag.server.pages.rendering import paginate, redirect, render, state_of
from madrag.server.reviews import ACTION_WORDS
from madrag.server.runs import archive, library_runs
from madrag.server.service import State
from madrag.teacher.feedback import verified_quotes

router = APIRouter(include_in_schema=False)
RESUMABLE = ("interrupted", "cancelled", "failed")


@router.get("/")
def home(request: Request, show: str = "") -> Response:
    s = state_of(request)
    runs = [s.runs.describe(m.id) for m in s.runs.all() if m.kind != "estimate"]
    unfinished = [r for r in runs if r["status"] in RESUMABLE]
    parts = archive.split(runs, s.runs.root)
    listed = runs if show == "all" else parts["shown"]
    return render(request, "home.html", runs=listed, unfinished=unfinished, resumable=RESUMABLE, parts=parts, show=show)


@router.post("/runs/{run_id}/rename")
async def rename(run_id: str, request: Request) -> Response:
    form = await check_csrf(request)
    state_of(request).runs.rename(run_id, str(form.get("name") or ""))
    return redirect(f"/runs/{run_id}")


@router.post("/runs/{run_id}/archive")
async def archive_submit(run_id: str, request: Request) -> Response:
    form = await check_csrf(request)
    s = state_of(request)
    s.runs.meta(run_id)  # 404 for an unknown run
    archive.set_archived(s.runs.run_dir(run_id), str(form.get("archived") or "yes") == "yes")
    return redirect("/")


@router.get("/runs/{run_id}")
def run_page(run_id: str, request: Request) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    needs_key = run["backend"].get("key_source") == "memory"
    audit = Markup(audit_html(s.runs.run_dir(run_id)))  # the run's audit (madrag audit), escaped by audit_html
    return render(request, "run.html", run=run, resumable=RESUMABLE, needs_key=needs_key, audit=audit)


@router.post("/runs/{run_id}/cancel")
async def cancel(run_id: str, request: Request) -> Response:
    await check_csrf(request)
    await state_of(request).runs.cancel(run_id)  # waits without blocking the event loop
    return redirect(f"/runs/{run_id}")


@router.post("/runs/{run_id}/resume")
async def resume(run_id: str, request: Request) -> Response:
    form = await check_csrf(request)
    key = str(form.get("api_key") or "")
    state_of(request).runs.resume(run_id, SecretStr(key) if key else None)
    return redirect(f"/runs/{run_id}")


@router.get("/runs/{run_id}/results")
def results_page(run_id: str, request: Request) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    table = results.grid(s, run_id)
    rows, pager = paginate(request, prepared_grid(s, run_id, table))
    cells = grid_table(table, rows)
    grading = results.grading_protocol(s, run_id)
    unreviewed = s.memo("unreviewed", run_id, lambda: _unreviewed(table, grading))
    return render(
        request, "results.html", run=run, grid=table, grid_html=Markup(cells), unreviewed=unreviewed, pager=pager
    )


def _unreviewed(table: dict[str, Any], grading: str) -> int:
    """How many scores of the run's grading protocol no teacher decided yet."""
    return sum(1 for r in table["rows"] for c in r["cells"] if c["protocol"] == grading and c["grade"].open)


def _missing(score: int | None) -> str:
    return "missing" if score is None else str(score)


def _cell(c: dict[str, Any]) -> str:
    """One cell: the grade in force (marked * where the teacher decided it, with madrag's suggestion beside it
    when that differs), else madrag's score; the human reference after a slash where it is not the grade."""
    grade = c["grade"]
    text = "…" if not c["scored"] and not grade.teacher else _missing(grade.points)
    mark = "<sup>*</sup>" if grade.teacher else ""
    differs = grade.teacher and c["scored"] and grade.ai != grade.points
    hint = f' <small class="suggested">madrag {_missing(grade.ai)}</small>' if differs else ""
    ref = "" if c["reference"] is None or grade.how == "class file" else f"<small>/{c['reference']}</small>"
    kind = c["class"] + (" bulk" if grade.in_bulk else "" if grade.open else " reviewed")
    title = f"{c['protocol']} {c['trait']}: {grade.words}"
    return f'<td class="cell {kind}" title="{escape(title)}" data-how="{grade.how}">{text}{mark}{hint}{ref}</td>'


def prepared_grid(s: State, run_id: str, table: dict[str, Any]) -> list[str]:
    """The rows of a run's results table, each as HTML, built once (students shown as on every teacher page);
    a page joins its own rows (:func:`grid_table`)."""
    return s.memo("grid-html", run_id, lambda: grid_rows(run_id, table, gradebook.names(s, run_id)))  # type: ignore[no-any-return]


def grid_rows(run_id: str, grid: dict[str, Any], names: dict[str, str] | None = None) -> list[str]:
    """The results table's rows, one per essay (thousands of cells: built directly, every text escaped, rather
    than by the template engine, which takes ten times as long)."""
    rows = []
    for row in grid["rows"]:
        shown = (names or {}).get(row["essay_id"], row["essay_id"])
        link = f'<a href="/runs/{run_id}/essays/{quote(row["essay_id"], safe="")}">{escape(shown)}</a>'
        rows.append(f"<tr><th>{link}</th>" + "".join(_cell(c) for c in row["cells"]) + "</tr>")
    return rows


def grid_table(grid: dict[str, Any], rows: Sequence[str]) -> str:
    """The results table with its head around ``rows`` (some or all of :func:`grid_rows`)."""
    head = ""
    traits = "".join(f"<th>{escape(t)}</th>" for t in grid["traits"])
    if len(grid["protocols"]) > 1:
        span = len(grid["traits"])
        head = (
            "<tr><th></th>"
            + "".join(
                f'<th colspan="{span}">{escape(p)}{" (the grades)" if i == 0 else " (for comparison)"}</th>'
                for i, p in enumerate(grid["protocols"])
            )
            + "</tr>"
        )
    head += "<tr><th>essay</th>" + traits * len(grid["protocols"]) + "</tr>"
    return f'<table class="grid" id="results-grid"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


@router.post("/runs/{run_id}/essays/{essay_id:path}/review")
async def review(run_id: str, essay_id: str, request: Request) -> Response:
    """One score's review from the desk or the essay page: a level's button sets that level (an override), "use
    madrag's score" confirms the AI's, and anything else (Enter in a comment sends the form's default button,
    ``comment``) saves the comment alone: no level is ever set by a form that did not name one."""
    form = await check_csrf(request)
    s = state_of(request)
    action = review_pages.chosen_action(form)
    reviewer = review_pages.reviewer_of(request, str(form.get("reviewer") or ""))
    body: dict[str, Any] = {
        "essay_id": essay_id,
        "trait": str(form.get("trait") or ""),
        "protocol": str(form.get("protocol") or "") or None,
        "action": action,
        "score": whole_number(form.get("score")),  # None: none, or not a whole number (an override refuses it)
        "comment": str(form.get("comment") or ""),
        "reviewer": reviewer,
    }
    if action == "comment":
        cell = (essay_id, body["trait"], body["protocol"])
        await run_in_threadpool(results.add_comment, s, run_id, cell, body["comment"], reviewer)
    else:
        if action == "accept" and str(form.get("confirm") or "") != "yes":
            standing = results.override_in_force(s, run_id, essay_id, body["trait"], body["protocol"])
            if standing is not None:  # accepting would put the AI's score back over the teacher's: ask first
                run = s.runs.describe(run_id)
                return render(request, "confirm_accept.html", run=run, form=body, standing=standing)
        await run_in_threadpool(results.add_override, s, run_id, OverrideIn.model_validate(body))
    back = str(form.get("back") or "")
    if back.startswith("review"):  # the review desk, with the filter it showed, reading the essay just reviewed
        kept = [(k, v) for k, v in parse_qsl(back.partition("?")[2]) if k != "open"]
        response = redirect(f"/runs/{run_id}/review?" + urlencode([*kept, ("open", essay_id)]))
    else:
        anchor = quote(body["trait"], safe="")
        response = redirect(f"/runs/{run_id}/essays/{quote(essay_id, safe='')}?saved={anchor}#trait-{anchor}")
    review_pages.remember_reviewer(response, reviewer)
    return response


@router.get("/runs/{run_id}/essays/{essay_id:path}")
def essay_page(run_id: str, essay_id: str, request: Request, saved: str = "", approved: int | None = None) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    detail = _with_quotes(results.essay_detail(s, run_id, essay_id))
    essays = [e.id for e in s.runs.view(run_id).essays]
    index = essays.index(essay_id)
    neighbours = {
        "prev": essays[index - 1] if index else None,
        "next": essays[index + 1] if index + 1 < len(essays) else None,
    }
    reviewer = review_pages.remembered_reviewer(request)
    return render(
        request,
        "essay.html",
        run=run,
        detail=detail,
        student=gradebook.names(s, run_id).get(essay_id, essay_id),
        nav=neighbours,
        saved=saved,
        approved=approved,
        reviewer=reviewer,
        action_words=ACTION_WORDS,
        pool_prefix=library.POOL_PREFIX,
    )


def _with_quotes(detail: dict[str, Any]) -> dict[str, Any]:
    """Each score's quotes of the essay that the Judge and the debaters gave as evidence (verified ones only)."""
    text = detail["essay"]["text"]
    for trait in detail["traits"]:
        for entry in trait["protocols"]:
            answers = [entry["rationale"], *(turn["text"] for turn in entry["debate"])]
            entry["quotes"] = verified_quotes(answers, text)
    return detail


@router.get("/runs/{run_id}/evaluation")
def evaluation(run_id: str, request: Request) -> Response:
    s = state_of(request)
    run = s.runs.describe(run_id)
    view = s.runs.view(run_id)
    tables, plots = library_runs.evaluation_tables(s.runs.run_dir(run_id), plots=True) if view.has_human else ({}, [])
    images = [Markup(p) for p in plots]  # <img> elements built (and escaped) by the library's report module
    return render(request, "evaluation.html", run=run, tables=tables, plots=images, has_human=view.has_human)


@router.get("/runs/{run_id}/report")
def report(run_id: str, request: Request) -> Response:
    s = state_of(request)
    view = s.runs.view(run_id)
    if not view.has_human:
        raise ApiError(409, "the HTML report compares with human scores, and this run's essays have none")
    try:
        path = library_runs.write_report(s.runs.run_dir(run_id))
    except MadragError as exc:
        raise ApiError(400, str(exc)) from exc
    return FileResponse(path, media_type="text/html")
