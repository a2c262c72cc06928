"""``madrag score`` and the commands that share its options: ``ablate`` and ``ablate-consensus`` (other default
protocols), ``score --dry-run`` (a sample plus a cost estimate of the whole run) and ``demo`` (real ASAP essays
on the embedded model). The commands are plain functions registered by :mod:`madrag.cli.app`.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from madrag.cli.options import (
    AnonymizationOpt,
    ApiKeyEnvOpt,
    BaseUrlOpt,
    CacheDirOpt,
    ConcurrencyOpt,
    DataFormatOpt,
    DataOpt,
    DebaterMaxTokensOpt,
    DryRunOpt,
    DryRunPricesOpt,
    EmbedderOpt,
    EssayConcurrencyOpt,
    ExemplarMaxWordsOpt,
    FakeLatencyOpt,
    FoldOpt,
    IdsOpt,
    JudgeMaxTokensOpt,
    JudgesPerTraitOpt,
    LimitOpt,
    LogprobsOpt,
    ModelOpt,
    ModelPathOpt,
    NoCacheOpt,
    PromptLayoutOpt,
    PromptsDirOpt,
    ProtocolOpt,
    ProviderOpt,
    RayOpt,
    RayWorkersOpt,
    ReportOpt,
    RetriesOpt,
    RoleProviderOpt,
    RubricOpt,
    SampleOpt,
    SamplingSeedOpt,
    ScoreMethodOpt,
    ScoreRunDirOpt,
    SlotsOpt,
    TimeoutOpt,
    at_least_one,
    choice,
    comma_list,
    provider_spec,
)
from madrag.cli.output import console, err, progress_bar, run_with_progress
from madrag.data.essay import Essay
from madrag.distributed.options import ray_options
from madrag.errors import InputError
from madrag.evaluation.run import open_store
from madrag.pipeline.job import JobResult, ScoreJob, default_cache_dir, execute
from madrag.protocols import ABLATION, CONSENSUS_ABLATION
from madrag.protocols.base import TraitScore
from madrag.protocols.consensus import consensus_protocol
from madrag.providers.spec import parse_role_provider
from madrag.records import AgentRecord
from madrag.retrieval.embedder import EMBEDDERS
from madrag.rubric import load_rubric
from madrag.settings import Anonymization, PromptLayout, ReportFrom, ScoreMethod, ScoringSettings

DEFAULT_CACHE = default_cache_dir()  # the default of --cache-dir
# the values --anonymization, --score-method, --report and --prompt-layout accept, in the order errors list them
ANONYMIZATIONS: tuple[Anonymization, ...] = ("note", "mask", "none")
SCORE_METHODS: tuple[ScoreMethod, ...] = ("auto", "constrained", "text")
REPORTS: tuple[ReportFrom, ...] = ("parsed", "argmax", "expected")
PROMPT_LAYOUTS: tuple[PromptLayout, ...] = ("shared_prefix", "seed")

TINY_MODEL_NOTE = (
    "Note: the embedded SmolLM2-135M model shows the pipeline working end to end; it is far too small to give "
    "valid scores. For real scoring use --provider openai (any OpenAI-compatible server) or --model-path BIG.gguf."
)


def _parse_fold(value: str) -> int | None:
    """``--fold``: a fold number, or ``None`` for 'all'."""
    if value.lower() == "all":
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise InputError(f"--fold must be an integer or 'all', got {value!r}") from exc


def score(
    data: DataOpt,
    rubric: RubricOpt,
    run_dir: ScoreRunDirOpt = Path("runs/latest"),
    data_format: DataFormatOpt = "auto",
    fold: FoldOpt = "0",
    limit: LimitOpt = None,
    ids: IdsOpt = None,
    protocol: ProtocolOpt = ["MADRAG"],  # noqa: B006
    provider: ProviderOpt = "llamacpp",
    model: ModelOpt = None,
    model_path: ModelPathOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = "OPENAI_API_KEY",
    logprobs: LogprobsOpt = True,
    role_provider: RoleProviderOpt = None,
    concurrency: ConcurrencyOpt = None,
    slots: SlotsOpt = 2,
    essay_concurrency: EssayConcurrencyOpt = None,
    timeout: TimeoutOpt = 300.0,
    retries: RetriesOpt = 4,
    debater_max_tokens: DebaterMaxTokensOpt = 400,
    judge_max_tokens: JudgeMaxTokensOpt = 400,
    seed: SamplingSeedOpt = 1234,
    anonymization: AnonymizationOpt = "note",
    score_method: ScoreMethodOpt = "auto",
    report: ReportOpt = "parsed",
    exemplar_max_words: ExemplarMaxWordsOpt = None,
    judges_per_trait: JudgesPerTraitOpt = 1,
    prompt_layout: PromptLayoutOpt = "shared_prefix",
    prompts_dir: PromptsDirOpt = None,
    cache_dir: CacheDirOpt = DEFAULT_CACHE,
    no_cache: NoCacheOpt = False,
    embedder: EmbedderOpt = "minilm",
    fake_latency: FakeLatencyOpt = 0.0,
    dry_run: DryRunOpt = False,
    sample: SampleOpt = 2,
    prices: DryRunPricesOpt = None,
    ray: RayOpt = None,
    ray_workers: RayWorkersOpt = None,
) -> None:
    """Score essays trait by trait and store one record per agent call in RUN_DIR."""
    spec = provider_spec(
        provider=provider,
        model=model,
        model_path=model_path,
        base_url=base_url,
        api_key_env=api_key_env,
        concurrency=concurrency,
        timeout=timeout,
        retries=retries,
        slots=slots,
        logprobs=logprobs,
        fake_latency=fake_latency,
    )
    job = ScoreJob(
        data=data,
        rubric=rubric,
        run_dir=run_dir,
        data_format=data_format,
        eval_fold=_parse_fold(fold),
        limit=limit,
        ids=comma_list(ids) if ids else None,
        protocols=protocol,
        provider=spec,
        role_providers=dict(parse_role_provider(text, spec) for text in role_provider or []),
        settings=ScoringSettings(
            debater_max_tokens=debater_max_tokens,
            judge_max_tokens=judge_max_tokens,
            seed=seed,
            anonymization=choice("--anonymization", anonymization, ANONYMIZATIONS),
            score_method=choice("--score-method", score_method, SCORE_METHODS),
            report=choice("--report", report, REPORTS),
            exemplar_max_words=exemplar_max_words,
            judges_per_trait=judges_per_trait,
            prompt_layout=choice("--prompt-layout", prompt_layout, PROMPT_LAYOUTS),
        ),
        essay_concurrency=essay_concurrency,
        prompts_dir=prompts_dir,
        cache_dir=cache_dir,
        response_cache=not no_cache,
        embedder=choice("--embedder", embedder, EMBEDDERS),
        ray=ray_options(ray, ray_workers),
    )
    if dry_run:
        _dry_run(job, sample, prices)
    else:
        _run_job(job)


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


ablate = _with_default(
    score,
    "protocol",
    list(ABLATION),
    "Run several protocols on the same essays in one run (default: the six ablation protocols of seed 000, "
    "SA SARAG MA MAD MARAG MADRAG); debates are shared between MAD and MADRAG. Then: madrag eval RUN_DIR.",
)

ablate_consensus = _with_default(
    score,
    "protocol",
    list(CONSENSUS_ABLATION),
    "Seed 002's judges on the same essays: SingleJudge, StrictJudge, LenientJudge, ConsensusMAD, SymmetricMAD, "
    "ScoreMaskedMAD (4 rounds; NAME\\[rounds=N] for others); round-0 calls are shared. Then: madrag "
    "eval-consensus --run-dir RUN_DIR (and madrag eval for QWK).",
)


def _run_job(job: ScoreJob) -> JobResult:
    """Run a job with progress bars (building the exemplar bank, then the trait scores); Ctrl-C stops it
    cleanly (records so far are kept). The bars show once the data is loaded and checked."""
    rubric = load_rubric(job.rubric)
    if job.provider.kind == "llamacpp" and job.provider.model_path is None:
        err.print(f"[yellow]{TINY_MODEL_NOTE}[/yellow]")
    progress = progress_bar()
    bank_task = progress.add_task("embedding the exemplar pool", total=None, visible=False)
    task = progress.add_task("trait scores", total=None, visible=False)
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
        progress.console.print(f"essay {essay.id}: {_essay_line(scores)}", markup=False, highlight=False)

    def on_bank(done: int, total: int) -> None:
        progress.update(bank_task, completed=done, total=total, visible=True)
        progress.start()

    def on_start(total: int) -> None:
        progress.update(task, total=total, visible=True)
        progress.start()

    work = execute(
        job,
        on_record=on_record,
        on_essay_done=on_essay,
        on_stage=lambda m: progress.console.print(m, markup=False, highlight=False),
        on_start=on_start,
        on_bank_progress=on_bank,
    )
    result = run_with_progress(
        progress,
        work,
        lambda: (
            f"interrupted after {len(done_essays)} essays; every finished call is saved in {job.run_dir}. "
            "Run the same command again to resume."
        ),
    )
    _summary(result, rubric.trait_names)
    return result


def _essay_line(scores: list[TraitScore]) -> str:
    """An essay's trait scores on one line, grouped by protocol when there are several."""
    by_protocol: dict[str, list[str]] = {}
    for s in scores:
        by_protocol.setdefault(s.protocol, []).append(f"{s.trait}={s.score if s.score is not None else '?'}")
    return "; ".join(f"{p}: {', '.join(v)}" if len(by_protocol) > 1 else ", ".join(v) for p, v in by_protocol.items())


def _summary(result: JobResult, traits: list[str]) -> None:
    """The table of trait scores (with the human reference) and the call counts of a finished job."""
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


def _dry_run(job: ScoreJob, sample: int, prices: Path | None) -> None:
    """Score ``sample`` essays into ``<run-dir>/dry-run`` (real calls) and extrapolate to the full selection."""
    from madrag.evaluation.costs.estimate import estimate_run
    from madrag.evaluation.costs.prices import load_prices
    from madrag.evaluation.costs.render import render_text
    from madrag.pipeline.job import select_essays

    at_least_one("--sample", sample)
    table = load_prices(prices) if prices is not None else None
    rubric = load_rubric(job.rubric)
    planned, _ = select_essays(job, rubric)
    sample_dir = job.run_dir / "dry-run"
    _run_job(job.model_copy(update={"run_dir": sample_dir, "limit": min(sample, len(planned)), "ids": None}))
    store = open_store(sample_dir)
    try:
        estimate = estimate_run(store, len(planned), len(rubric.traits), prices=table)
    finally:
        store.close()
    console.print(f"estimate for {len(planned)} essays x {len(rubric.traits)} traits, from the sample in {sample_dir}:")
    typer.echo(render_text(estimate, priced=table is not None))


def find_asap_dir() -> Path:
    """The shared ASAP folder: $MADRAG_ASAP_DIR, ./shared/data/asap or ../shared/data/asap."""
    candidates = [Path(p) for p in [os.environ.get("MADRAG_ASAP_DIR", "")] if p]
    candidates += [Path("shared/data/asap"), Path("../shared/data/asap")]
    for c in candidates:
        if (c / "training_set_rel3_sets7_8.tsv").is_file():
            return c
    raise InputError("ASAP data not found: set MADRAG_ASAP_DIR to the folder with training_set_rel3_sets7_8.tsv")


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
