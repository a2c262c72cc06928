"""The operations the API and the pages share: start a run from a request, read its grid and one essay's
records, review a score, export. Both front ends call these, so a page and an API call behave the same."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from madrag.data.refusals import Refusals
from madrag.errors import MadragError
from madrag.providers.backends import find_backend
from madrag.rubric import Rubric
from madrag.server import access, library
from madrag.server.catalog import Catalog
from madrag.server.config import ServerConfig
from madrag.server.drafts import Drafts
from madrag.server.http.faults import BadInput, InvalidRequest, Unavailable, WrongState
from madrag.server.http.refusals import check_count
from madrag.server.http.responses import SingleScore, TraitResult
from madrag.server.http.schemas import (
    BackendSettings,
    DataUpload,
    EssayIn,
    PoolChoice,
    RunCreate,
    RunKind,
    SingleScoreIn,
)
from madrag.server.reviews import BulkProgress, review_version
from madrag.server.runs import probe, scoring
from madrag.server.runs.probe import ProbeResult
from madrag.server.runs.scheduler import NewRun, RunManager, RunMeta
from madrag.teacher.plain_words import protocol_label


@dataclass
class State:
    """What every request handler reaches: settings, rubrics and runs."""

    config: ServerConfig
    catalog: Catalog
    runs: RunManager
    drafts: Drafts
    memos: dict[tuple[str, str], tuple[object, int, Any]] = field(default_factory=dict)
    approvals: dict[str, BulkProgress] = field(default_factory=dict)  # bulk approvals being written, by id

    def memo(self, name: str, run_id: str, compute: Callable[[], Any], reviews: bool = True) -> Any:
        """``compute()`` for a run, kept until the run's scores or reviews change (a large run's grid is
        built once, not on every request); ``reviews=False``: what the reviews do not change, kept until the
        scores change."""
        view = self.runs.view(run_id)  # kept in the key, so a new view is never mistaken for an old one
        reviewed = review_version(self.runs.run_dir(run_id)) if reviews else 0
        found = self.memos.get((name, run_id))
        if found is None or found[0] is not view or found[1] != reviewed:
            found = (view, reviewed, compute())
            self.memos[(name, run_id)] = found
        return found[2]


def state_of(request: Request) -> State:
    """The server's state (settings, rubrics, runs), for the API and the pages alike."""
    found: State = request.app.state.madrag
    return found


# -- inputs ------------------------------------------------------------------------------------------------


def resolve_rubric(state: State, rubric_id: str | None, rubric: dict[str, Any] | None) -> Rubric:
    """The rubric of a request: by id (not found when unknown) or inline (a RubricError naming the bad field)."""
    if (rubric_id is None) == (rubric is None):
        raise InvalidRequest("give exactly one of rubric_id and rubric", "rubric_id")
    if rubric_id is not None:
        return state.catalog.get(rubric_id)
    return library.rubric_from_dict(rubric)


def read_essays(
    state: State, rubric: Rubric, essays: list[EssayIn] | None, data: DataUpload | None
) -> library.EssayUpload:
    """Essays of a request (a list or a data file), with the refused ones and why; BadInput when none is
    usable."""
    limits = state.config.limits
    if (essays is None) == (data is None):
        raise InvalidRequest("give exactly one of essays and data", "essays")
    if data is not None:
        raw = data.content.encode("utf-8")
        upload = library.essays_from_upload(raw, data.filename, rubric, data.format, limits)
    else:
        assert essays is not None
        check_count(len(essays), limits.max_rows)
        found, refused = [], Refusals()
        for i, item in enumerate(essays):
            try:
                found.append(library.essay_from_fields(item.model_dump(), rubric, f"essays[{i}]"))
            except MadragError as exc:
                refused.add(f"essays[{i}]", str(exc), item.id)
        upload = library.apply_limits(library.EssayUpload(found, refused), limits)
    if not upload.essays:
        first = upload.refused.examples[:3]
        reasons = "; ".join(
            r["reason"] if r["reason"].startswith(r["where"]) else f"{r['where']}: {r['reason']}" for r in first
        )
        reasons = reasons or "no essays"
        raise BadInput(f"no usable essays ({reasons})", "essays")
    return upload


def choose_pool(
    state: State, rubric: Rubric, upload: library.EssayUpload, pool: PoolChoice, eval_fold: int
) -> library.PoolMode:
    """The exemplar pool: ``auto`` resolved, and the chosen one checked against the essays."""
    folds = {e.fold for e in upload.essays}
    has_other_fold = upload.has_folds and eval_fold in folds and len(folds) > 1
    if pool == "auto":
        if has_other_fold and upload.has_scores:
            return "folds"
        if state.catalog.pool_available(rubric):
            return "asap"
        return "same" if upload.has_scores else "none"
    if pool == "folds" and not (has_other_fold and upload.has_scores):
        raise BadInput(f"pool 'folds' needs scored essays with a fold column, fold {eval_fold} and another", "pool")
    if pool == "same" and not upload.has_scores:
        raise BadInput("pool 'same' needs essays with human scores", "pool")
    if pool == "asap" and not state.catalog.pool_available(rubric):
        raise BadInput("the shipped ASAP pool fits only the ASAP set 7 and 8 rubrics", "pool")
    return pool


def check_protocols(protocols: list[str], pool: library.PoolMode) -> None:
    """Unknown protocols are an invalid request; protocols with retrieval need a pool."""
    for name in protocols:
        try:
            retrieves = library.uses_retrieval(name)
        except MadragError as exc:
            raise InvalidRequest(str(exc), "protocols") from exc
        if retrieves and pool == "none":
            raise BadInput(
                f"protocol {name} retrieves scored exemplars: choose an exemplar pool or a protocol without "
                "retrieval (MAD, MA, SA)",
                "protocols",
            )


def _named(protocols: list[str]) -> str:
    labels = [f"“{protocol_label(p)}”" for p in protocols]
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def grading_protocol(protocols: list[str], chosen: str | None) -> str:
    """Which protocol's scores are the run's grades: the one chosen, which must be one of ``protocols``; with one
    protocol, that one. Several protocols and no choice is refused: a grade is never taken from a method the
    teacher did not pick."""
    if chosen:
        if chosen not in protocols:
            raise InvalidRequest(
                f"The grades must come from a method the run uses ({_named(protocols)}), not from {_named([chosen])}.",
                "grading_protocol",
            )
        return chosen
    if len(protocols) == 1:
        return protocols[0]
    raise InvalidRequest(
        f"You chose {len(protocols)} scoring methods, {_named(protocols)}: choose which one gives the grades (the "
        "other is shown beside it for comparison), or keep one.",
        "grading_protocol",
    )


def start_run(state: State, req: RunCreate) -> RunMeta:
    """Create and start a run (or a dry-run estimate) from an API request."""
    rubric = resolve_rubric(state, req.rubric_id, req.rubric)
    upload = read_essays(state, rubric, req.essays, req.data)
    pool = choose_pool(state, rubric, upload, req.pool, req.eval_fold)
    return create_run(state, rubric, upload, pool, req)


def create_run(
    state: State,
    rubric: Rubric,
    upload: library.EssayUpload,
    pool: library.PoolMode,
    req: RunCreate,
    kind: RunKind = "run",
) -> RunMeta:
    """Start the run (or the sample of a dry run) on checked inputs, its protocols checked against its pool."""
    check_protocols(req.protocols, pool)
    grading = grading_protocol(req.protocols, req.grading_protocol)
    if find_backend(req.backend.kind).traits.needs_model and not req.backend.model:
        raise InvalidRequest(f"the {req.backend.kind} backend needs the name of the model its server serves", "model")
    shipped = state.catalog.shipped_pool(rubric) if pool == "asap" else None
    if pool == "asap" and shipped is None:
        raise BadInput("no shipped exemplar pool fits this rubric (ASAP sets 7 and 8 only)", "pool")
    scored = len(upload.essays) if pool != "folds" else sum(e.fold == req.eval_fold for e in upload.essays)
    planned = min(scored, req.limit) if req.limit else scored
    price = None if req.price is None else (req.price.prompt, req.price.completion)
    new = NewRun(
        kind="estimate" if req.dry_run else kind,
        name=req.name,
        rubric=rubric,
        essays=upload.essays,
        refused=upload.refused,
        protocols=req.protocols,
        grading_protocol=grading,
        pool=pool,
        pool_essays=shipped,
        eval_fold=req.eval_fold,
        backend=req.backend,
        limit=min(req.sample, planned) if req.dry_run else req.limit,
        planned=planned,
        price=price,
        settings=scoring.for_request(req.settings, req.backend.max_tokens),
    )
    return state.runs.create(new)


# -- the backend ---------------------------------------------------------------------------------------------


async def try_backend(state: State, backend: BackendSettings) -> ProbeResult:
    """Send the test request to an OpenAI-compatible backend (an invalid request for another kind or without a
    model, :class:`NotAllowed` for an address the operator did not allow); a key not typed in is read from the
    variable the server names for its kind, only where that key goes to ``base_url`` (:func:`access.env_key`)."""
    if not find_backend(backend.kind).traits.connection_test:
        raise InvalidRequest(
            f"the test request is an OpenAI-compatible one: the {backend.kind} backend is not tested before a run",
            "kind",
        )
    if not backend.model:
        raise InvalidRequest("an OpenAI-compatible backend needs the model name its server serves", "model")
    key_env = access.env_key(state.config, backend.kind, backend.base_url)
    return await state.runs.test_backend(backend.kind, backend.model, backend.base_url, key_env, backend.api_key)


async def only_model(state: State, backend: BackendSettings) -> str | None:
    """The model a server kind's backend serves when it serves exactly one (its ``GET /models``), so the teacher
    need not type a name there is no choice of; None otherwise."""
    if not find_backend(backend.kind).traits.connection_test or not backend.base_url:
        return None
    found = probe.only_model(backend.base_url, state.config.key_env(backend.kind), backend.api_key)
    return await asyncio.wrap_future(state.runs.worker.submit(found))


# -- one essay, now ---------------------------------------------------------------------------------------


async def score_one(state: State, req: SingleScoreIn) -> SingleScore:
    """Score one essay and wait at most ``time_limit_s``; :class:`Unavailable` when the limit passes (the run
    is cancelled, its finished calls kept) or scoring fails."""
    limit = min(req.time_limit_s, state.config.limits.max_time_limit_s)
    rubric = resolve_rubric(state, req.rubric_id, req.rubric)
    upload = read_essays(state, rubric, [req.essay], None)
    run = RunCreate(name=f"single essay {req.essay.id}", protocols=[req.protocol], backend=req.backend)
    meta = create_run(state, rubric, upload, req.pool, run, kind="single")
    ended = state.runs.ended(meta.id)
    assert ended is not None
    try:
        await asyncio.wait_for(ended, limit)
    except TimeoutError:
        with contextlib.suppress(WrongState):  # it may have ended meanwhile
            state.runs.stop(meta.id)
        raise Unavailable(f"scoring did not finish within the time limit of {limit:g} s (run {meta.id})") from None
    meta = state.runs.meta(meta.id)
    if meta.status != "finished":
        raise Unavailable(f"scoring failed: {meta.error or meta.status} (run {meta.id})")
    scores = [
        TraitResult(
            trait=s.trait,
            score=s.score,
            rationale=s.rationale,
            score_mode=None if s.result is None else s.result.mode,
            distribution=None if s.result is None else s.result.distribution,
        )
        for s in state.runs.view(meta.id).scores
    ]
    return SingleScore(
        run_id=meta.id, essay_id=req.essay.id, protocol=req.protocol, scores=scores, elapsed_s=meta.elapsed_s
    )
