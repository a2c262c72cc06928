"""The set-up steps of a run in the pages: 1 rubric, 2 essays, 3 exemplars, 4 backend (with the dry-run
estimate), then start. Each step is a page with a form; invalid input comes back next to its field."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import SecretStr, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from madrag.errors import MadragError
from madrag.rubric import Rubric
from madrag.server import class_import, gradebook, library, pages_calibration, run_list, service
from madrag.server.drafts import Draft
from madrag.server.errors import ApiError, http_status
from madrag.server.faults import ServerError
from madrag.server.refusals import Refusals
from madrag.server.rendering import redirect, render, state_of
from madrag.server.schemas import BackendSettings, PriceIn, RunCreate
from madrag.server.security import check_csrf
from madrag.teacher import plain_words, presets

router = APIRouter(include_in_schema=False)
STEPS = [("rubric", "1 Rubric"), ("essays", "2 Essays"), ("exemplars", "3 Exemplars"), ("backend", "4 Backend")]
TRAIT_SLOTS = 4
MAX_TRAIT_SLOTS = 20
_LOC = re.compile(r"traits\.(\d+)(?:\.(\w+))?")


def _step(request: Request, draft: Draft, step: str, **context: Any) -> Response:
    s = state_of(request)
    rubric = s.catalog.get(draft.rubric_id) if draft.rubric_id else None
    return render(request, f"{step}.html", draft=draft, rubric=rubric, steps=STEPS, step=step, **context)


async def _form(request: Request) -> Any:
    await check_csrf(request)
    return await request.form()


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
    await _form(request)
    draft = state_of(request).drafts.new()
    return redirect(f"/drafts/{draft.id}/rubric")


# -- 1 rubric ------------------------------------------------------------------------------------------------


@router.get("/drafts/{draft_id}/rubric")
def rubric_page(draft_id: str, request: Request) -> Response:
    s = state_of(request)
    return _step(
        request, s.drafts.get(draft_id), "rubric", rubrics=s.catalog.all(), errors={}, values={}, slots=TRAIT_SLOTS
    )


def _field_of(message: str) -> str:
    found = _LOC.search(message)
    if found is None:
        return "rubric"
    part = found.group(2)
    return f"trait-{found.group(1)}-{part if part in ('name', 'min', 'max') else 'levels'}"


def _levels(text: str, index: int) -> dict[str, str]:
    levels = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        score, sep, description = line.partition(":")
        if not sep or not score.strip().lstrip("-").isdigit():
            raise ApiError(
                400, f"write each level as 'score: description' (got {line.strip()[:40]!r})", f"trait-{index}-levels"
            )
        levels[score.strip()] = description.strip()
    return levels


def _slots(form: Any) -> int:
    """How many trait boxes the written rubric has (4, more after "Add a trait")."""
    raw = str(form.get("slots") or "")
    return min(MAX_TRAIT_SLOTS, max(TRAIT_SLOTS, int(raw))) if raw.isdigit() else TRAIT_SLOTS


def _rubric_from_form(form: Any) -> Rubric:
    traits: list[dict[str, Any]] = []
    for i in range(_slots(form)):
        name = str(form.get(f"trait-{i}-name") or "").strip()
        if not name:
            continue
        lo, hi = str(form.get(f"trait-{i}-min") or ""), str(form.get(f"trait-{i}-max") or "")
        if not lo.lstrip("-").isdigit() or not hi.lstrip("-").isdigit():
            raise ApiError(400, "min and max must be whole numbers", f"trait-{len(traits)}-min")
        levels = _levels(str(form.get(f"trait-{i}-levels") or ""), len(traits))
        traits.append({"name": name, "min": int(lo), "max": int(hi), "levels": levels})
    if not traits:
        raise ApiError(400, "give at least one trait", "trait-0-name")
    raw = {"name": str(form.get("name") or "my rubric"), "prompt": str(form.get("prompt") or ""), "traits": traits}
    return library.rubric_from_dict(raw)


@router.post("/drafts/{draft_id}/rubric")
async def rubric_submit(draft_id: str, request: Request) -> Response:
    s = state_of(request)
    draft = s.drafts.get(draft_id)
    form = await _form(request)
    mode = str(form.get("mode") or "")
    if mode == "form" and str(form.get("action")) == "add_trait":  # one more trait box, what was typed kept
        values = {k: str(v) for k, v in form.items() if isinstance(v, str)}
        slots = min(MAX_TRAIT_SLOTS, _slots(form) + 1)
        return _step(request, draft, "rubric", rubrics=s.catalog.all(), errors={}, values=values, slots=slots)
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
        values = {k: str(v) for k, v in form.items() if isinstance(v, str)}
        return _step(
            request,
            draft,
            "rubric",
            status=400,
            rubrics=s.catalog.all(),
            errors={field: message},
            values=values,
            slots=_slots(form),
        )
    s.drafts.save(draft.model_copy(update={"rubric_id": rubric_id}))
    return redirect(f"/drafts/{draft_id}/essays")


def _with_rubric(request: Request, draft_id: str) -> tuple[Draft, Rubric]:
    s = state_of(request)
    draft = s.drafts.get(draft_id)
    if draft.rubric_id is None:
        raise ApiError(409, "choose a rubric first (step 1)")
    return draft, s.catalog.get(draft.rubric_id)


# -- 2 essays -------------------------------------------------------------------------------------------------


@router.get("/drafts/{draft_id}/essays")
def essays_page(draft_id: str, request: Request) -> Response:
    draft, rubric = _with_rubric(request, draft_id)
    essays = state_of(request).drafts.essays(draft, rubric)
    return _step(request, draft, "essays", errors={}, preview=essays[:5], values={})


@router.post("/drafts/{draft_id}/essays")
async def essays_submit(draft_id: str, request: Request) -> Response:
    s = state_of(request)
    draft, rubric = _with_rubric(request, draft_id)
    form = await _form(request)
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
            upload = library.apply_limits(
                library.EssayUpload([*s.drafts.essays(draft, rubric), essay], Refusals.of(draft)),
                limits.max_rows,
                limits.max_essay_chars,
            )
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
            upload = library.essays_from_upload(
                direct.data, direct.filename, rubric, fmt, limits.max_rows, limits.max_essay_chars
            )
    except (ApiError, MadragError) as exc:
        message = exc.message if isinstance(exc, ApiError) else str(exc)
        field = "essay_text" if str(form.get("mode")) == "paste" else "file"
        typed = {k: str(v) for k, v in form.items() if isinstance(v, str)}  # a pasted essay is never wiped
        return _step(request, draft, "essays", status=400, errors={field: message}, preview=[], values=typed)
    draft = s.drafts.set_essays(draft, upload.essays, upload.refused)
    return _step(request, draft, "essays", errors={}, preview=upload.essays[:5], values={}, read_as=read_as)


# -- 3 exemplars ----------------------------------------------------------------------------------------------


def _pool_options(request: Request, draft: Draft, rubric: Rubric) -> list[tuple[str, str, bool]]:
    s = state_of(request)
    return [
        (
            "folds",
            "the other parts of your file (your scored essays, split by its fold column; the part below is scored)",
            draft.has_folds and draft.has_scores,
        ),
        ("same", "your scored essays themselves (an essay never retrieves itself)", draft.has_scores),
        ("asap", f"the shipped ASAP set {rubric.essay_set} essays", s.catalog.pool_available(rubric)),
        ("none", "no example essays (the Quick way, or a debate without examples)", True),
    ]


@router.get("/drafts/{draft_id}/exemplars")
def exemplars_page(draft_id: str, request: Request) -> Response:
    draft, rubric = _with_rubric(request, draft_id)
    options = _pool_options(request, draft, rubric)
    default = next(key for key, _, ok in options if ok)
    return _step(request, draft, "exemplars", options=options, default=default, errors={})


@router.post("/drafts/{draft_id}/exemplars")
async def exemplars_submit(draft_id: str, request: Request) -> Response:
    s = state_of(request)
    draft, rubric = _with_rubric(request, draft_id)
    form = await _form(request)
    pool = str(form.get("pool") or "none")
    options = {key: ok for key, _, ok in _pool_options(request, draft, rubric)}
    fold = str(form.get("eval_fold") or "0").strip()
    if not options.get(pool) or not fold.lstrip("-").isdigit():
        error = (
            {"pool": "choose one of the pools offered"} if not options.get(pool) else {"eval_fold": "a whole number"}
        )
        return _step(
            request,
            draft,
            "exemplars",
            status=400,
            options=_pool_options(request, draft, rubric),
            default="none",
            errors=error,
        )
    protocols = draft.protocols if pool != "none" else ["MAD"]
    s.drafts.save(draft.model_copy(update={"pool": pool, "eval_fold": int(fold), "protocols": protocols}))
    return redirect(f"/drafts/{draft_id}/backend")


# -- 4 backend, estimate, start -------------------------------------------------------------------------------


def _protocol_options(draft: Draft) -> list[tuple[str, bool]]:
    return [(name, draft.pool != "none" or not library.uses_retrieval(name)) for name in library.protocol_names()]


@router.get("/drafts/{draft_id}/backend")
def backend_page(draft_id: str, request: Request) -> Response:
    draft, _rubric = _with_rubric(request, draft_id)
    return _backend_page(request, draft, {})


def _backend_page(request: Request, draft: Draft, errors: dict[str, str], status: int = 200) -> Response:
    s = state_of(request)
    estimate = s.runs.describe(draft.estimate_run) if draft.estimate_run else None
    return _step(
        request,
        draft,
        "backend",
        status=status,
        errors=errors,
        protocols=_protocol_options(draft),
        estimate=estimate,
        note=library.TINY_MODEL_NOTE,
        has_key=s.drafts.key(draft.id) is not None,
        probe=draft.probe,
        presets=presets.PRESETS,
        teacher_protocols=plain_words.TEACHER_PROTOCOLS,
    )


def _backend_from_form(form: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"kind": str(form.get("kind") or "llamacpp")}
    for name in ("model", "base_url"):
        if value := str(form.get(name) or "").strip():
            raw[name] = value
    for name, cast in (("concurrency", int), ("max_tokens", int), ("fake_latency_s", float)):
        if value := str(form.get(name) or "").strip():
            try:
                raw[name] = cast(value)
            except ValueError:
                raise ApiError(400, "must be a number", name) from None
    logprobs = {"yes": True, "no": False}.get(str(form.get("logprobs") or "auto"))
    if logprobs is not None:
        raw["logprobs"] = logprobs
    return raw


async def _test_connection(request: Request, draft: Draft) -> Response:
    """Send the test request; when the server answered, its logprobs answer becomes the draft's setting."""
    s = state_of(request)
    found = await service.try_backend(s, s.drafts.backend(draft))
    backend = {**draft.backend, "logprobs": found.logprobs} if found.answered else draft.backend
    draft = draft.model_copy(update={"backend": backend, "probe": found.model_dump()})
    s.drafts.save(draft)
    return _backend_page(request, draft, {})


@router.post("/drafts/{draft_id}/backend")
async def backend_submit(draft_id: str, request: Request) -> Response:
    s = state_of(request)
    draft, rubric = _with_rubric(request, draft_id)
    form = await _form(request)
    try:
        raw = _backend_from_form(form)
        BackendSettings.model_validate(raw)
        key = str(form.get("api_key") or "")
        if key:
            s.drafts.set_key(draft.id, SecretStr(key))
        protocols = [str(p) for p in form.getlist("protocols")] or draft.protocols
        draft = draft.model_copy(update={"backend": raw, "protocols": protocols, "name": str(form.get("name") or "")})
        s.drafts.save(draft)
        if str(form.get("action")) == "test":
            return await _test_connection(request, draft)
        if str(form.get("action")).startswith("preset-"):  # fill in a known server, to test before a run
            preset = str(form.get("action"))[len("preset-") :]
            draft = draft.model_copy(update={"backend": presets.apply(raw, preset), "probe": None})
            s.drafts.save(draft)
            return _backend_page(request, draft, {})
        if draft.pool is None or not draft.n_essays:
            raise ApiError(409, "add essays (step 2) and choose exemplars (step 3) first", "protocols")
        if str(form.get("action")) == "calibrate":  # the anchor papers first, with this backend
            return pages_calibration.start(s, draft, rubric)
        request_body = _run_request(draft, s.drafts.backend(draft), form, str(form.get("action")) == "estimate")
        upload = library.EssayUpload(s.drafts.essays(draft, rubric), Refusals.of(draft))
        service.check_protocols(protocols, draft.pool)  # type: ignore[arg-type]
        meta = service.create_run(s, rubric, upload, draft.pool, request_body)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        return _backend_page(request, draft, {str(first["loc"][0]): first["msg"]}, 400)
    except ServerError as exc:  # the pages' own checks and the run's (madrag.server.faults)
        return _backend_page(request, draft, {exc.field or "kind": exc.message}, http_status(exc))
    except MadragError as exc:
        return _backend_page(request, draft, {"kind": str(exc)}, 400)
    gradebook.carry_roster(s.drafts.folder(draft.id), s.runs.run_dir(meta.id))
    run_list.mark_from_pages(s.runs.run_dir(meta.id))
    if request_body.dry_run:
        s.drafts.save(draft.model_copy(update={"estimate_run": meta.id}))
        return redirect(f"/drafts/{draft_id}/backend#estimate")
    return redirect(f"/runs/{meta.id}")


def _run_request(draft: Draft, backend: BackendSettings, form: Any, dry_run: bool) -> RunCreate:
    price = None
    prompt, completion = str(form.get("price_prompt") or "").strip(), str(form.get("price_completion") or "").strip()
    if prompt or completion:
        try:
            price = PriceIn(prompt=float(prompt or 0), completion=float(completion or 0))
        except ValueError:
            raise ApiError(
                400, "prices are dollars per million tokens: numbers, not negative", "price_prompt"
            ) from None
    return RunCreate(
        name=draft.name,
        rubric_id=draft.rubric_id,
        essays=[],
        protocols=draft.protocols,
        eval_fold=draft.eval_fold,
        backend=backend,
        dry_run=dry_run,
        price=price,
    )
