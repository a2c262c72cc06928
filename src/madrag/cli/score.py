"""``madrag score`` and the commands that share its options: ``ablate`` and ``ablate-consensus`` (other default
protocols), ``score --dry-run`` (a sample plus a cost estimate of the whole run) and ``demo`` (real ASAP essays
on the embedded model). The commands are plain functions registered by :mod:`madrag.cli.app`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from madrag.api.progress import ScoreProgress
from madrag.api.result import ScoringResult
from madrag.api.scoring import run_job
from madrag.cli.options import (
    AdaptiveDebateOpt,
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
    EvidenceCheckOpt,
    ExemplarMaxWordsOpt,
    FailFastOpt,
    FakeLatencyOpt,
    FoldOpt,
    IdsOpt,
    JudgeExemplarsOpt,
    JudgeMaxTokensOpt,
    JudgesPerTraitOpt,
    LimitOpt,
    LogprobsOpt,
    MaxFailuresOpt,
    MinUsableJudgesOpt,
    ModelOpt,
    ModelPathOpt,
    NoCacheOpt,
    PlaceholdersOpt,
    PromptLayoutOpt,
    PromptsDirOpt,
    ProtocolOpt,
    ProviderOpt,
    RayOpt,
    RayWorkersOpt,
    ReferenceTiesScoreOpt,
    ReportOpt,
    RetriesOpt,
    RoleProviderOpt,
    RubricOpt,
    SampleOpt,
    SamplingParamsOpt,
    SamplingSeedOpt,
    SaragExemplarsOpt,
    ScoreFollowupOpt,
    ScoreMethodOpt,
    ScoreRunDirOpt,
    SlotsOpt,
    TimeoutOpt,
    TokenParamOpt,
    VerifyClaimsOpt,
    at_least_one,
    choice,
    comma_list,
    failure_budget,
    provider_spec,
)
from madrag.cli.output import console, err
from madrag.data.shipped import find_asap_dir
from madrag.data.splits import EACH
from madrag.distributed.options import ray_options
from madrag.errors import InputError
from madrag.evaluation.run import open_store
from madrag.metrics import TIE_RULES
from madrag.pipeline.job import ScoreJob, default_cache_dir
from madrag.protocols import ABLATION, CONSENSUS_ABLATION
from madrag.providers.spec import parse_role_provider
from madrag.retrieval.embedder import EMBEDDERS
from madrag.rubric import load_rubric
from madrag.settings import (
    EvidenceCheck,
    JudgeExemplars,
    Placeholders,
    PromptLayout,
    ReportFrom,
    SaragExemplars,
    ScoreMethod,
    ScoringSettings,
)

DEFAULT_CACHE = default_cache_dir()  # the default of --cache-dir
# the values --placeholders, --evidence-check, --score-method, --report and --prompt-layout accept, in the order
# errors list them
PLACEHOLDERS: tuple[Placeholders, ...] = ("note", "mask", "none")
EVIDENCE_CHECKS: tuple[EvidenceCheck, ...] = ("record", "feedback", "off")
SCORE_METHODS: tuple[ScoreMethod, ...] = ("auto", "constrained", "text")
REPORTS: tuple[ReportFrom, ...] = ("parsed", "argmax", "expected")
PROMPT_LAYOUTS: tuple[PromptLayout, ...] = ("seed", "shared_prefix")
SARAG_EXEMPLARS: tuple[SaragExemplars, ...] = ("span", "similar")
JUDGE_EXEMPLARS: tuple[JudgeExemplars, ...] = ("nearest", "anchors")


def _parse_fold(value: str) -> int | str | None:
    """``--fold``: a fold number, ``None`` for 'all', or ``"each"`` (cross-fold scoring)."""
    if value.lower() == "all":
        return None
    if value.lower() == EACH:
        return EACH
    try:
        return int(value)
    except ValueError as exc:
        raise InputError(f"--fold must be an integer, 'each' or 'all', got {value!r}") from exc


_DEFAULTS = ScoringSettings()
"""The scoring settings' defaults, shown as the CLI's."""


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
    token_param: TokenParamOpt = "auto",
    sampling_params: SamplingParamsOpt = "auto",
    role_provider: RoleProviderOpt = None,
    concurrency: ConcurrencyOpt = None,
    slots: SlotsOpt = 2,
    essay_concurrency: EssayConcurrencyOpt = None,
    timeout: TimeoutOpt = 300.0,
    retries: RetriesOpt = 4,
    max_failures: MaxFailuresOpt = None,
    fail_fast: FailFastOpt = False,
    debater_max_tokens: DebaterMaxTokensOpt = _DEFAULTS.debater_max_tokens,
    judge_max_tokens: JudgeMaxTokensOpt = _DEFAULTS.judge_max_tokens,
    seed: SamplingSeedOpt = 1234,
    placeholders: PlaceholdersOpt = "note",
    reference_ties: ReferenceTiesScoreOpt = "half_up",
    evidence_check: EvidenceCheckOpt = "record",
    score_method: ScoreMethodOpt = "auto",
    report: ReportOpt = "parsed",
    score_followup: ScoreFollowupOpt = False,
    exemplar_max_words: ExemplarMaxWordsOpt = None,
    judges_per_trait: JudgesPerTraitOpt = 1,
    min_usable_judges: MinUsableJudgesOpt = None,
    prompt_layout: PromptLayoutOpt = "seed",
    verify_claims: VerifyClaimsOpt = False,
    sarag_exemplars: SaragExemplarsOpt = "span",
    judge_exemplars: JudgeExemplarsOpt = "nearest",
    adaptive_debate: AdaptiveDebateOpt = None,
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
    """Score essays trait by trait and store one record per agent call in RUN_DIR.

    Exit code 0: every call answered. 2: an error, or --max-failures reached.

    Exit code 3: calls failed after their retries (their essay-traits unscored; run the command again to retry).
    """
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
        token_param=token_param,
        sampling_params=sampling_params,
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
            placeholders=choice("--placeholders", placeholders, PLACEHOLDERS),
            reference_ties=choice("--reference-ties", reference_ties, TIE_RULES),
            evidence_check=choice("--evidence-check", evidence_check, EVIDENCE_CHECKS),
            score_method=choice("--score-method", score_method, SCORE_METHODS),
            report=choice("--report", report, REPORTS),
            score_followup=score_followup,
            exemplar_max_words=exemplar_max_words,
            judges_per_trait=judges_per_trait,
            min_usable_judges=min_usable_judges,
            prompt_layout=choice("--prompt-layout", prompt_layout, PROMPT_LAYOUTS),
            verify_claims=verify_claims,
            sarag_exemplars=choice("--sarag-exemplars", sarag_exemplars, SARAG_EXEMPLARS),
            judge_exemplars=choice("--judge-exemplars", judge_exemplars, JUDGE_EXEMPLARS),
            adaptive_debate=adaptive_debate,
        ),
        essay_concurrency=essay_concurrency,
        prompts_dir=prompts_dir,
        cache_dir=cache_dir,
        response_cache=not no_cache,
        embedder=choice("--embedder", embedder, EMBEDDERS),
        ray=ray_options(ray, ray_workers),
        max_failures=failure_budget(max_failures, fail_fast),
    )
    if dry_run:
        _dry_run(job, sample, prices)
    else:
        _exit_on_failed_calls(_run_job(job))


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


FAILED_CALLS_EXIT = 3
"""The exit code of a run that finished with calls that failed after their retries (their essay-traits have no
score; resuming retries them). A run stopped by ``--max-failures`` is an error (exit code 2)."""


def _exit_on_failed_calls(result: ScoringResult) -> None:
    """A warning on stderr and exit code 3 when calls of the run failed after their retries."""
    failed = result.stats.failed_calls
    if failed:
        err.print(
            f"warning: {failed} call{'s' if failed != 1 else ''} failed after retries; resume to retry them "
            f"(run the same command again; every other call is saved in {result.run_dir})"
        )
        raise typer.Exit(FAILED_CALLS_EXIT)


def _run_job(job: ScoreJob) -> ScoringResult:
    """Run a job through the Python API (the one scoring path) with progress bars on stderr (building the
    exemplar bank, then the trait scores; shown once the data is loaded and checked) and each finished essay's
    scores; Ctrl-C stops it cleanly (records so far are kept) with exit code 130. Calls that fail after their
    retries are counted in the summary (the caller decides the exit code: :func:`_exit_on_failed_calls`)."""
    progress = ScoreProgress(console=err, essay_lines=True)
    try:
        result = run_job(job, progress=progress)
    except KeyboardInterrupt:
        err.print(
            f"interrupted after {progress.essays_done} essays; every finished call is saved in {job.run_dir}. "
            "Run the same command again to resume."
        )
        raise typer.Exit(130) from None
    _summary(result, adaptive=job.settings.adaptive_debate is not None)
    return result


def _summary(result: ScoringResult, adaptive: bool = False) -> None:
    """The table of trait scores (with the human reference) and the call counts of a finished job (``adaptive``:
    and the debates an adaptive debate skipped)."""
    traits = result.rubric.trait_names
    protocols = sorted({s.protocol for s in result.trait_scores})
    table = Table(title=f"trait scores (run {result.run_id}{', resumed' if result.resumed else ''})")
    table.add_column("essay")
    table.add_column("protocol")
    for t in traits:
        table.add_column(t, justify="center")
    by_key = {(s.essay_id, s.protocol, s.trait): s for s in result.trait_scores}
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
    failed = f", {stats.failed_calls} failed after retries" if stats.failed_calls else ""
    console.print(
        f"{stats.made} agent calls made{failed}, {stats.reused} reused from the run store, "
        f"{stats.failed_scores} judge scores unusable; {result.elapsed_s:.0f}s"
    )
    if adaptive:
        from madrag.cli.costs import adaptive_line
        from madrag.protocols.adaptive import adaptive_summary

        for protocol, row in adaptive_summary(result.records).items():
            console.print(adaptive_line(protocol, row))


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
    done = _run_job(job.model_copy(update={"run_dir": sample_dir, "limit": min(sample, len(planned)), "ids": None}))
    if done.stats.failed_calls:
        err.print("no estimate from a sample with failed calls: they would be missing from it")
    _exit_on_failed_calls(done)
    store = open_store(sample_dir)
    try:
        estimate = estimate_run(store, len(planned), len(rubric.traits), prices=table)
    finally:
        store.close()
    console.print(f"estimate for {len(planned)} essays x {len(rubric.traits)} traits, from the sample in {sample_dir}:")
    typer.echo(render_text(estimate, priced=table is not None))


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
    _exit_on_failed_calls(_run_job(job))
