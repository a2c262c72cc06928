"""``madrag confidence ...``: the confidence vs reasoning-quality study of seed 001 on a finished debate run.

* ``meta-eval``: the LLM meta-evaluator judges every Advocate / Skeptic response (resumable, own run store).
* ``analyze``: window features of the debaters' token log-probabilities, trajectories with percentile bands,
  and (given a meta-evaluation) Spearman / Kendall / AUROC / point-biserial of every feature with every target.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from madrag.errors import InputError
from madrag.providers.spec import ProviderSpec
from madrag.records import AgentRecord

confidence_app = typer.Typer(
    help="Confidence vs reasoning quality (seed 001): meta-evaluate debaters, correlate token confidence.",
    no_args_is_help=True,
)
console = Console()
err = Console(stderr=True)

RunDirArg = Annotated[Path, typer.Option("--run-dir", "-r", help="A debate run made by 'madrag score' / 'ablate'.")]


def _roles(value: str) -> list[str]:
    return [r.strip() for r in value.split(",") if r.strip()]


@confidence_app.command("meta-eval")
def meta_eval_command(
    run_dir: RunDirArg,
    out: Annotated[Path | None, typer.Option(help="Folder of the judgments' store (default <run-dir>/meta).")] = None,
    roles: Annotated[str, typer.Option(help="Debater roles to judge, comma-separated.")] = "advocate,skeptic",
    limit: Annotated[int | None, typer.Option(help="Judge only the responses of the first N essays.")] = None,
    method: Annotated[
        str, typer.Option(help="auto, json (one JSON answer) or constrained (field by field, prefill backends).")
    ] = "auto",
    provider: Annotated[str, typer.Option(help="llamacpp (embedded, offline), openai or fake.")] = "llamacpp",
    model: Annotated[str | None, typer.Option(help="Model name (openai provider).")] = None,
    model_path: Annotated[Path | None, typer.Option(help="A GGUF file for llamacpp.")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL.")] = None,
    api_key_env: Annotated[str, typer.Option(help="Environment variable holding the API key.")] = "OPENAI_API_KEY",
    concurrency: Annotated[int | None, typer.Option(help="Judgments in flight (default: the backend's).")] = None,
    slots: Annotated[int, typer.Option(help="llamacpp: parallel model contexts.")] = 2,
    timeout: Annotated[float, typer.Option(help="Seconds per request before it is retried.")] = 300.0,
    retries: Annotated[int, typer.Option(help="Retries on transient failures.")] = 4,
    max_tokens: Annotated[int, typer.Option(help="Token limit of a judgment (or of its reasoning).")] = 400,
    seed: Annotated[int, typer.Option(help="Sampling seed (the evaluator decodes at temperature 0).")] = 1234,
    prompts_dir: Annotated[Path | None, typer.Option(help="Folder overriding meta_system / meta_user.")] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="Response cache folder (default: none).")] = None,
) -> None:
    """Judge each Advocate / Skeptic response of RUN_DIR on instruction following, justification quality and
    evidence grounding (1-3) plus a critical flag; Q = the sum, 0 when critical (seed 001, 3.4)."""
    from madrag.confidence.job import MetaJob, execute_meta

    if method not in ("auto", "json", "constrained"):
        raise InputError(f"--method must be auto, json or constrained; got {method!r}")
    if provider not in ("llamacpp", "openai", "fake"):
        raise InputError(f"--provider must be llamacpp, openai or fake; got {provider!r}")
    job = MetaJob(
        run_dir=run_dir,
        out_dir=out,
        roles=_roles(roles),
        limit=limit,
        provider=ProviderSpec(
            kind=provider,
            model=model,
            model_path=str(model_path) if model_path else None,
            base_url=base_url,
            api_key_env=api_key_env,
            concurrency=concurrency,
            timeout_s=timeout,
            retries=retries,
            slots=slots,
        ),
        method=method,  # type: ignore[arg-type]
        max_tokens=max_tokens,
        seed=seed,
        concurrency=concurrency,
        prompts_dir=prompts_dir,
        cache_dir=cache_dir,
    )
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err
    )
    task = progress.add_task("judgments", total=None)

    def on_record(record: AgentRecord) -> None:
        progress.advance(task)
        judged = (record.context or {}).get("judgment")
        shown = f"Q={judged['q']}" if isinstance(judged, dict) and "q" in judged else "unusable"
        progress.update(task, description=f"{record.essay_id} {record.trait:<12.12} {shown}")

    try:
        with progress:
            result = asyncio.run(
                execute_meta(job, on_record=on_record, on_start=lambda n: progress.update(task, total=n))
            )
    except KeyboardInterrupt:
        err.print(f"interrupted; every finished judgment is saved in {job.meta_dir}. Run the same command to resume.")
        raise typer.Exit(130) from None
    s = result.summary
    console.print(
        f"{result.selected} responses: {s.made} judged now, {s.reused} already judged, {s.failed} unusable; "
        f"{result.elapsed_s:.0f}s; store {result.meta_dir / 'store.sqlite'}",
        markup=False,
    )
    console.print(f"next: madrag confidence analyze --run-dir {run_dir} --meta-dir {result.meta_dir}", markup=False)


@confidence_app.command("analyze")
def analyze_command(
    run_dir: RunDirArg,
    meta_dir: Annotated[
        Path | None, typer.Option(help="A meta-evaluation of the run (default <run-dir>/meta if it exists).")
    ] = None,
    no_meta: Annotated[bool, typer.Option("--no-meta", help="Features and trajectories only.")] = False,
    roles: Annotated[str, typer.Option(help="Debater roles, comma-separated.")] = "advocate,skeptic",
    rank_by: Annotated[str, typer.Option(help="abs (|rho|, |AUROC-0.5|) or signed.")] = "abs",
    top: Annotated[int, typer.Option(min=1, help="Features listed per role and target.")] = 3,
    out: Annotated[Path | None, typer.Option(help="Output folder (default <run-dir>/confidence).")] = None,
) -> None:
    """Window features of the debaters' token log-probabilities, their trajectories (mean, 25-75 and 10-90
    percentile bands) and, with a meta-evaluation, the top features per role and target (seed 001, 4)."""
    from madrag.confidence.study import run_study, save_study, top_display

    if rank_by not in ("abs", "signed"):
        raise InputError(f"--rank-by must be abs or signed; got {rank_by!r}")
    if meta_dir is not None and no_meta:
        raise InputError("give --meta-dir or --no-meta, not both")
    if meta_dir is None and not no_meta and (run_dir / "meta" / "store.sqlite").is_file():
        meta_dir = run_dir / "meta"
    study = run_study(run_dir, meta_dir, _roles(roles), rank_by=rank_by, top_k=top)  # type: ignore[arg-type]
    written = save_study(study, out or run_dir / "confidence")
    console.print(
        f"{study.meta['with_logprobs']} of {study.meta['responses']} debater responses have logprobs",
        markup=False,
    )
    if study.top is not None:
        frame = top_display(study.top)
        table = Table(title=Text(f"top {top} confidence features per role and target"), title_justify="left")
        for col in frame.columns:
            table.add_column(Text(str(col)))
        for row in frame.itertuples(index=False):
            table.add_row(*(Text(f"{v:.3f}" if isinstance(v, float) else str(v)) for v in row))
        console.print(table)
    else:
        console.print("no meta-evaluation: features and trajectories only", markup=False)
    for note in study.notes:
        console.print(f"note: {note}", markup=False)
    console.print(f"wrote {len(written)} files to {written[0].parent}", markup=False)
