"""``madrag compare RUN RUN...``: each run's agreement per trait and each later run's paired difference from the
first (:mod:`madrag.evaluation.compare_runs`), printed and saved (registered by :mod:`madrag.cli.app`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from madrag.cli.evaluate import ReferenceTiesOpt, ties_option
from madrag.cli.options import BootstrapOpt, SeedOpt
from madrag.cli.output import console
from madrag.cli.paths import output_dir


def compare_command(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Two or more run folders; each later run is compared with the first on their shared essays."
        ),
    ],
    protocol: Annotated[
        str | None,
        typer.Option(help="Protocol compared in every run (default: MADRAG where a run has it, else its first)."),
    ] = None,
    bootstrap: BootstrapOpt = 2000,
    seed: SeedOpt = 0,
    reference_ties: ReferenceTiesOpt = None,
    out: Annotated[Path | None, typer.Option(help="Folder for the tables (default: <first run>/compare).")] = None,
) -> None:
    """Compare runs: per trait, each run's QWK against the human reference with its bootstrap CI, and the paired
    difference of each run from the first on the essays both scored, with a seeded bootstrap CI and p-value;
    printed and saved as agreement.csv, differences.csv and compare.md."""
    from madrag.evaluation.compare_runs import compare_runs, display_tables, save
    from madrag.evaluation.run import distinct_runs, load_run
    from madrag.evaluation.tables import rich_frame

    folders = distinct_runs(runs)  # each a run, given once, before anything is written
    target = output_dir(out or folders[0] / "compare")
    loaded = [load_run(folder) for folder in folders]
    comparison = compare_runs(loaded, protocol, bootstrap=bootstrap, seed=seed, ties=ties_option(reference_ties))
    for title, frame in display_tables(comparison).items():
        if not frame.empty:
            console.print(rich_frame(title, frame))
    for note in comparison.notes:
        console.print(f"note: {note}", markup=False)
    paths = save(comparison, target)
    console.print(f"wrote {len(paths)} files to {target}", markup=False)
