"""The option groups of ``madrag score``, ``ablate`` and ``ablate-consensus`` (:mod:`madrag.cli.groups`): the
essays and rubric, the backend (generated from the backends' options models: :mod:`madrag.cli.backend_options`),
the scoring settings (generated from :class:`~madrag.settings.ScoringSettings`)
and how the run is kept and executed. Each group but the settings builds the :class:`~madrag.pipeline.job.ScoreJob`
fields it stands for.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from madrag.cli.backend_options import backend_group
from madrag.cli.groups import ImpliedValueCommand, group, model_group
from madrag.cli.options import (
    CacheDirOpt,
    DataFormatOpt,
    DataOpt,
    EmbedderOpt,
    EmbeddingModelOpt,
    EmbeddingUrlOpt,
    EssayConcurrencyOpt,
    FailFastOpt,
    FoldOpt,
    IdsOpt,
    LimitOpt,
    MaxFailuresOpt,
    MaxRowsOpt,
    NoCacheOpt,
    PromptsDirOpt,
    RayOpt,
    RayWorkersOpt,
    RubricOpt,
    ScoreRunDirOpt,
    choice,
    comma_list,
    failure_budget,
)
from madrag.data.row_limit import MAX_ROWS
from madrag.data.splits import EACH
from madrag.distributed.options import LOCAL
from madrag.errors import InputError
from madrag.pipeline.job import default_cache_dir
from madrag.retrieval.embedder import EMBEDDERS
from madrag.retrieval.openai_embedder import EmbeddingEndpoint
from madrag.settings import ScoringSettings

JobFields = dict[str, Any]
"""Keyword arguments of :class:`~madrag.pipeline.job.ScoreJob` (what a group builds)."""
DEFAULT_CACHE = default_cache_dir()  # the default of --cache-dir


def parse_fold(value: str) -> int | str | None:
    """``--fold``: a fold number, ``None`` for 'all', or ``"each"`` (cross-fold scoring)."""
    if value.lower() == "all":
        return None
    if value.lower() == EACH:
        return EACH
    try:
        return int(value)
    except ValueError as exc:
        raise InputError(f"--fold must be an integer, 'each' or 'all', got {value!r}") from exc


def source_options(
    data: DataOpt,
    rubric: RubricOpt,
    data_format: DataFormatOpt = "auto",
    fold: FoldOpt = "0",
    limit: LimitOpt = None,
    ids: IdsOpt = None,
    max_rows: MaxRowsOpt = MAX_ROWS,
) -> JobFields:
    """The essays and rubric of a job, and which of the essays it scores."""
    return {
        "data": data,
        "rubric": rubric,
        "data_format": data_format,
        "max_rows": max_rows,
        "eval_fold": parse_fold(fold),
        "limit": limit,
        "ids": comma_list(ids) if ids else None,
    }


def run_options(
    run_dir: ScoreRunDirOpt = Path("runs/latest"),
    essay_concurrency: EssayConcurrencyOpt = None,
    max_failures: MaxFailuresOpt = None,
    fail_fast: FailFastOpt = False,
    prompts_dir: PromptsDirOpt = None,
    cache_dir: CacheDirOpt = DEFAULT_CACHE,
    no_cache: NoCacheOpt = False,
    embedder: EmbedderOpt = "minilm",
    embedding_model: EmbeddingModelOpt = None,
    embedding_url: EmbeddingUrlOpt = None,
    ray: RayOpt = None,
    ray_workers: RayWorkersOpt = None,
) -> JobFields:
    """Where the run is kept, its caches and prompts, and how it executes (here or on Ray)."""
    from madrag.api.executors import ray_executor  # here: it imports the evaluation (pandas), not --help's cost

    return {
        "run_dir": run_dir,
        "essay_concurrency": essay_concurrency,
        "max_failures": failure_budget(max_failures, fail_fast),
        "prompts_dir": prompts_dir,
        "cache_dir": cache_dir,
        "response_cache": not no_cache,
        "embedder": choice("--embedder", embedder, EMBEDDERS),
        "embedding": EmbeddingEndpoint(base_url=embedding_url, model=embedding_model),
        "executor": ray_executor(ray, ray_workers),
    }


SOURCE = group("source", source_options, "Essays and rubric")
BACKEND = backend_group("backend", "Backend", roles=True)
SETTINGS = model_group("settings", ScoringSettings, "Scoring settings")
RUN = group("run", run_options, "Run")


class ScoreCommand(ImpliedValueCommand):
    """The command class of ``score`` and its variants: ``--ray`` alone is ``--ray local`` (a local Ray
    instance), ``--ray HOST:PORT`` a cluster."""

    implied: ClassVar[Mapping[str, str]] = {"--ray": LOCAL}
