"""A job's inputs: its rubric, the essays it scores and its exemplar pool (the fold split, or an explicit pool),
their fingerprints, the copies a run directory keeps of in-memory ones (``inputs/``), and the checks made on them
before a run starts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from madrag.data.essay import Essay, no_scores_line, traits_without_scores
from madrag.data.loaders import load_essays
from madrag.data.splits import split_essays
from madrag.errors import InputError
from madrag.pipeline.run_dir import write_whole
from madrag.pipeline.score_job import ScoreJob
from madrag.protocols.base import ScoringProtocol
from madrag.rubric import Rubric, load_rubric


def job_rubric(job: ScoreJob) -> Rubric:
    """The job's rubric: the one it holds, or its file loaded."""
    return job.rubric if isinstance(job.rubric, Rubric) else load_rubric(job.rubric)


def job_essays(job: ScoreJob, rubric: Rubric) -> list[Essay]:
    """Every essay of the job's source: its in-memory essays, or its data file loaded with ``rubric``."""
    if job.essays is not None:
        return list(job.essays)
    assert job.data is not None  # guaranteed by ScoreJob's validator
    return load_essays(job.data, rubric, job.data_format, job.max_rows)


def select_essays(job: ScoreJob, rubric: Rubric) -> tuple[list[Essay], list[Essay]]:
    """(essays to score, retrieval pool) after the split (or the explicit pool), ``ids`` and ``limit``."""
    essays = job_essays(job, rubric)
    if job.pool is not None:
        chosen, pool = essays, list(job.pool)
    else:
        chosen, pool = split_essays(essays, job.eval_fold)
    if job.ids:
        by_id = {e.id: e for e in essays}
        unknown = [i for i in job.ids if i not in by_id]
        if unknown:
            raise InputError(f"unknown essay id(s): {', '.join(unknown[:5])}")
        chosen = [by_id[i] for i in job.ids]
    if job.limit is not None:
        chosen = chosen[: job.limit]
    if not chosen:
        raise InputError("no essays selected to score")
    return chosen, pool


def fingerprint_file(path: Path) -> str:
    """A short SHA-256 of a file's bytes (how a run recognises its data file); of a folder of submissions, of
    each file's name and bytes, in name order."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        with file.open("rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()[:16]


def essays_jsonl(essays: list[Essay]) -> str:
    """In-memory essays as the run directory keeps them: one :class:`Essay` JSON object per line."""
    return "".join(essay.model_dump_json() + "\n" for essay in essays)


def essays_fingerprint(essays: list[Essay]) -> str:
    """SHA-256 (first 16 hex digits) of :func:`essays_jsonl`: the fingerprint of in-memory essays, as a data
    file's is of its bytes."""
    return hashlib.sha256(essays_jsonl(essays).encode("utf-8")).hexdigest()[:16]


def source_config(job: ScoreJob) -> dict[str, Any]:
    """Where the essays (and an explicit pool) came from, with fingerprints. A file job keeps the keys runs
    have always stored (so they still resume); in-memory essays and pools add theirs."""
    if job.data is not None:
        source: dict[str, Any] = {"data": str(job.data.resolve()), "data_sha256": fingerprint_file(job.data)}
    else:
        essays = job.essays or []
        source = {
            "data": None,
            "data_sha256": essays_fingerprint(essays),
            "data_source": "in-memory",
            "data_essays": len(essays),
        }
    if job.pool is not None:
        source["pool"] = {"source": "in-memory", "essays": len(job.pool), "sha256": essays_fingerprint(job.pool)}
    return source


def record_inputs(job: ScoreJob) -> None:
    """Keep in-memory essays (and an explicit pool) in ``<run_dir>/inputs/`` (see :mod:`madrag.pipeline.job`), and an
    in-memory rubric as ``inputs/rubric.json``."""
    folder = job.run_dir / "inputs"
    if isinstance(job.rubric, Rubric) and not (folder / "rubric.json").is_file():
        write_whole(folder / "rubric.json", job.rubric.model_dump_json(indent=2) + "\n")
    for name, essays in (("essays.jsonl", job.essays), ("pool.jsonl", job.pool)):
        target = folder / name
        if essays is not None and not target.is_file():
            write_whole(target, essays_jsonl(essays))


def check_pool(protocols: list[ScoringProtocol], pool: list[Essay]) -> None:
    """A protocol that retrieves exemplars needs scored essays in the pool (checked before a run starts)."""
    if any(p.needs.bank for p in protocols) and not any(e.rater_scores for e in pool):
        raise InputError(
            "the exemplar pool has no scored essays: give a pool of essays with scores, essays with scores and "
            "folds, or a protocol without retrieval (e.g. MAD)"
        )


def check_references(
    rubric: Rubric,
    essays: list[Essay],
    pool: list[Essay],
    protocols: list[ScoringProtocol],
    stage: Callable[[str], None],
) -> None:
    """A line to ``stage`` for each trait without any human score; an InputError when a protocol needs exemplars
    of such a trait (the pool has no scored essay for it)."""
    banked = [p.name for p in protocols if p.needs.bank]
    unscored = traits_without_scores(pool, rubric) if banked else []
    if unscored:
        first = unscored[0].column or unscored[0].name
        raise InputError(
            f"{', '.join(banked)} {'needs' if len(banked) == 1 else 'need'} scored exemplars, but no essay of the "
            f"exemplar pool has a human score for {', '.join(repr(t.name) for t in unscored)} (looked for a column "
            f"{first!r} or 'rater<i>_{first}'; see the rubric's 'column' field)"
        )
    for trait in traits_without_scores([*essays, *pool], rubric):
        stage(f"note: {no_scores_line(trait)}")
