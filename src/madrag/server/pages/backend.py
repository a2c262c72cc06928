"""Step 4 of a run's set-up: which model scores (a real one asked for, by preset, and tested; the embedded model
and the fake backend only offered to try the pipeline, never chosen for the teacher), how to score, the dry-run
estimate, calibration on the teacher's own papers, and the start (also from the calibration page)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError

from madrag.errors import MadragError
from madrag.providers.backends import find_backend
from madrag.rubric import Rubric
from madrag.server import library, service
from madrag.server.class_book import carry_roster
from madrag.server.drafts import Draft
from madrag.server.http.errors import ApiError, http_status
from madrag.server.http.faults import ServerError
from madrag.server.http.schemas import BackendSettings, PriceIn, RunCreate
from madrag.server.http.security import check_csrf
from madrag.server.pages import backend_form
from madrag.server.pages import calibration as pages_calibration
from madrag.server.pages import review as review_pages
from madrag.server.pages.rendering import redirect, state_of
from madrag.server.pages.setup import step_page, with_rubric
from madrag.server.runs import archive as run_list
from madrag.teacher import plain_words, presets

router = APIRouter(include_in_schema=False)
SERVER_COOKIE = "madrag_server"
"""This browser's model server (its kind, address and model name; never a key), so a second class is not typed
again."""
REMEMBERED = ("kind", "base_url", "model")
CHOOSE_A_MODEL = (
    "choose which model scores: a model server (a preset fills it in), or, to try the pipeline only, the embedded model"
)


def _protocol_options(draft: Draft) -> list[tuple[str, bool]]:
    return [(name, draft.pool != "none" or not library.uses_retrieval(name)) for name in library.protocol_names()]


@router.get("/drafts/{draft_id}/backend")
def backend_page(draft_id: str, request: Request) -> Response:
    draft, _rubric = with_rubric(request, draft_id)
    if not draft.backend.get("kind"):  # nothing chosen yet for this class: the server this browser used last
        draft = draft.model_copy(update={"backend": remembered_server(request)})
    return _backend_page(request, draft, {})


def remembered_server(request: Request) -> dict[str, Any]:
    """The model server this browser chose last (a model server's kind only: never the fake or embedded one)."""
    found = dict(parse_qsl(request.cookies.get(SERVER_COOKIE, "")))
    kind = found.get("kind", "")
    if kind not in presets.server_kinds():
        return {}
    return {k: v[:500] for k, v in found.items() if k in REMEMBERED and v}


def remember(response: Response, backend: dict[str, Any], reviewer: str) -> Response:
    """This browser keeps the model server chosen (kind, address, model: never a key) and the teacher's name."""
    if str(backend.get("kind") or "") in presets.server_kinds():
        fields = urlencode({k: str(backend[k]) for k in REMEMBERED if backend.get(k)})
        response.set_cookie(SERVER_COOKIE, fields, max_age=365 * 86400, httponly=True, samesite="strict", path="/")
    review_pages.remember_reviewer(response, reviewer)
    return response


def _backend_page(
    request: Request, draft: Draft, errors: dict[str, str], status: int = 200, untested: str = ""
) -> Response:
    """The page; ``untested``: the kind a "Test connection" was asked for that the test does not apply to."""
    s = state_of(request)
    estimate = s.runs.describe(draft.estimate_run) if draft.estimate_run else None
    return step_page(
        request,
        draft,
        "backend",
        status=status,
        errors=errors,
        protocols=_protocol_options(draft),
        estimate=estimate,
        note=library.TINY_MODEL_NOTE,
        has_key=s.drafts.key(draft.id, str(draft.backend.get("kind") or ""), draft.backend.get("base_url")) is not None,
        probe=draft.probe,
        untested=untested,
        untested_words=backend_form.untested_words,
        presets=presets.PRESETS,
        teacher_protocols=plain_words.TEACHER_PROTOCOLS,
        reviewer=review_pages.remembered_reviewer(request),
        **backend_form.view(),
    )


def _backend_from_form(form: Any, kind: str = "") -> dict[str, Any]:
    """The backend fields typed for the chosen kind (or ``kind``: a preset's); without a model chosen,
    :data:`CHOOSE_A_MODEL` (none is chosen for the teacher)."""
    kind = kind or str(form.get("kind") or "")
    if not kind and str(form.get("base_url") or "").strip():  # a server's address typed: a model server
        kind = presets.PRESET_KIND
    if not kind:
        raise ApiError(400, CHOOSE_A_MODEL, "kind")
    return backend_form.read_backend(form, kind)


async def _test_connection(request: Request, draft: Draft) -> Response:
    """Send the test request; when the server answered, its logprobs answer becomes the draft's setting."""
    s = state_of(request)
    kind = str(draft.backend["kind"])
    if not find_backend(kind).traits.connection_test:  # said plainly, not as an error
        return _backend_page(request, draft.model_copy(update={"probe": None}), {}, untested=kind)
    found = await service.try_backend(s, s.drafts.backend(draft))
    backend = {**draft.backend, "logprobs": found.logprobs} if found.answered else draft.backend
    draft = draft.model_copy(update={"backend": backend, "probe": found.model_dump()})
    s.drafts.save(draft)
    return _backend_page(request, draft, {})


def _preset(request: Request, draft: Draft, form: Any, name: str) -> Response:
    """Fill in a known server (to test before a run): what else was typed is kept."""
    s = state_of(request)
    raw = _backend_from_form(form, presets.PRESET_KIND)  # what was typed, as the preset's kind takes it
    draft = draft.model_copy(update={"backend": presets.apply(raw, name), "probe": None})
    s.drafts.save(draft)
    return _backend_page(request, draft, {})


@router.post("/drafts/{draft_id}/backend")
async def backend_submit(draft_id: str, request: Request) -> Response:
    form = await check_csrf(request)
    response = await _submit(draft_id, request, form)
    draft = state_of(request).drafts.get(draft_id)
    return remember(response, draft.backend, review_pages.reviewer_of(request, str(form.get("reviewer") or "")))


async def _submit(draft_id: str, request: Request, form: Any) -> Response:
    s = state_of(request)
    draft, rubric = with_rubric(request, draft_id)
    action = str(form.get("action") or "")
    protocols = [str(p) for p in form.getlist("protocols")] or draft.protocols
    grading = str(form.get("grading_protocol") or "") or draft.grading_protocol
    update = {"protocols": protocols, "grading_protocol": grading, "name": str(form.get("name") or "")}
    draft = draft.model_copy(update=update)
    try:
        if action.startswith("preset-"):
            return _preset(request, draft, form, action[len("preset-") :])
        raw = _backend_from_form(form)
        BackendSettings.model_validate(raw)
        if key := backend_form.typed_key(form, raw["kind"]):
            s.drafts.set_key(draft.id, key, raw["kind"], raw.get("base_url"))
        draft = draft.model_copy(update={"backend": raw})
        if not raw.get("model"):  # a server that serves one model: its name, not typed
            found = await service.only_model(s, s.drafts.backend(draft))
            draft = draft.model_copy(update={"backend": {**raw, "model": found}}) if found else draft
        s.drafts.save(draft)
        if action == "test":
            return await _test_connection(request, draft)
        if action == "calibrate":  # the anchor papers first, with this backend
            _ready(draft)
            return pages_calibration.start(s, draft, rubric)
        return _start(request, draft, rubric, _run_request(draft, s.drafts.backend(draft), form, action == "estimate"))
    except ValidationError as exc:
        first = exc.errors()[0]
        return _backend_page(request, draft, {str(first["loc"][0]): first["msg"]}, 400)
    except ServerError as exc:  # the pages' own checks and the run's (madrag.server.http.faults)
        return _backend_page(request, draft, {exc.field or "kind": exc.message}, http_status(exc))
    except MadragError as exc:
        return _backend_page(request, draft, {"kind": str(exc)}, 400)


@router.post("/drafts/{draft_id}/start")
async def start_saved(draft_id: str, request: Request) -> Response:
    """Start the class run with what the draft holds (the calibration page's "Looks right: score the whole
    class"): its backend, protocols and name, as last saved on the backend step."""
    s = state_of(request)
    draft, rubric = with_rubric(request, draft_id)
    await check_csrf(request)
    try:
        return _start(request, draft, rubric, _run_request(draft, s.drafts.backend(draft), {}, False))
    except ServerError as exc:
        return _backend_page(request, draft, {exc.field or "kind": exc.message}, http_status(exc))
    except MadragError as exc:
        return _backend_page(request, draft, {"kind": str(exc)}, 400)


def _ready(draft: Draft) -> None:
    if draft.pool is None or not draft.n_essays:
        raise ApiError(409, "add essays (step 2) and choose exemplars (step 3) first", "protocols")
    if not draft.backend.get("kind"):
        raise ApiError(400, CHOOSE_A_MODEL, "kind")


def _start(request: Request, draft: Draft, rubric: Rubric, body: RunCreate) -> Response:
    """Create the run (or the dry run) of the draft's essays and go to its page."""
    s = state_of(request)
    _ready(draft)
    upload = library.EssayUpload(s.drafts.essays(draft, rubric), draft.refusals())
    meta = service.create_run(s, rubric, upload, draft.pool, body)  # type: ignore[arg-type]
    carry_roster(s.drafts.folder(draft.id), s.runs.run_dir(meta.id))
    run_list.mark_from_pages(s.runs.run_dir(meta.id))
    if body.dry_run:
        s.drafts.save(draft.model_copy(update={"estimate_run": meta.id}))
        return redirect(f"/drafts/{draft.id}/backend#estimate")
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
        # with several methods ticked, the one she chose gives the grades (none chosen: refused, in words)
        grading_protocol=draft.grading_protocol if len(draft.protocols) > 1 else None,
        eval_fold=draft.eval_fold,
        backend=backend,
        dry_run=dry_run,
        price=price,
    )
