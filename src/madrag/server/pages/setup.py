"""The set-up steps of a run in the pages: 1 rubric, 2 essays, 3 exemplars, 4 backend (with the dry-run
estimate), then start. Each step is a page with a form; invalid input comes back next to its field."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from madrag.errors import MadragError
from madrag.rubric import Rubric
from madrag.server import library
from madrag.server.drafts import Draft
from madrag.server.http.errors import ApiError
from madrag.server.http.numbers import whole_number
from madrag.server.http.security import check_csrf
from madrag.server.pages import class_import
from madrag.server.pages.rendering import redirect, render, state_of

router = APIRouter(include_in_schema=False)
STEPS = [("rubric", "1 Rubric"), ("essays", "2 Essays"), ("exemplars", "3 Exemplars"), ("backend", "4 Backend")]
TRAIT_SLOTS = 4
MAX_TRAIT_SLOTS = 20
_LOC = re.compile(r"traits\.(\d+)(?:\.(\w+))?")


def step_page(request: Request, draft: Draft, step: str, **context: Any) -> Response:
    s = state_of(request)
    rubric = s.catalog.get(draft.rubric_id) if draft.rubric_id else None
    return render(request, f"{step}.html", draft=draft, rubric=rubric, steps=STEPS, step=step, **context)


async def _file(form: Any, limit: int) -> tuple[bytes, str] | None:
    item = form.get("file")
    if not isinstance(item, UploadFile) or not item.filename:
        return None
    data = await item.read(limit + 1)
    if len(data) > limit:
        raise ApiError(413, f"the file is over the upload limit of {limit:,} bytes", "file")
    return data, item.filename


@router.post("/new")
async def new_draft(request: Request) -> Response:
    await check_csrf(request)
    draft = state_of(request).drafts.new()
    return redirect(f"/drafts/{draft.id}/rubric")


# -- 1 rubric ------------------------------------------------------------------------------------------------


def typed(form: Any) -> dict[str, str]:
    """What was typed into a form's fields (never its files), to show it again."""
    return {k: str(v) for k, v in form.items() if isinstance(v, str)}


def _rubric_step(
    request: Request, draft: Draft, values: dict[str, str], slots: int, errors: dict[str, str], status: int = 200
) -> Response:
    rubrics = state_of(request).catalog.all()
    return step_page(
        request, draft, "rubric", status=status, rubrics=rubrics, errors=errors, values=values, slots=slots
    )


@router.get("/drafts/{draft_id}/rubric")
def rubric_page(draft_id: str, request: Request) -> Response:
    return _rubric_step(request, state_of(request).drafts.get(draft_id), {}, TRAIT_SLOTS, {})


def _field_of(message: str) -> str:
    found = _LOC.search(message)
    if found is None:
        return "rubric"
    part = found.group(2)
    return f"trait-{found.group(1)}-{part if part in ('name', 'min', 'max') else 'levels'}"


def _levels(text: str, index: int) -> dict[int, str]:
    levels = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        score, sep, description = line.partition(":")
        number = whole_number(score)
        if not sep or number is None:
            raise ApiError(
                400, f"write each level as 'score: description' (got {line.strip()[:40]!r})", f"trait-{index}-levels"
            )
        levels[number] = description.strip()
    return levels


def _slots(form: Any) -> int:
    """How many trait boxes the written rubric has (4, more after "Add a trait")."""
    asked = whole_number(form.get("slots"))
    return TRAIT_SLOTS if asked is None else min(MAX_TRAIT_SLOTS, max(TRAIT_SLOTS, asked))


def _scale(form: Any, slot: int, index: int, levels: dict[int, str]) -> tuple[int, int]:
    """A written criterion's own scale: its lowest and highest score as typed, else read from its levels (a
    criterion with levels 1 to 6 is scored 1 to 6); never a default scale."""
    typed = [str(form.get(f"trait-{slot}-{end}") or "").strip() for end in ("min", "max")]
    scores = sorted(levels)
    found = []
    for text, end, fallback in zip(typed, ("min", "max"), (scores[:1], scores[-1:]), strict=True):
        number = whole_number(text)
        if text and number is None:
            raise ApiError(400, "the lowest and highest scores must be whole numbers", f"trait-{index}-{end}")
        if not text and not fallback:
            raise ApiError(
                400,
                "give this criterion's lowest and highest score, or its levels (one per score)",
                f"trait-{index}-{end}",
            )
        found.append(number if number is not None else fallback[0])
    return found[0], found[1]


def _rubric_from_form(form: Any) -> Rubric:
    traits: list[dict[str, Any]] = []
    for i in range(_slots(form)):
        name = str(form.get(f"trait-{i}-name") or "").strip()
        if not name:
            continue
        levels = _levels(str(form.get(f"trait-{i}-levels") or ""), len(traits))
        lo, hi = _scale(form, i, len(traits), levels)
        traits.append({"name": name, "min": lo, "max": hi, "levels": levels})
    if not traits:
        raise ApiError(400, "give at least one trait", "trait-0-name")
    raw = {"name": str(form.get("name") or "my rubric"), "prompt": str(form.get("prompt") or ""), "traits": traits}
    return library.rubric_from_dict(raw)


@router.post("/drafts/{draft_id}/rubric")
async def rubric_submit(draft_id: str, request: Request) -> Response:
    s = state_of(request)
    draft = s.drafts.get(draft_id)
    form = await check_csrf(request)
    mode = str(form.get("mode") or "")
    if mode == "form" and str(form.get("action")) == "add_trait":  # one more trait box, what was typed kept
        return _rubric_step(request, draft, typed(form), min(MAX_TRAIT_SLOTS, _slots(form) + 1), {})
    try:
        if mode == "shipped":
            rubric_id = str(form.get("rubric_id") or "")
            s.catalog.get(rubric_id)
        elif mode == "upload":
            found = await _file(form, s.config.limits.max_rubric_bytes)
            if found is None:
                raise ApiError(400, "choose a JSON or YAML file", "file")
            rubric_id = s.catalog.add(library.rubric_from_upload(*found))
        else:
            rubric_id = s.catalog.add(_rubric_from_form(form))
    except (ApiError, MadragError) as exc:
        message = exc.message if isinstance(exc, ApiError) else str(exc)
        field = exc.field if isinstance(exc, ApiError) and exc.field else _field_of(message)
        field = "file" if mode == "upload" and field.startswith(("trait", "rubric")) else field
        return _rubric_step(request, draft, typed(form), _slots(form), {field: message}, 400)
    s.drafts.save(draft.model_copy(update={"rubric_id": rubric_id}))
    return redirect(f"/drafts/{draft_id}/essays")


def with_rubric(request: Request, draft_id: str) -> tuple[Draft, Rubric]:
    s = state_of(request)
    draft = s.drafts.get(draft_id)
    if draft.rubric_id is None:
        raise ApiError(409, "choose a rubric first (step 1)")
    return draft, s.catalog.get(draft.rubric_id)


# -- 2 essays -------------------------------------------------------------------------------------------------


@router.get("/drafts/{draft_id}/essays")
def essays_page(draft_id: str, request: Request) -> Response:
    draft, rubric = with_rubric(request, draft_id)
    essays = state_of(request).drafts.essays(draft, rubric)
    return step_page(
        request, draft, "essays", errors={}, preview=essays[:5], values={}, **_pools(request, draft, rubric)
    )


@router.post("/drafts/{draft_id}/essays")
async def essays_submit(draft_id: str, request: Request) -> Response:
    s = state_of(request)
    draft, rubric = with_rubric(request, draft_id)
    form = await check_csrf(request)
    limits = s.config.limits
    read_as = ""
    try:
        if str(form.get("mode")) == "paste":
            fields = {
                "id": str(form.get("essay_id") or "").strip() or f"essay-{draft.n_essays + 1}",
                "text": str(form.get("essay_text") or ""),
            }
            fields.update({t.name: str(form.get(f"score-{i}") or "") for i, t in enumerate(rubric.traits)})
            essay = library.essay_from_fields(fields, rubric, "the pasted essay")
            pasted = library.EssayUpload([*s.drafts.essays(draft, rubric), essay], draft.refusals())
            upload = library.apply_limits(pasted, limits)
        else:
            found = await _file(form, limits.max_upload_bytes)
            if found is None:
                raise ApiError(400, "choose a class file: CSV, Excel (.xlsx), a ZIP of submissions, JSONL", "file")
            fmt = str(form.get("format") or "auto")
            held = s.drafts.folder(draft.id)  # reading a ZIP of documents takes seconds: off the event loop
            direct = await run_in_threadpool(class_import.take, held, found[0], found[1], fmt, limits.max_rows)
            if direct is None:  # a Forms / LMS export or a ZIP of submissions: which column is which
                return redirect(f"/drafts/{draft_id}/columns")
            read_as = direct.read_as
            upload = library.essays_from_upload(direct.data, direct.filename, rubric, fmt, limits)
    except (ApiError, MadragError) as exc:
        message = exc.message if isinstance(exc, ApiError) else str(exc)
        field = "essay_text" if str(form.get("mode")) == "paste" else "file"
        values = typed(form)  # a pasted essay is never wiped
        return step_page(request, draft, "essays", status=400, errors={field: message}, preview=[], values=values)
    draft = s.drafts.set_essays(draft, upload.essays, upload.refused)
    pools = _pools(request, draft, rubric)
    return step_page(
        request, draft, "essays", errors={}, preview=upload.essays[:5], values={}, read_as=read_as, **pools
    )


# -- 3 exemplars ----------------------------------------------------------------------------------------------


def _asap_label(rubric: Rubric) -> str:
    """The shipped pool's option, naming the ASAP set only when the rubric has one."""
    which = f" set {rubric.essay_set}" if rubric.essay_set is not None else ""
    return f"the shipped ASAP{which} essays (scored by ASAP's raters)"


def _pool_options(request: Request, draft: Draft, rubric: Rubric) -> list[tuple[str, str, bool]]:
    s = state_of(request)
    return [
        (
            "folds",
            "the other parts of your file (your scored essays, split by its fold column; the part below is scored)",
            draft.has_folds and draft.has_scores,
        ),
        ("same", "your scored essays themselves (an essay never retrieves itself)", draft.has_scores),
        ("asap", _asap_label(rubric), s.catalog.pool_available(rubric)),
        ("none", "no example essays (the Quick way, or a debate without examples)", True),
    ]


def _pools(request: Request, draft: Draft, rubric: Rubric) -> dict[str, Any]:
    """The exemplar pools offered right under the essays read (step 3 in one click: its default kept, or
    another chosen), with the one chosen by default."""
    if not draft.n_essays:
        return {"pool_options": [], "pool_default": ""}
    options = _pool_options(request, draft, rubric)
    return {"pool_options": options, "pool_default": next(key for key, _, ok in options if ok)}


@router.get("/drafts/{draft_id}/exemplars")
def exemplars_page(draft_id: str, request: Request) -> Response:
    draft, rubric = with_rubric(request, draft_id)
    options = _pool_options(request, draft, rubric)
    default = next(key for key, _, ok in options if ok)
    return step_page(request, draft, "exemplars", options=options, default=default, errors={})


@router.post("/drafts/{draft_id}/exemplars")
async def exemplars_submit(draft_id: str, request: Request) -> Response:
    s = state_of(request)
    draft, rubric = with_rubric(request, draft_id)
    form = await check_csrf(request)
    pool = str(form.get("pool") or "none")
    options = _pool_options(request, draft, rubric)
    fold = whole_number(str(form.get("eval_fold") or "0"))
    offered = pool in {key for key, _, ok in options if ok}
    if not offered or fold is None:
        error = {"eval_fold": "a whole number"} if offered else {"pool": "choose one of the pools offered"}
        return step_page(request, draft, "exemplars", status=400, options=options, default="none", errors=error)
    protocols = draft.protocols if pool != "none" else ["MAD"]
    s.drafts.save(draft.model_copy(update={"pool": pool, "eval_fold": fold, "protocols": protocols}))
    return redirect(f"/drafts/{draft_id}/backend")
