"""``madrag eval``, ``madrag errors`` and ``madrag report``: agreement tables, the error export and the HTML
report of a run, and ``madrag paper error-tables``, the MADRAG paper's tables of a coded error export
(registered by :mod:`madrag.cli.app` and :mod:`madrag.cli.paper`).

They are plain functions with typer annotations, so the CLI registers them with ``app.command("eval")(...)``
and tests can call them directly. Bad input raises :class:`~madrag.errors.InputError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from madrag.cli.options import BootstrapOpt, RunArg, RunDirOpt, SeedOpt, choice, need_run_dir
from madrag.cli.output import console
from madrag.cli.paths import output_dir, output_file
from madrag.errors import InputError
from madrag.files.csv_safe import write_frame

if TYPE_CHECKING:
    from madrag.evaluation.agreement import Evaluation
    from madrag.metrics import TieRule


ReferenceTiesOpt = Annotated[
    str | None,
    typer.Option(
        help="How a reference label rounds a raters' mean halfway between two scores (2.5): half_up, half_even "
        "or half_down. Default: the run's reference_ties setting (half_up unless the run chose another)."
    ),
]


def ties_option(value: str | None) -> TieRule | None:
    """The ``--reference-ties`` value checked (None: the run's own rule)."""
    from madrag.metrics import TIE_RULES

    return None if value is None else choice("--reference-ties", value, TIE_RULES)


def eval_command(
    runs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Run folder(s). Several runs (e.g. set 7 and set 8) are each evaluated, then merged: per protocol "
            "and trait, the mean QWK over the runs (the MADRAG paper's Figure 2)."
        ),
    ] = None,
    run_dir: RunDirOpt = None,
    data: Annotated[
        Path | None,
        typer.Option(
            help="Data file. Without --run-dir: print Human-Human QWK of this file (needs --rubric). "
            "With --run-dir: the full data file for the Human-Human row, instead of the path stored in the run."
        ),
    ] = None,
    rubric: Annotated[
        Path | None, typer.Option(help="Rubric JSON/YAML for --data without a run (a run uses its stored rubric).")
    ] = None,
    bootstrap: BootstrapOpt = 2000,
    seed: SeedOpt = 0,
    baseline: Annotated[
        str | None, typer.Option(help="Protocol the others are compared with (default: MADRAG if in the run).")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Folder for the tables (default: <run-dir>/eval).")] = None,
    reference_ties: ReferenceTiesOpt = None,
    paper: Annotated[
        bool,
        typer.Option(
            "--paper",
            help="Also show the MADRAG paper's reported figure beside each measured one (Tables 1, 2, 7-9), with "
            "the difference, and Table 1's published systems as reported; saved as paper.csv and paper.md.",
        ),
    ] = False,
) -> None:
    """QWK per protocol and trait with bootstrap CIs, Human-Human agreement, the extreme-score subset
    (Agree@1, MAE) and paired comparisons; printed and saved as CSV, JSON and markdown. With several runs,
    also their merged QWK table and plot (the MADRAG paper's Figure 2). --paper: the paper's figures beside."""
    ties = ties_option(reference_ties)
    given = [*(runs or []), *([run_dir] if run_dir is not None else [])]
    if len(given) > 1:
        if data is not None or rubric is not None:
            raise InputError("--data and --rubric apply to one run; give them without merging runs")
        _merge_runs(given, EvalOptions(bootstrap, seed, baseline, ties, paper), out)
        return
    run_dir = given[0] if given else None
    if run_dir is None:
        if data is None or rubric is None:
            raise InputError(
                "give the run folder (RUN_DIR or --run-dir), or --data and --rubric for Human-Human agreement of a "
                "data file"
            )
        if paper:
            raise InputError("--paper compares a run: give the run folder")
        _human_human(data, rubric, bootstrap, seed, out)
        return
    if rubric is not None:
        raise InputError("--rubric applies only without --run-dir (a run is evaluated with its own rubric)")
    _one_run(run_dir, data, EvalOptions(bootstrap, seed, baseline, ties, paper), out)


@dataclass(frozen=True)
class EvalOptions:
    """What every evaluated run of one ``madrag eval`` shares."""

    bootstrap: int
    seed: int
    baseline: str | None
    ties: TieRule | None
    paper: bool = False

    def evaluate(self, run_dir: Path, data: Path | None = None) -> Evaluation:
        """The run's evaluation with these options (``data``: the full data file for the Human-Human row)."""
        from madrag.evaluation.agreement import evaluate

        return evaluate(
            run_dir, bootstrap=self.bootstrap, seed=self.seed, baseline=self.baseline, data=data, ties=self.ties
        )


def _beside_paper(evaluation: Evaluation, folder: Path) -> None:
    """Print the run's figures beside the MADRAG paper's and save paper.csv / paper.md in ``folder``."""
    from madrag.cli.output import show_beside
    from madrag.paper.beside_paper import beside_paper

    show_beside(beside_paper(evaluation), folder)


def _one_run(run_dir: Path, data: Path | None, options: EvalOptions, out: Path | None) -> None:
    """Evaluate one run (``data``: the full data file for the Human-Human row), print its tables and save them
    (default folder: ``<run>/eval``)."""
    from madrag.evaluation.run import require_run
    from madrag.evaluation.tables import rich_tables, save, summary_line

    require_run(run_dir)  # before anything is written in its folder
    target = output_dir(out or run_dir / "eval")
    evaluation = options.evaluate(run_dir, data)
    console.print(summary_line(evaluation), markup=False)
    console.print(f"reference: {evaluation.meta['reference']}", markup=False)
    for table in rich_tables(evaluation):
        console.print(table)
    for note in evaluation.notes:
        console.print(f"note: {note}", markup=False)
    paths = save(evaluation, target)
    if options.paper:
        _beside_paper(evaluation, target)
    console.print(f"wrote {len(paths)} files to {paths[0].parent}", markup=False)


def _merge_runs(runs: list[Path], options: EvalOptions, out: Path | None) -> None:
    """Evaluate each run (tables saved in ``<run>/eval``), then print and save their merged QWK table
    (default folder: ``<first run>/eval-merged``)."""
    from madrag.evaluation.merge import merge_qwk, merged_wide, save_merged
    from madrag.evaluation.run import require_run
    from madrag.evaluation.tables import save, summary_line

    folders = [require_run(run) / "eval" for run in runs]
    folders = [output_dir(folder) for folder in folders]
    merged_dir = output_dir(out or runs[0] / "eval-merged")
    evaluations = []
    for run, folder in zip(runs, folders, strict=True):
        evaluation = options.evaluate(run)
        save(evaluation, folder)
        ties_used = evaluation.meta["reference_ties"]
        console.print(f"{run}: {summary_line(evaluation)}; reference ties {ties_used}", markup=False)
        if options.paper:
            _beside_paper(evaluation, folder)
        evaluations.append(evaluation)
    merged = merge_qwk(evaluations)
    console.print("merged QWK (mean over the runs per protocol and trait; the MADRAG paper's Figure 2):", markup=False)
    console.print(merged_wide(merged).to_string(na_rep="—", float_format="{:.3f}".format), markup=False)
    paths = save_merged(merged, runs, merged_dir)
    console.print(f"wrote {len(paths)} files to {paths[0].parent}", markup=False)


def _human_human(data: Path, rubric: Path, bootstrap: int, seed: int, out: Path | None) -> None:
    """Print (and with ``out`` save as CSV) the Human-Human QWK of a data file's two raters."""
    from madrag.evaluation.agreement import human_human_table, wide
    from madrag.rubric import load_rubric

    if out is not None:
        output_dir(out)
    table = human_human_table(data, load_rubric(rubric), bootstrap=bootstrap, seed=seed)
    console.print(f"Human-Human QWK (rater 1 vs rater 2) in {data}", markup=False)
    console.print(wide(table).round(3).to_string(), markup=False)
    counts = ", ".join(f"{label} {n}" for label, n in zip(table["label"], table["n"], strict=True))
    console.print(f"essays with two raters: {counts}", markup=False)
    if out is not None:
        write_frame(table, out / "human_human.csv", index=False)
        console.print(f"wrote {out / 'human_human.csv'}", markup=False)


def errors_command(
    run: RunArg = None,
    run_dir: RunDirOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="CSV to write (default: <run-dir>/eval/errors.csv); with --tabulate, the folder for the tables "
            "(default: <coded file>_tables beside it)."
        ),
    ] = None,
    protocol: Annotated[
        str | None,
        typer.Option(
            help="Rows where this protocol is off by more than 1. Default: MADRAG, as the MADRAG paper (a run without "
            "MADRAG: its first protocol); 'all': rows where any protocol is."
        ),
    ] = None,
    reference_ties: ReferenceTiesOpt = None,
    tabulate: Annotated[
        Path | None,
        typer.Option(
            help="A coded export (B, C, D columns filled in): print and save the MADRAG paper's Tables 3, 4, 5, 10 "
            "and 11 instead of exporting (now: madrag paper error-tables CODED).",
            hidden=True,
        ),
    ] = None,
) -> None:
    """Export high-disagreement essay-traits (raters within 1 point, MADRAG - or --protocol - off by more than
    1 from their mean; with one rater, off by more than 1 from that rater's score) with essays, scores,
    rationales and debates, ready for qualitative coding (the MADRAG paper, 4.4); 'madrag paper error-tables'
    turns a coded export into the paper's tables."""
    if tabulate is not None:
        if run is not None or run_dir is not None or protocol is not None or reference_ties is not None:
            raise InputError("--tabulate reads a coded file only: give no run, --protocol or --reference-ties")
        _tabulate(tabulate, out)
        return
    from madrag.evaluation.run import require_run
    from madrag.paper.coding.errors_export import PAPER_FOCUS, export_errors

    folder = require_run(need_run_dir(run, run_dir))
    target = output_file(out or folder / "eval" / "errors.csv")
    result = export_errors(folder, target, focus=protocol, ties=ties_option(reference_ties))
    counts = ", ".join(f"{p}: {n}" for p, n in result.per_protocol.items())
    console.print(f"wrote {result.n_rows} rows to {result.path} (off by more than 1 - {counts})", markup=False)
    if protocol is None and result.focus != PAPER_FOCUS:
        console.print(f"note: {PAPER_FOCUS} is not in this run: the rows are {result.focus}'s errors", markup=False)
    console.print(f"rule: {result.rule} ({result.n_one_rater} of the rows with one rater)", markup=False)
    console.print(f"reference column: ties rounded {result.ties}", markup=False)
    if kept := result.kept.line(result.path):
        console.print(kept, markup=False)


def error_tables_command(
    coded: Annotated[
        Path, typer.Argument(help="An error export of 'madrag errors' with its B, C and D columns coded by hand.")
    ],
    out: Annotated[
        Path | None, typer.Option(help="Folder for the tables (default: <coded file>_tables beside it).")
    ] = None,
) -> None:
    """The MADRAG paper's coded failure analysis (4.4): Tables 3, 4, 5, 10 and 11 from a coded error export,
    printed and saved (one CSV per table and tables.txt)."""
    _tabulate(coded, out)


def _tabulate(coded: Path, out: Path | None) -> None:
    from madrag.paper.coding.coded_tables import render, save_tables, tabulate

    result = tabulate(coded)
    console.print(render(result), markup=False)
    written = save_tables(result, out or coded.with_name(coded.stem + "_tables"))
    console.print(f"wrote {len(written)} files to {written[0].parent}", markup=False)


def report_command(
    run: RunArg = None,
    run_dir: RunDirOpt = None,
    bootstrap: BootstrapOpt = 1000,
    seed: SeedOpt = 0,
    out: Annotated[Path | None, typer.Option(help="HTML file to write (default: <run-dir>/report.html).")] = None,
    reference_ties: ReferenceTiesOpt = None,
    paper: Annotated[
        bool, typer.Option("--paper", help="Also show the MADRAG paper's reported figures beside the measured ones.")
    ] = False,
) -> None:
    """Write one self-contained HTML report: QWK plots, confusion matrices, score distributions, the
    extreme-score subset and every essay's debate transcript with the Judge's rationale and exemplars
    (--paper: the MADRAG paper's figures beside the measured ones)."""
    from madrag.audit.report import audit_html
    from madrag.evaluation.report import write_report
    from madrag.evaluation.run import require_run

    folder = require_run(need_run_dir(run, run_dir))
    target = output_file(out or folder / "report.html")
    ties = ties_option(reference_ties)
    section = None
    if paper:
        from madrag.paper.beside_paper import paper_section

        section = paper_section
    path = write_report(
        folder, bootstrap=bootstrap, seed=seed, out=target, ties=ties, extra=audit_html(folder), paper=section
    )
    console.print(f"wrote {path}", markup=False)
