"""``madrag paper baseline``: the LLM-free baselines (feature random forest, retrieval kNN) stored in a run, so that
``madrag eval`` and the report show them as rows beside the LLM protocols (registered by :mod:`madrag.cli.app`).

In a run made by ``madrag score`` they are trained on the run's exemplar pool and score exactly its essays;
with ``--data`` and ``--rubric`` they are cross-validated over the data's folds into a new run folder.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Annotated

import typer

from madrag.cli.options import CacheDirOpt, DataFormatOpt, RunArg, RunDirOpt, choice, need_run_dir
from madrag.cli.output import console
from madrag.errors import InputError
from madrag.pipeline.job import default_cache_dir
from madrag.retrieval.embedder import EMBEDDERS

DEFAULT_CACHE = default_cache_dir()


def baseline_command(
    run: RunArg = None,
    run_dir: RunDirOpt = None,
    data: Annotated[
        Path | None,
        typer.Option(
            help="Essays to cross-validate over their folds into a new run folder (with --rubric); in an existing "
            "run: its data file, if it moved."
        ),
    ] = None,
    rubric: Annotated[Path | None, typer.Option(help="Rubric JSON/YAML for --data (a run uses its own).")] = None,
    data_format: DataFormatOpt = "auto",
    k: Annotated[int, typer.Option(min=1, help="Neighbours of the retrieval kNN baseline.")] = 10,
    trees: Annotated[int, typer.Option(min=1, help="Trees of the feature random forest.")] = 200,
    features: Annotated[
        str,
        typer.Option(
            help="FeatEng-RF's features: paper (with the syntax and entity-grid features of the MADRAG paper's "
            "Appendix C; needs the 'parse' extra) or light (madrag's parser-free set)."
        ),
    ] = "paper",
    no_retrieval: Annotated[bool, typer.Option("--no-retrieval", help="Only the feature random forest.")] = False,
    cache_dir: CacheDirOpt = DEFAULT_CACHE,
    embedder: Annotated[
        str,
        typer.Option(
            help="kNN embedder of a new cross-validated run: minilm, minilm-windows or hashing (a run uses its own)."
        ),
    ] = "minilm",
) -> None:
    """Score a run's essays with the LLM-free baselines - FeatEng-RF (a random forest over hand-crafted
    features) and kNN-K (the similarity-weighted mean of the K nearest pool essays' scores) - and store them
    like a protocol's scores; then 'madrag eval RUN_DIR' shows them beside the LLM protocols."""
    from madrag.paper.baselines.feature_scorer import ForestSettings
    from madrag.paper.baselines.features import FEATURE_SETS
    from madrag.paper.baselines.runs import CVOptions, cross_validate_run, score_run

    folder = need_run_dir(run, run_dir)
    forest = ForestSettings(n_estimators=trees, features=choice("--features", features, FEATURE_SETS))
    if (folder / "store.sqlite").is_file() and not _is_baseline_run(folder):
        if rubric is not None:
            raise InputError("--rubric applies only to a new cross-validated run (a run uses its own rubric)")
        outcome = score_run(
            folder, cache_dir, data=data, fmt=data_format, k=k, forest=forest, retrieval=not no_retrieval
        )
    else:
        if data is None or rubric is None:
            raise InputError(f"no run at {folder}: give --data and --rubric to cross-validate the baselines there")
        options = CVOptions(k, forest, not no_retrieval, choice("--embedder", embedder, EMBEDDERS))
        outcome, _results = cross_validate_run(data, rubric, folder, cache_dir, fmt=data_format, options=options)
    names = ", ".join(outcome.predictions)
    console.print(
        f"{names} on {outcome.mode}: wrote {outcome.written} scores to {folder} ({outcome.existing} already there)",
        markup=False,
    )
    console.print(f"next: madrag eval {folder}", markup=False)


def _is_baseline_run(folder: Path) -> bool:
    """Whether the run in ``folder`` was made by ``madrag paper baseline --data`` (cross-validated baselines only)."""
    from madrag.pipeline.migrations import open_store

    with closing(open_store(folder / "store.sqlite")) as store:
        config = store.get_meta("config")
    return isinstance(config, dict) and "baselines" in config
