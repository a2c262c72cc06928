"""A run's final trait scores kept beside its store (``scores-index.json``), so a large run opens without
re-reading every Judge record: written when a job that scored the whole run ends (``madrag score``, the Python
API and the web app alike: :func:`madrag.api.scoring.arun_job`), or when the web app first reads a finished run;
valid while the store holds the same number of records (a resume that adds records makes it stale)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from madrag.atomic_files import write_text_atomic
from madrag.protocols.base import TraitScore
from madrag.records import ScoreResult
from madrag.store import RunStore

INDEX_FILE = "scores-index.json"
"""The file beside the run's store."""


def save_index(run_dir: Path, scores: list[TraitScore], count: int) -> None:
    """Keep the run's final scores beside its store, for a store of ``count`` records."""
    blob = {"records": count, "scores": [s.model_dump(mode="json") for s in scores]}
    write_text_atomic(Path(run_dir) / INDEX_FILE, json.dumps(blob))


def load_index(run_dir: Path, count: int) -> list[TraitScore] | None:
    """The kept scores when the store still holds ``count`` records, else None. The file was written from the
    library's own objects by :func:`save_index`, so they are rebuilt without validating each again (6,000
    scores load in a fraction of the time)."""
    path = Path(run_dir) / INDEX_FILE
    if not path.is_file():
        return None
    try:
        blob = json.loads(path.read_text(encoding="utf-8"))
        if blob.get("records") != count:
            return None
        return [_trait_score(s) for s in blob["scores"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def keep_job_scores(run_dir: Path, scores: list[TraitScore], essays: int) -> bool:
    """Keep a finished job's final ``scores`` as the run's when the job scored all of the run's essays (``essays``
    of them: not a sample, a shard or a ``--limit``); whether they were kept."""
    store = RunStore(Path(run_dir) / "store.sqlite", read_only=True)
    try:
        whole = store.essay_count() == essays
        count = store.count()
    finally:
        store.close()
    if whole:
        save_index(run_dir, scores, count)
    return whole


def _trait_score(raw: dict[str, Any]) -> TraitScore:
    result = raw.get("result")
    if result is not None:
        dist = result.get("distribution")
        if dist is not None:
            result["distribution"] = {int(k): v for k, v in dist.items()}
        result = ScoreResult.model_construct(**result)
    return TraitScore.model_construct(**{**raw, "result": result})
