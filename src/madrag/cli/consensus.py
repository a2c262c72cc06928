"""``madrag eval-consensus``: the evaluation of seed 002 on a run of its judge protocols.

Single Judge vs Strict / Lenient role judges vs Consensus, Symmetric and Score-Masked MAD: RMSE and Spearman
against the human reference, mean predicted score and its shift from the Single Judge, round-by-round
trajectories (mean score, strict-lenient gap), the dominance analysis and paired bootstrap comparisons. The
command is a plain function with typer annotations, registered by :mod:`madrag.cli.app`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from madrag.cli.options import RunArg, choice, need_run_dir
from madrag.cli.output import console
from madrag.cli.paths import output_dir
from madrag.evaluation.consensus_frames import HumanReference

REFERENCES: tuple[HumanReference, ...] = ("mean", "rounded")
"""The values ``--reference`` accepts."""


def eval_consensus_command(
    run: RunArg = None,
    run_dir: Annotated[Path | None, typer.Option("--run-dir", "-r", help="A run of the consensus protocols.")] = None,
    bootstrap: Annotated[int, typer.Option(min=0, help="Bootstrap resamples of essays (0 = none).")] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap resampling.")] = 0,
    baseline: Annotated[str, typer.Option(help="The protocol shifts and RMSE differences are measured from.")] = (
        "SingleJudge"
    ),
    out: Annotated[Path | None, typer.Option(help="Folder for the tables (default <run-dir>/consensus).")] = None,
    reference: Annotated[
        str,
        typer.Option(
            help="Human reference: mean (the raters' plain mean, seed 002; default) or rounded (the mean rounded "
            "half up to a valid score, madrag's label)."
        ),
    ] = "mean",
) -> None:
    """RMSE / Spearman / mean shift per protocol and trait, round trajectories, dominance (seed 002)."""
    from madrag.evaluation.consensus import evaluate_consensus
    from madrag.evaluation.run import load_consensus_run, require_run
    from madrag.evaluation.tables import render_consensus_markdown, save_consensus

    run_dir = require_run(need_run_dir(run, run_dir))
    chosen = choice("--reference", reference, REFERENCES)
    target = output_dir(out or run_dir / "consensus")
    agent_scores, refs, _config = load_consensus_run(run_dir, chosen)
    evaluation = evaluate_consensus(
        agent_scores, refs, bootstrap=bootstrap, seed=seed, baseline=baseline, reference=chosen
    )
    written = save_consensus(evaluation, target)
    typer.echo(render_consensus_markdown(evaluation))  # markdown tables: printed as they are, never wrapped
    console.print(f"wrote {len(written)} files to {written[0].parent}", markup=False)
