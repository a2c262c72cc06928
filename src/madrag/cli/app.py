"""The ``madrag`` command line: ``score``, ``demo`` and ``runs``."""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from madrag.cli.confidence import confidence_app
from madrag.cli.consensus import eval_consensus_command
from madrag.cli.costs import costs_command
from madrag.cli.evaluate import errors_command, eval_command, report_command
from madrag.data.essay import Essay
from madrag.distributed.options import LOCAL, optional_value, ray_options, ray_summary
from madrag.errors import InputError, MadragError
from madrag.pipeline.job import JobResult, ScoreJob, default_cache_dir, execute
from madrag.protocols import ABLATION, CONSENSUS_ABLATION, available
from madrag.protocols.base import TraitScore
from madrag.protocols.consensus import consensus_protocol
from madrag.providers import ProviderSpec, parse_role_provider
from madrag.records import AgentRecord
from madrag.rubric import load_rubric
from madrag.settings import ScoringSettings

app = typer.Typer(
    help="Training-free, rubric-based analytic essay scoring: Advocate -> Skeptic -> Judge per trait, "
    "the Judge grounded by retrieved scored exemplars (MADRAG).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
runs_app = typer.Typer(help="List runs and export their scores or records.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")
console = Console()
DEFAULT_CACHE = default_cache_dir()
err = Console(stderr=True)

TINY_MODEL_NOTE = (
    "Note: the embedded SmolLM2-135M model shows the pipeline working end to end; it is far too small to give "
    "valid scores. For real scoring use --provider openai (any OpenAI-compatible server) or --model-path BIG.gguf."
)


def _parse_fold(value: str) -> int | None:
    if value.lower() == "all":
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise InputError(f"--fold must be an integer or 'all', got {value!r}") from exc


def _choice(flag: str, value: str, options: tuple[str, ...]) -> str:
    if value not in options:
        raise InputError(f"{flag} must be one of {', '.join(options)}; got {value!r}")
    return value


def _run_job(job: ScoreJob) -> JobResult:
    """Run a job with a progress bar; Ctrl-C stops it cleanly (records so far are kept)."""
    rubric = load_rubric(job.rubric)
    if job.provider.kind == "llamacpp" and job.provider.model_path is None:
        err.print(f"[yellow]{TINY_MODEL_NOTE}[/yellow]")
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err
    )
    task = progress.add_task("trait scores", total=None)
    done_essays: list[str] = []

    def on_record(record: AgentRecord) -> None:
        if record.role == "judge" and record.index == 0:
            progress.advance(task)
        progress.update(task, description=f"{record.role:>8} {record.essay_id} {record.trait:<14.14}")

    def on_essay(essay: Essay, scores: list[TraitScore]) -> None:
        done_essays.append(essay.id)
        # seed 000 protocols advance with each Judge record; a consensus protocol's scores (seed 002: the mean of
        # its agents' last round) exist once the essay is done
        progress.advance(task, sum(1 for s in scores if consensus_protocol(s.protocol) is not None))
        by_protocol: dict[str, list[str]] = {}
        for s in scores:
            by_protocol.setdefault(s.protocol, []).append(f"{s.trait}={s.score if s.score is not None else '?'}")
        shown = "; ".join(
            f"{p}: {', '.join(v)}" if len(by_protocol) > 1 else ", ".join(v) for p, v in by_protocol.items()
        )
        progress.console.print(f"essay {essay.id}: {shown}", markup=False, highlight=False)

    try:
        with progress:
            result = asyncio.run(
                execute(
                    job,
                    on_record=on_record,
                    on_essay_done=on_essay,
                    on_stage=lambda m: progress.console.print(m),
                    on_start=lambda n: progress.update(task, total=n),
                )
            )
    except KeyboardInterrupt:
        err.print(
            f"interrupted after {len(done_essays)} essays; every finished call is saved in {job.run_dir}. "
            "Run the same command again to resume."
        )
        raise typer.Exit(130) from None
    _summary(result, rubric.trait_names)
    return result


def _summary(result: JobResult, traits: list[str]) -> None:
    protocols = sorted({s.protocol for s in result.scores})
    table = Table(title=f"trait scores (run {result.run_id}{', resumed' if result.resumed else ''})")
    table.add_column("essay")
    table.add_column("protocol")
    for t in traits:
        table.add_column(t, justify="center")
    by_key = {(s.essay_id, s.protocol, s.trait): s for s in result.scores}
    for essay in result.essays:
        for protocol in protocols:
            cells = []
            for t in traits:
                s = by_key.get((essay.id, protocol, t))
                ref = essay.references_by_name().get(t)
                got = "?" if s is None or s.score is None else str(s.score)
                cells.append(got if ref is None else f"{got} (human {ref})")
            table.add_row(essay.id, protocol, *cells)
    console.print(table)
    stats = result.stats
    console.print(
        f"{stats.made} agent calls made, {stats.reused} reused from the run store, "
        f"{stats.failed_scores} judge scores unusable; {result.elapsed_s:.0f}s"
    )


ProtocolOpt = Annotated[
    list[str], typer.Option("--protocol", "-p", help=f"Scoring protocol(s): {escape(', '.join(available()))}.")
]


@app.command()
def score(
    data: Annotated[Path, typer.Option(help="Essays: ASAP .tsv, or .csv / .jsonl with id,text[,scores].")],
    rubric: Annotated[Path, typer.Option(help="Rubric JSON or YAML (traits, min, max, levels).")],
    run_dir: Annotated[Path, typer.Option(help="Run folder; an existing run is resumed.")] = Path("runs/latest"),
    data_format: Annotated[str, typer.Option("--format", help="auto, asap, csv or jsonl.")] = "auto",
    fold: Annotated[str, typer.Option(help="Evaluation fold (the rest is the exemplar pool), or 'all'.")] = "0",
    limit: Annotated[int | None, typer.Option(help="Score only the first N selected essays.")] = None,
    ids: Annotated[str | None, typer.Option(help="Comma-separated essay ids to score.")] = None,
    protocol: ProtocolOpt = ["MADRAG"],  # noqa: B006
    provider: Annotated[str, typer.Option(help="llamacpp (embedded, offline), openai or fake.")] = "llamacpp",
    model: Annotated[str | None, typer.Option(help="Model name (openai provider).")] = None,
    model_path: Annotated[Path | None, typer.Option(help="A GGUF file for llamacpp.")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL.")] = None,
    api_key_env: Annotated[str, typer.Option(help="Environment variable holding the API key.")] = "OPENAI_API_KEY",
    logprobs: Annotated[bool, typer.Option(help="Whether the openai server returns logprobs.")] = True,
    role_provider: Annotated[
        list[str] | None,
        typer.Option(
            help="ROLE=KIND:MODEL@URL (model and URL optional): another backend for one judge role of the "
            "consensus protocols (single, strict, lenient, neutral_a, neutral_b), e.g. "
            "lenient=openai:gemma-3-4b@http://host/v1 or strict=llamacpp:/models/big.gguf."
        ),
    ] = None,
    concurrency: Annotated[int | None, typer.Option(help="Parallel requests to the backend.")] = None,
    slots: Annotated[int, typer.Option(help="llamacpp: parallel model contexts (CPU threads are shared).")] = 2,
    essay_concurrency: Annotated[
        int | None, typer.Option(help="Essays in flight at once (default: enough to fill the backend's slots).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per request before it is retried.")] = 300.0,
    retries: Annotated[int, typer.Option(help="Retries on transient failures.")] = 4,
    debater_max_tokens: Annotated[int, typer.Option(help="Token limit of Advocate/Skeptic messages.")] = 400,
    judge_max_tokens: Annotated[int, typer.Option(help="Token limit of the Judge's rationale.")] = 400,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 1234,
    anonymization: Annotated[str, typer.Option(help="Placeholders (@CAPS1...): note, mask or none.")] = "note",
    score_method: Annotated[str, typer.Option(help="auto, constrained or text (see docs).")] = "auto",
    report: Annotated[str, typer.Option(help="Reported judge score: parsed, argmax or expected.")] = "parsed",
    exemplar_max_words: Annotated[int | None, typer.Option(help="Shorten exemplars in prompts.")] = None,
    judges_per_trait: Annotated[int, typer.Option(help="MA: independent judges averaged per trait.")] = 1,
    prompt_layout: Annotated[
        str, typer.Option(help="shared_prefix (essay first, for prefix caching) or seed (role as system message).")
    ] = "shared_prefix",
    prompts_dir: Annotated[
        Path | None, typer.Option(help="Folder of prompt templates overriding the packaged ones.")
    ] = None,
    cache_dir: Annotated[Path, typer.Option(help="Exemplar indexes and response cache.")] = DEFAULT_CACHE,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not use the on-disk response cache.")] = False,
    fake_latency: Annotated[float, typer.Option(hidden=True, help="fake provider: seconds per call.")] = 0.0,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Score only a sample (--sample) and estimate the whole run's cost.")
    ] = False,
    sample: Annotated[int, typer.Option(help="Essays scored by --dry-run.")] = 2,
    prices: Annotated[Path | None, typer.Option(help="Price table (YAML/JSON, $ per 1M tokens) for --dry-run.")] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="[ADDRESS]",
            help="Score on Ray: alone, a local Ray instance; with HOST:PORT (or auto), that cluster (pip install "
            "'madrag[ray]'; see docs/scaling.md).",
        ),
    ] = None,
    ray_workers: Annotated[int | None, typer.Option(help="Ray workers (default: one per CPU; 2 locally).")] = None,
) -> None:
    """Score essays trait by trait and store one record per agent call in RUN_DIR."""
    spec = ProviderSpec(
        kind=_choice("--provider", provider, ("llamacpp", "openai", "fake")),  # type: ignore[arg-type]
        model=model,
        model_path=str(model_path) if model_path else None,
        base_url=base_url,
        api_key_env=api_key_env,
        logprobs=logprobs,
        concurrency=concurrency,
        timeout_s=timeout,
        retries=retries,
        fake_latency_s=fake_latency,
        slots=slots,
    )
    routed = dict(parse_role_provider(text, spec) for text in role_provider or [])
    job = ScoreJob(
        data=data,
        rubric=rubric,
        run_dir=run_dir,
        data_format=data_format,
        eval_fold=_parse_fold(fold),
        limit=limit,
        ids=[i.strip() for i in ids.split(",") if i.strip()] if ids else None,
        protocols=protocol,
        provider=spec,
        role_providers=routed,
        settings=ScoringSettings(
            debater_max_tokens=debater_max_tokens,
            judge_max_tokens=judge_max_tokens,
            seed=seed,
            anonymization=_choice("--anonymization", anonymization, ("note", "mask", "none")),  # type: ignore[arg-type]
            score_method=_choice("--score-method", score_method, ("auto", "constrained", "text")),  # type: ignore[arg-type]
            report=_choice("--report", report, ("parsed", "argmax", "expected")),  # type: ignore[arg-type]
            exemplar_max_words=exemplar_max_words,
            judges_per_trait=judges_per_trait,
            prompt_layout=_choice("--prompt-layout", prompt_layout, ("shared_prefix", "seed")),  # type: ignore[arg-type]
        ),
        essay_concurrency=essay_concurrency,
        prompts_dir=prompts_dir,
        cache_dir=cache_dir,
        response_cache=not no_cache,
        ray=ray_options(ray, ray_workers),
    )
    if dry_run:
        _dry_run(job, sample, prices)
    else:
        _run_job(job)


def _dry_run(job: ScoreJob, sample: int, prices: Path | None) -> None:
    """Score ``sample`` essays into ``<run-dir>/dry-run`` (real calls) and extrapolate to the full selection."""
    from madrag.evaluation.costs import estimate_run, load_prices, render_text
    from madrag.pipeline.job import select_essays
    from madrag.store import RunStore

    if sample < 1:
        raise InputError(f"--sample must be >= 1, got {sample}")
    table = load_prices(prices) if prices is not None else None
    rubric = load_rubric(job.rubric)
    planned, _ = select_essays(job, rubric)
    sample_dir = job.run_dir / "dry-run"
    _run_job(job.model_copy(update={"run_dir": sample_dir, "limit": min(sample, len(planned)), "ids": None}))
    store = RunStore(sample_dir / "store.sqlite")
    try:
        estimate = estimate_run(store, len(planned), len(rubric.traits), prices=table)
    finally:
        store.close()
    console.print(f"estimate for {len(planned)} essays x {len(rubric.traits)} traits, from the sample in {sample_dir}:")
    typer.echo(render_text(estimate, priced=table is not None))


def _with_default(fn: Callable[..., None], name: str, value: object, doc: str) -> Callable[..., None]:
    """The same command under another name, with another default for one option."""
    sig = inspect.signature(fn, eval_str=True)
    params = [p.replace(default=value) if p.name == name else p for p in sig.parameters.values()]

    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> None:
        fn(*args, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__doc__ = doc
    return wrapper


app.command("ablate")(
    _with_default(
        score,
        "protocol",
        list(ABLATION),
        "Run several protocols on the same essays in one run (default: the six ablation protocols of seed 000, "
        "SA SARAG MA MAD MARAG MADRAG); debates are shared between MAD and MADRAG. Then: madrag eval RUN_DIR.",
    )
)


app.command("ablate-consensus")(
    _with_default(
        score,
        "protocol",
        list(CONSENSUS_ABLATION),
        "Seed 002's judges on the same essays: SingleJudge, StrictJudge, LenientJudge, ConsensusMAD, SymmetricMAD, "
        "ScoreMaskedMAD (4 rounds; NAME\\[rounds=N] for others); round-0 calls are shared. Then: madrag "
        "eval-consensus --run-dir RUN_DIR (and madrag eval for QWK).",
    )
)


app.command("eval")(eval_command)
app.command("errors")(errors_command)
app.command("report")(report_command)
app.command("costs")(costs_command)
app.add_typer(confidence_app, name="confidence")
app.command("eval-consensus")(eval_consensus_command)


def find_asap_dir() -> Path:
    """The shared ASAP folder: $MADRAG_ASAP_DIR, ./shared/data/asap or ../shared/data/asap."""
    import os

    candidates = [Path(p) for p in [os.environ.get("MADRAG_ASAP_DIR", "")] if p]
    candidates += [Path("shared/data/asap"), Path("../shared/data/asap")]
    for c in candidates:
        if (c / "training_set_rel3_sets7_8.tsv").is_file():
            return c
    raise InputError("ASAP data not found: set MADRAG_ASAP_DIR to the folder with training_set_rel3_sets7_8.tsv")


@app.command()
def demo(
    n: Annotated[int, typer.Option(help="Number of fold-0 set-7 essays to score.")] = 2,
    run_dir: Annotated[Path, typer.Option(help="Run folder (resumed if it exists).")] = Path("runs/demo"),
    max_tokens: Annotated[int, typer.Option(help="Token limit per agent message.")] = 160,
) -> None:
    """Score N real ASAP set-7 essays (all 4 traits) with MADRAG on the embedded model: no network, no key."""
    asap = find_asap_dir()
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=asap / "rubric_set7.json",
        run_dir=run_dir,
        limit=n,
        settings=ScoringSettings(debater_max_tokens=max_tokens, judge_max_tokens=max_tokens),
    )
    _run_job(job)


@runs_app.command("list")
def runs_list(
    root: Annotated[Path, typer.Argument(help="Folder holding run folders.")] = Path("runs"),
) -> None:
    """List the runs under ROOT with their record counts."""
    from madrag.store import RunStore

    table = Table(title=f"runs in {root}")
    for col in ("run dir", "run id", "records", "essays", "protocols", "model", "ran on"):
        table.add_column(col)
    for db in sorted(root.glob("*/store.sqlite")):
        store = RunStore(db)
        try:
            config = store.get_meta("config") or {}
            table.add_row(
                str(db.parent),
                str(store.get_meta("run_id")),
                str(store.count()),
                str(len(store.essays())),
                ", ".join(p["name"] for p in config.get("protocols", [])),
                str((store.get_meta("provider") or {}).get("model", "")),
                ray_summary(store.get_meta("ray")),
            )
        finally:
            store.close()
    console.print(table)


@runs_app.command("export")
def runs_export(
    run_dir: Annotated[Path, typer.Argument(help="A run folder.")],
    what: Annotated[str, typer.Option(help="scores (per essay-trait) or records (per agent call).")] = "scores",
    fmt: Annotated[str, typer.Option("--format", help="csv or jsonl (records: jsonl only).")] = "csv",
    out: Annotated[Path | None, typer.Option(help="Output file (default: in the run folder).")] = None,
) -> None:
    """Export a run's trait scores (CSV/JSONL) or its agent-call records (JSONL)."""
    import json

    from madrag.evaluation.run import score_rows, trait_scores
    from madrag.rubric import Rubric
    from madrag.store import RunStore, write_scores_csv

    db = run_dir / "store.sqlite"
    if not db.is_file():
        raise InputError(f"no run at {run_dir} (missing store.sqlite)")
    store = RunStore(db)
    try:
        if what == "records":
            target = out or run_dir / "records.jsonl"
            n = store.export_records_jsonl(target)
        elif what == "scores":
            config = store.get_meta("config") or {}
            rubric = Rubric.model_validate(config.get("rubric"))
            rows = score_rows(store.essays(), trait_scores(store, rubric), rubric)
            target = out or run_dir / f"scores.{fmt}"
            if fmt == "csv":
                write_scores_csv(rows, target)
            elif fmt == "jsonl":
                target.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
            else:
                raise InputError(f"unknown format {fmt!r}; use csv or jsonl")
            n = len(rows)
        else:
            raise InputError(f"unknown export {what!r}; use scores or records")
    finally:
        store.close()
    console.print(f"wrote {n} rows to {target}")


def main() -> None:
    """Console entry point: a MadragError is one line on stderr and exit code 2."""
    sys.argv[1:] = optional_value(sys.argv[1:], "--ray", LOCAL)  # --ray [ADDRESS]
    try:
        app()
    except MadragError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except ValidationError as exc:  # an option value the settings models refuse
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        print(f"error: invalid value for {where}: {first['msg']}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
