"""The operations the API and the pages share: start a run from a request, read its grid and one essay's
records, review a score, export. Both front ends call these, so a page and an API call behave the same."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from madrag.errors import MadragError
from madrag.rubric import Rubric
from madrag.server import library
from madrag.server.catalog import Catalog
from madrag.server.config import ServerConfig
from madrag.server.drafts import Drafts
from madrag.server.errors import ApiError
from madrag.server.reviews import Review, add_review, all_reviews, latest, review_version
from madrag.server.runs import RunManager, RunMeta
from madrag.server.schemas import DataUpload, EssayIn, OverrideIn, PoolChoice, RunCreate, SingleScoreIn


@dataclass
class State:
    """What every request handler reaches: settings, rubrics and runs."""

    config: ServerConfig
    catalog: Catalog
    runs: RunManager
    drafts: Drafts
    memos: dict[tuple[str, str], tuple[object, int, Any]] = field(default_factory=dict)

    def memo(self, name: str, run_id: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` for a run, kept until the run's scores or reviews change (a large run's grid is
        built once, not on every request)."""
        view = self.runs.view(run_id)  # kept in the key, so a new view is never mistaken for an old one
        reviewed = review_version(self.runs.run_dir(run_id))
        found = self.memos.get((name, run_id))
        if found is None or found[0] is not view or found[1] != reviewed:
            found = (view, reviewed, compute())
            self.memos[(name, run_id)] = found
        return found[2]


# -- inputs ------------------------------------------------------------------------------------------------


def resolve_rubric(state: State, rubric_id: str | None, rubric: dict[str, Any] | None) -> Rubric:
    """The rubric of a request: by id (404 when unknown) or inline (400 naming the bad field)."""
    if (rubric_id is None) == (rubric is None):
        raise ApiError(422, "give exactly one of rubric_id and rubric", "rubric_id")
    if rubric_id is not None:
        return state.catalog.get(rubric_id)
    return library.rubric_from_dict(rubric)


def read_essays(
    state: State, rubric: Rubric, essays: list[EssayIn] | None, data: DataUpload | None
) -> library.EssayUpload:
    """Essays of a request (a list or a data file), with the refused ones and why; 400 when none is usable."""
    limits = state.config.limits
    if (essays is None) == (data is None):
        raise ApiError(422, "give exactly one of essays and data", "essays")
    if data is not None:
        raw = data.content.encode("utf-8")
        upload = library.essays_from_upload(
            raw, data.filename, rubric, data.format, limits.max_rows, limits.max_essay_chars
        )
    else:
        assert essays is not None
        if len(essays) > limits.max_rows:
            raise ApiError(413, f"more than {limits.max_rows:,} essays in one request", "essays")
        found, refused = [], []
        for i, item in enumerate(essays):
            try:
                found.append(library.essay_from_fields(item.model_dump(), rubric, f"essays[{i}]"))
            except MadragError as exc:
                refused.append({"where": f"essays[{i}]", "reason": str(exc)})
        upload = library.apply_limits(library.EssayUpload(found, refused), limits.max_rows, limits.max_essay_chars)
    if not upload.essays:
        reasons = "; ".join(f"{r['where']}: {r['reason']}" for r in upload.refused[:3]) or "no essays"
        raise ApiError(400, f"no usable essays ({reasons})", "essays")
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
        raise ApiError(
            400, f"pool 'folds' needs scored essays with a fold column, fold {eval_fold} and another", "pool"
        )
    if pool == "same" and not upload.has_scores:
        raise ApiError(400, "pool 'same' needs essays with human scores", "pool")
    if pool == "asap" and not state.catalog.pool_available(rubric):
        raise ApiError(400, "the shipped ASAP pool fits only the ASAP set 7 and 8 rubrics", "pool")
    return pool


def check_protocols(protocols: list[str], pool: library.PoolMode) -> None:
    """Unknown protocols are 422; protocols with retrieval need a pool (400)."""
    for name in protocols:
        try:
            retrieves = library.uses_retrieval(name)
        except MadragError as exc:
            raise ApiError(422, str(exc), "protocols") from exc
        if retrieves and pool == "none":
            raise ApiError(
                400,
                f"protocol {name} retrieves scored exemplars: choose an exemplar pool or a protocol without "
                "retrieval (MAD, MA, SA)",
                "protocols",
            )


def start_run(state: State, req: RunCreate) -> RunMeta:
    """Create and start a run (or a dry-run estimate) from an API request."""
    rubric = resolve_rubric(state, req.rubric_id, req.rubric)
    upload = read_essays(state, rubric, req.essays, req.data)
    pool = choose_pool(state, rubric, upload, req.pool, req.eval_fold)
    check_protocols(req.protocols, pool)
    return create_run(state, rubric, upload, pool, req)


def create_run(
    state: State, rubric: Rubric, upload: library.EssayUpload, pool: library.PoolMode, req: RunCreate
) -> RunMeta:
    """Start the run (or the sample of a dry run) on checked inputs."""
    scored = len(upload.essays) if pool != "folds" else sum(e.fold == req.eval_fold for e in upload.essays)
    planned = min(scored, req.limit) if req.limit else scored
    price = None if req.price is None else (req.price.prompt, req.price.completion)
    return state.runs.create(
        kind="estimate" if req.dry_run else "run",
        name=req.name,
        rubric=rubric,
        essays=upload.essays,
        refused=upload.refused,
        protocols=req.protocols,
        pool=pool,
        eval_fold=req.eval_fold,
        backend=req.backend,
        limit=min(req.sample, planned) if req.dry_run else req.limit,
        planned=planned,
        price=price,
    )


# -- one essay, now ---------------------------------------------------------------------------------------


async def score_one(state: State, req: SingleScoreIn) -> dict[str, Any]:
    """Score one essay and wait at most ``time_limit_s``; 503 when the limit passes (the run is cancelled, its
    finished calls kept)."""
    limit = min(req.time_limit_s, state.config.limits.max_time_limit_s)
    rubric = resolve_rubric(state, req.rubric_id, req.rubric)
    upload = read_essays(state, rubric, [req.essay], None)
    check_protocols([req.protocol], req.pool)
    run = RunCreate(name=f"single essay {req.essay.id}", protocols=[req.protocol], backend=req.backend)
    meta = create_run(state, rubric, upload, req.pool, run)
    future = state.runs.future(meta.id)
    assert future is not None
    try:
        await asyncio.wait_for(asyncio.wrap_future(future), limit)
    except TimeoutError:
        raise ApiError(503, f"scoring did not finish within the time limit of {limit:g} s (run {meta.id})") from None
    meta = state.runs.meta(meta.id)
    if meta.status != "finished":
        raise ApiError(503, f"scoring failed: {meta.error or meta.status} (run {meta.id})")
    view = state.runs.view(meta.id)
    scores = [
        {
            "trait": s.trait,
            "score": s.score,
            "rationale": s.rationale,
            "score_mode": None if s.result is None else s.result.mode,
            "distribution": None if s.result is None else s.result.distribution,
        }
        for s in view.scores
    ]
    return {
        "run_id": meta.id,
        "essay_id": req.essay.id,
        "protocol": req.protocol,
        "scores": scores,
        "elapsed_s": meta.elapsed_s,
    }


# -- reading a run -------------------------------------------------------------------------------------------


def cell_class(score: int | None, reference: int | None) -> str:
    """How a results cell is shown: missing, agreeing, off by one, or off by more."""
    if score is None:
        return "missing"
    if reference is None:
        return "plain"
    gap = abs(score - reference)
    return "agree" if gap == 0 else "near" if gap == 1 else "far"


def grid(state: State, run_id: str) -> dict[str, Any]:
    """The results grid: one row per essay, per protocol and trait its score, the human reference, the review
    in force and how far the score is from the reference."""
    return state.memo("grid", run_id, lambda: _grid(state, run_id))  # type: ignore[no-any-return]


def _grid(state: State, run_id: str) -> dict[str, Any]:
    view = state.runs.view(run_id)
    reviews = latest(all_reviews(state.runs.run_dir(run_id)))
    by_key = view_scores(view)
    traits = view.rubric.traits
    rows = []
    for essay in view.essays:
        refs = {t.name: essay.reference(t) for t in traits}
        cells = []
        for protocol in view.protocols:
            for trait in traits:
                found = by_key.get((protocol, essay.id, trait.name))
                score = None if found is None else found.score
                review = reviews.get((essay.id, trait.name, protocol))
                final = score if review is None else review.final
                cells.append(
                    {
                        "protocol": protocol,
                        "trait": trait.name,
                        "score": score,
                        "scored": found is not None,
                        "reference": refs[trait.name],
                        "final": final,
                        "review": None if review is None else review.action,
                        "class": cell_class(final, refs[trait.name]) if found is not None else "pending",
                    }
                )
        rows.append({"essay_id": essay.id, "cells": cells})
    return {"protocols": view.protocols, "traits": [t.name for t in traits], "rows": rows, "has_human": view.has_human}


def view_scores(view: library.RunView) -> dict[tuple[str, str, str], Any]:
    return {(s.protocol, s.essay_id, s.trait): s for s in view.scores}


def essay_detail(state: State, run_id: str, essay_id: str) -> dict[str, Any]:
    """One essay's text and, per trait and protocol, the Judge's rationale, score distribution, exemplars, the
    debate with confidences, and the reviews."""
    view = state.runs.view(run_id)
    essay = next((e for e in view.essays if e.id == essay_id), None)
    if essay is None:
        raise ApiError(404, f"run {run_id} has no essay {essay_id!r}", "essay_id")
    mine = [s for s in view.scores if s.essay_id == essay_id]
    records = library.essay_records(state.runs.run_dir(run_id), sorted({s.record_key for s in mine if s.record_key}))
    reviews = all_reviews(state.runs.run_dir(run_id), essay_id)
    traits = []
    for trait in view.rubric.traits:
        entries = []
        for protocol in view.protocols:
            found = next((s for s in mine if s.protocol == protocol and s.trait == trait.name), None)
            judge = records.get(found.record_key) if found is not None else None
            debate = [records[k] for k in (judge.context.get("debate") or [] if judge else []) if k in records]
            history = [r.model_dump() for r in reviews if r.trait == trait.name and r.protocol == protocol]
            entries.append(_protocol_entry(protocol, found, judge, debate, history))
        traits.append(
            {
                "trait": trait.name,
                "min": trait.min,
                "max": trait.max,
                "reference": essay.reference(trait),
                "raters": essay.rater_scores.get(trait.name, []),
                "protocols": entries,
            }
        )
    return {"run_id": run_id, "essay": {"id": essay.id, "text": essay.text, "fold": essay.fold}, "traits": traits}


def _protocol_entry(
    protocol: str, found: Any, judge: Any, debate: list[Any], history: list[dict[str, Any]]
) -> dict[str, Any]:
    result = None if found is None else found.result
    return {
        "protocol": protocol,
        "scored": found is not None,
        "score": None if found is None else found.score,
        "score_mode": None if result is None else result.mode,
        "distribution": None
        if result is None or result.distribution is None
        else {str(k): round(v, 4) for k, v in sorted(result.distribution.items())},
        "expected": None if result is None else result.expected,
        "rationale": "" if found is None else found.rationale,
        "judge_error": None if judge is None else judge.error,
        "exemplars": [] if judge is None else judge.context.get("exemplars") or [],
        "confidences": {} if judge is None else judge.context.get("confidences") or {},
        "debate": [
            {
                "role": r.role,
                "round": r.round,
                "text": r.text,
                "confidence": r.confidence,
                "confidence_source": r.confidence_source,
            }
            for r in debate
        ],
        "reviews": history,
        "review": history[-1] if history else None,
    }


# -- reviews and export ---------------------------------------------------------------------------------------


def add_override(state: State, run_id: str, req: OverrideIn) -> Review:
    """Record a review of one trait score (the agent's record stays as it is)."""
    view = state.runs.view(run_id)
    if not any(e.id == req.essay_id for e in view.essays):
        raise ApiError(404, f"run {run_id} has no essay {req.essay_id!r}", "essay_id")
    try:
        trait = view.rubric.trait(req.trait)
    except MadragError:
        raise ApiError(404, f"the rubric has no trait {req.trait!r}", "trait") from None
    protocol = req.protocol or (view.protocols[0] if view.protocols else "")
    if protocol not in view.protocols:
        raise ApiError(404, f"run {run_id} has no scores of protocol {protocol!r}", "protocol")
    found = view_scores(view).get((protocol, req.essay_id, trait.name))
    if found is None:
        raise ApiError(409, f"essay {req.essay_id} has no {protocol} score for {trait.name} yet", "trait")
    if req.action == "override":
        if req.score is None or not trait.contains(req.score):
            raise ApiError(422, f"score must be an integer from {trait.min} to {trait.max}", "score")
    review = Review(
        essay_id=req.essay_id,
        trait=trait.name,
        protocol=protocol,
        action=req.action,
        agent_score=found.score,
        new_score=req.score if req.action == "override" else found.score,
        comment=req.comment,
        reviewer=req.reviewer,
    )
    return add_review(state.runs.run_dir(run_id), review)


def _safe_cell(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula, prefixed with a quote."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def export_rows(state: State, run_id: str) -> list[dict[str, Any]]:
    """The library's score rows with the review in force beside each agent score."""
    return state.memo("export", run_id, lambda: _export_rows(state, run_id))  # type: ignore[no-any-return]


def _export_rows(state: State, run_id: str) -> list[dict[str, Any]]:
    view = state.runs.view(run_id)
    reviews = latest(all_reviews(state.runs.run_dir(run_id)))
    rows = []
    for row in library.export_rows(view):
        review = reviews.get((row["essay_id"], row["trait"], row["protocol"]))
        rows.append(
            {
                **row,
                "review": None if review is None else review.action,
                "override_score": None if review is None or review.action != "override" else review.new_score,
                "final_score": row["score"] if review is None else review.final,
                "review_comment": None if review is None else review.comment,
                "reviewer": None if review is None else review.reviewer,
                "reviewed_at": None if review is None else review.created_at,
            }
        )
    return rows


def export(state: State, run_id: str, fmt: str) -> tuple[str, str]:
    """(content, media type) of the scores export with reviews: CSV or JSONL."""
    rows = export_rows(state, run_id)
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "application/x-ndjson"
    if fmt != "csv":
        raise ApiError(422, "format must be csv or jsonl", "format")
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            flat = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in row.items()}
            writer.writerow(
                {k: _safe_cell(v) if k in ("rationale", "review_comment", "reviewer") else v for k, v in flat.items()}
            )
    return buf.getvalue(), "text/csv"
