"""``madrag paper confidence ...``: the confidence vs reasoning-quality study of the confidence paper on a finished
debate run.

* ``meta-eval``: the LLM meta-evaluator judges every Advocate / Skeptic response (resumable, own run store).
* ``analyze``: window features of the debaters' token log-probabilities, trajectories with percentile bands,
  and (given a meta-evaluation) Spearman / Kendall / AUROC / point-biserial of every feature with every target,
  and Figure 3 (the meta-evaluator's scores per dimension, pass rates per role).
* ``sets``: Table 1 over two or more runs (one per essay set, each ranked on its own) and Figure 3 over all.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from madrag.cli.backend_options import backend_group
from madrag.cli.groups import with_groups
from madrag.cli.options import (
    DebateRunOpt,
    MetaCacheDirOpt,
    MetaLimitOpt,
    MetaMaxTokensOpt,
    MetaMethodOpt,
    MetaOutOpt,
    MetaPromptsDirOpt,
    MetaRolesOpt,
    MetaSeedOpt,
    RunArg,
    comma_list,
    need_run_dir,
)
from madrag.cli.output import console, progress_bar, run_with_progress
from madrag.cli.paths import output_dir
from madrag.errors import InputError
from madrag.providers.spec import ProviderSpec
from madrag.records import AgentRecord

if TYPE_CHECKING:
    import pandas as pd

    from madrag.paper.confidence.job import MetaJob, MetaJobResult

confidence_app = typer.Typer(
    help="Confidence vs reasoning quality (the confidence paper): meta-evaluate debaters, correlate token confidence.",
    no_args_is_help=True,
)


META_BACKEND = backend_group("backend")


@confidence_app.command("meta-eval")
@with_groups(META_BACKEND)
def meta_eval_command(
    run: RunArg = None,
    run_dir: DebateRunOpt = None,
    out: MetaOutOpt = None,
    roles: MetaRolesOpt = "advocate,skeptic",
    limit: MetaLimitOpt = None,
    method: MetaMethodOpt = "auto",
    backend: ProviderSpec | None = None,
    max_tokens: MetaMaxTokensOpt = 400,
    seed: MetaSeedOpt = 1234,
    prompts_dir: MetaPromptsDirOpt = None,
    cache_dir: MetaCacheDirOpt = None,
) -> None:
    """Judge each Advocate / Skeptic response of RUN_DIR on instruction following, justification quality and
    evidence grounding (1-3) plus a critical flag; Q = the sum, 0 when critical (the confidence paper, 3.4)."""
    from madrag.paper.confidence.job import MetaJob

    if method not in ("auto", "json", "constrained"):
        raise InputError(f"--method must be auto, json or constrained; got {method!r}")
    run_dir = need_run_dir(run, run_dir)
    spec = backend or ProviderSpec()  # the backend options' spec (with_groups)
    job = MetaJob(
        run_dir=run_dir,
        out_dir=out,
        roles=comma_list(roles),
        limit=limit,
        provider=spec,
        method=method,  # type: ignore[arg-type]
        max_tokens=max_tokens,
        seed=seed,
        concurrency=spec.concurrency,
        prompts_dir=prompts_dir,
        cache_dir=cache_dir,
    )
    _print_judged(_judge(job), run_dir)


def _print_judged(result: MetaJobResult, run_dir: Path) -> None:
    s = result.summary
    console.print(
        f"{result.selected} responses: {s.made} judged now, {s.reused} already judged, {s.failed} unusable; "
        f"{result.elapsed_s:.0f}s; store {result.meta_dir / 'store.sqlite'}",
        markup=False,
    )
    if advice := s.advice():
        console.print(advice, markup=False)
    console.print(
        f"next: madrag paper confidence analyze --run-dir {run_dir} --meta-dir {result.meta_dir}", markup=False
    )


def _judge(job: MetaJob) -> MetaJobResult:
    """Run a meta-evaluation with a progress bar showing each judgment's Q; Ctrl-C stops it cleanly."""
    from madrag.paper.confidence.job import execute_meta

    progress = progress_bar()
    task = progress.add_task("judgments", total=None)

    def on_record(record: AgentRecord) -> None:
        progress.advance(task)
        judged = (record.context or {}).get("judgment")
        shown = f"Q={judged['q']}" if isinstance(judged, dict) and "q" in judged else "unusable"
        progress.update(task, description=f"{record.essay_id} {record.trait:<12.12} {shown}")

    def on_start(total: int) -> None:
        progress.update(task, total=total)
        progress.start()

    work = execute_meta(job, on_record=on_record, on_start=on_start)
    return run_with_progress(
        progress,
        work,
        lambda: f"interrupted; every finished judgment is saved in {job.meta_dir}. Run the same command to resume.",
    )


@confidence_app.command("analyze")
def analyze_command(
    run: RunArg = None,
    run_dir: DebateRunOpt = None,
    meta_dir: Annotated[
        Path | None, typer.Option(help="A meta-evaluation of the run (default <run-dir>/meta if it exists).")
    ] = None,
    no_meta: Annotated[bool, typer.Option("--no-meta", help="Features and trajectories only.")] = False,
    roles: Annotated[str, typer.Option(help="Debater roles, comma-separated.")] = "advocate,skeptic",
    rank_by: Annotated[
        str,
        typer.Option(
            help="signed (rho, AUROC, highest first: the confidence paper, Appendix B) or abs (|rho|, |AUROC-0.5|)."
        ),
    ] = "signed",
    top: Annotated[int, typer.Option(min=1, help="Features listed per role and target.")] = 3,
    out: Annotated[Path | None, typer.Option(help="Output folder (default <run-dir>/confidence).")] = None,
    paper: Annotated[
        bool,
        typer.Option(
            "--paper",
            help="Also show the confidence paper's reported figures beside the measured ones (Table 1's AUROCs, "
            "rho and top features, Figure 3), with the difference; saved as paper.csv and paper.md.",
        ),
    ] = False,
) -> None:
    """Window features of the debaters' token log-probabilities, their trajectories (mean, 25-75 and 10-90
    percentile bands) and, with a meta-evaluation, the top features per role and target (the confidence paper, 4);
    --paper: the paper's stated figures beside the run's."""
    from madrag.evaluation.run import require_run
    from madrag.paper.confidence.study import run_study, save_study, top_display

    if rank_by not in ("signed", "abs"):
        raise InputError(f"--rank-by must be signed or abs; got {rank_by!r}")
    run_dir = need_run_dir(run, run_dir)
    if meta_dir is not None and no_meta:
        raise InputError("give --meta-dir or --no-meta, not both")
    if meta_dir is None and not no_meta and (run_dir / "meta" / "store.sqlite").is_file():
        meta_dir = run_dir / "meta"
    target = output_dir(out or require_run(run_dir) / "confidence")
    study = run_study(run_dir, meta_dir, comma_list(roles), rank_by=rank_by, top_k=top)  # type: ignore[arg-type]
    written = save_study(study, target)
    console.print(
        f"{study.meta['with_logprobs']} of {study.meta['responses']} debater responses have logprobs",
        markup=False,
    )
    if study.top is not None:
        _print_top(top_display(study.top), f"top {top} confidence features per role and target")
    else:
        console.print("no meta-evaluation: features and trajectories only", markup=False)
    for note in study.notes:
        console.print(f"note: {note}", markup=False)
    if paper:
        from madrag.cli.output import show_beside
        from madrag.paper.confidence.beside_paper import beside_confidence

        show_beside(beside_confidence(study, run_dir), target)
        written += [target / "paper.csv", target / "paper.md"]
    console.print(f"wrote {len(written)} files to {written[0].parent}", markup=False)


def _print_top(frame: pd.DataFrame, title: str) -> None:
    """A table of top confidence features (cells as plain text, floats to 3 decimals)."""
    table = Table(title=Text(title), title_justify="left")
    for col in frame.columns:
        table.add_column(Text(str(col)))
    for row in frame.itertuples(index=False):
        table.add_row(*(Text(f"{v:.3f}" if isinstance(v, float) else str(v)) for v in row))
    console.print(table)


@confidence_app.command("sets")
def sets_command(
    runs: Annotated[list[Path], typer.Argument(help="Two or more debate runs, one per essay set.")],
    meta_dirs: Annotated[
        str | None, typer.Option(help="Their meta-evaluations, comma-separated, in order (default <run>/meta).")
    ] = None,
    labels: Annotated[str | None, typer.Option(help="The sets' names, comma-separated (default the folders').")] = None,
    roles: Annotated[str, typer.Option(help="Debater roles, comma-separated.")] = "advocate,skeptic",
    rank_by: Annotated[str, typer.Option(help="signed (the confidence paper, Appendix B) or abs.")] = "signed",
    top: Annotated[int, typer.Option(min=1, help="Features listed per set, role and target.")] = 3,
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("confidence-sets"),
) -> None:
    """The confidence paper's Table 1 over several sets (each set's top features, side by side, never pooled), Figure 3
    (the meta-evaluator's scores per dimension, pass rates per role) over all of them, and Table 2 (the sets:
    essays, traits, score ranges, raters, length)."""
    from madrag.paper.confidence.sets import run_sets, save_sets

    if rank_by not in ("signed", "abs"):
        raise InputError(f"--rank-by must be signed or abs; got {rank_by!r}")
    metas = [Path(m) for m in comma_list(meta_dirs)] if meta_dirs else None
    result = run_sets(
        runs,
        metas,
        comma_list(labels) if labels else None,
        comma_list(roles),
        rank_by=rank_by,  # type: ignore[arg-type]
        top_k=top,
    )
    from madrag.paper.confidence.sets import NO_TOP, figure_line

    written = save_sets(result, output_dir(out))
    if result.table1.empty:
        console.print(f"Table 1: {NO_TOP}", markup=False)
    else:
        _print_top(result.table1, f"top {top} confidence features per set, role and target")
    console.print(result.table2.to_string(index=False), markup=False)
    console.print(
        figure_line(result, [p for p in written if p.name.startswith(("figure3", "pass_rates"))]), markup=False
    )
    names = ", ".join(p.name + ("/" if p.is_dir() else "") for p in written)
    console.print(f"wrote {len(written)} files and folders to {out}: {names}", markup=False)
