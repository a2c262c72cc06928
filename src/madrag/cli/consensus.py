"""``madrag paper eval-consensus``: the evaluation of the consensus paper on a run of its judge protocols.

Single Judge vs Strict / Lenient role judges vs Consensus, Symmetric and Score-Masked MAD: RMSE and Spearman
against the human reference, mean predicted score and its shift from the Single Judge, round-by-round
trajectories (mean score, strict-lenient gap, RMSE), the dominance analysis and paired bootstrap comparisons; over
several runs (judge models), their averages and the cross-model grid of strict and lenient models. The
command is a plain function with typer annotations, registered by :mod:`madrag.cli.app`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from madrag.cli.options import choice
from madrag.cli.output import console
from madrag.cli.paths import output_dir
from madrag.errors import InputError
from madrag.paper.consensus.frames import HumanReference
from madrag.paper.consensus.multi import GRID_METRICS

if TYPE_CHECKING:
    from madrag.paper.consensus.metrics import ConsensusEvaluation
    from madrag.paper.consensus.multi import MultiConsensus

REFERENCES: tuple[HumanReference, ...] = ("mean", "rounded")
"""The values ``--reference`` accepts."""


def eval_consensus_command(
    runs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Run folder(s) of the consensus protocols. Several runs (one judge model each, or strict and "
            "lenient roles on different models via --role-provider) are each evaluated, then averaged per "
            "protocol and trait (the consensus paper's Tables 1, 2, 8, 9) with the cross-model grid (Table 3).",
            show_default=False,
        ),
    ] = None,
    run_dir: Annotated[Path | None, typer.Option("--run-dir", "-r", help="A run of the consensus protocols.")] = None,
    bootstrap: Annotated[int, typer.Option(min=0, help="Bootstrap resamples of essays (0 = none).")] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap resampling.")] = 0,
    baseline: Annotated[str, typer.Option(help="The protocol shifts and RMSE differences are measured from.")] = (
        "SingleJudge"
    ),
    out: Annotated[
        Path | None,
        typer.Option(
            help="Folder for the tables (default <run-dir>/consensus; with several runs, the averaged tables' "
            "folder, default <first run>/consensus-models)."
        ),
    ] = None,
    reference: Annotated[
        str,
        typer.Option(
            help="Human reference: mean (the raters' plain mean, the consensus paper; default) or rounded (the mean "
            "rounded "
            "half up to a valid score, madrag's label)."
        ),
    ] = "mean",
    grid_protocol: Annotated[
        str, typer.Option(help="Several runs: the protocol of the cross-model grid (Table 3).")
    ] = "ConsensusMAD",
    grid_metric: Annotated[
        str, typer.Option(help=f"Several runs: the grid's metric, one of {', '.join(GRID_METRICS)}.")
    ] = "rmse",
    paper: Annotated[
        bool, typer.Option("--paper", help="Also the consensus paper's figures beside, with the difference (paper.md).")
    ] = False,
) -> None:
    """RMSE / Spearman / mean shift per protocol and trait, round trajectories, dominance (the consensus paper); with
    several runs also their averages over the judge models and the cross-model grid."""
    from madrag.evaluation.run import distinct_runs, require_run

    given = [*(runs or []), *([run_dir] if run_dir is not None else [])]
    if not given:
        raise InputError("give the run folder: RUN_DIR or --run-dir (a folder made by 'madrag score')")
    chosen = choice("--reference", reference, REFERENCES)
    metric = choice("--grid-metric", grid_metric, GRID_METRICS)
    folders = distinct_runs([require_run(run) for run in given])
    one = len(folders) == 1
    target = out or folders[0] / ("consensus" if one else "consensus-models")
    evaluated = (
        _evaluate_one(folders[0], target, bootstrap, seed, baseline, chosen)
        if one
        else _evaluate_many(folders, target, bootstrap, seed, baseline, chosen, grid_protocol, metric)
    )
    if paper:
        _beside_paper(evaluated, target)


def _beside_paper(evaluated: ConsensusEvaluation | MultiConsensus, folder: Path) -> None:
    """``--paper``: one run's figures (its judge model's), or the runs' averaged over their models, beside the
    consensus paper's; printed and saved in ``folder``."""
    from madrag.cli.output import show_beside
    from madrag.paper.beside_consensus import beside_consensus
    from madrag.paper.consensus.metrics import ConsensusEvaluation

    if isinstance(evaluated, ConsensusEvaluation):
        result = beside_consensus(evaluated.alignment, evaluated.trajectories, evaluated.meta.get("model"))
    else:
        n_models = len(evaluated.meta["averaged_runs"])
        result = beside_consensus(evaluated.alignment, evaluated.trajectories, None, n_models)
    show_beside(result, folder)


def _evaluate_one(
    run_dir: Path, out: Path, bootstrap: int, seed: int, baseline: str, reference: HumanReference, quiet: bool = False
) -> ConsensusEvaluation:
    """One run's evaluation (its meta naming the run's judge model), printed (or, ``quiet``, one line) and saved
    in ``out``."""
    from madrag.paper.consensus.frames import load_consensus_run
    from madrag.paper.consensus.metrics import evaluate_consensus
    from madrag.paper.consensus.multi import model_label
    from madrag.paper.consensus.tables import render_consensus_markdown, save_consensus

    target = output_dir(out)
    agent_scores, refs, config = load_consensus_run(run_dir, reference)
    evaluation = evaluate_consensus(
        agent_scores, refs, bootstrap=bootstrap, seed=seed, baseline=baseline, reference=reference
    )
    evaluation.meta["model"] = model_label(config.get("provider"))
    written = save_consensus(evaluation, target)
    if not quiet:
        typer.echo(render_consensus_markdown(evaluation))  # markdown tables: printed as they are, never wrapped
    console.print(f"wrote {len(written)} files to {written[0].parent}", markup=False)
    return evaluation


def _evaluate_many(
    folders: list[Path],
    out: Path,
    bootstrap: int,
    seed: int,
    baseline: str,
    reference: HumanReference,
    grid_protocol: str,
    metric: str,
) -> MultiConsensus:
    """Each run's own tables (in ``<run>/consensus``), then the runs averaged over their judge models and the
    cross-model grid, printed and saved in ``out``; runs that cannot be averaged are refused before anything is
    written."""
    from madrag.paper.consensus.multi import evaluate_runs, load_runs
    from madrag.paper.consensus.multi_tables import render_multi_markdown, save_multi

    target = output_dir(out)
    multi = evaluate_runs(load_runs(folders, reference), baseline, grid_protocol, metric)
    for folder in folders:  # each run's own tables, as for one run
        _evaluate_one(folder, folder / "consensus", bootstrap, seed, baseline, reference, quiet=True)
    written = save_multi(multi, target)
    typer.echo(render_multi_markdown(multi))
    console.print(f"wrote {len(written)} files to {written[0].parent}", markup=False)
    return multi
