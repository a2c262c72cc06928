"""``madrag score`` and the commands that share its options: ``score --protocols PRESET`` (the papers' protocol
lists, :mod:`madrag.cli.presets`), ``score --dry-run`` (a sample plus a cost estimate of the whole run) and
``demo`` (real ASAP essays on the embedded model). ``ablate`` and ``ablate-consensus`` are the old names of
``score --protocols paper-ablation`` and ``consensus-ablation``, kept as hidden aliases: the same command with
that preset as its default. The commands are plain functions registered by :mod:`madrag.cli.app`; the scoring
commands are one function (:func:`score_command`), whose options are the groups of
:mod:`madrag.cli.score_options`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from madrag.cli.groups import OptionGroup, with_groups
from madrag.cli.options import DryRunOpt, DryRunPricesOpt, SampleOpt, at_least_one
from madrag.cli.output import console, err
from madrag.cli.presets import PresetOpt, ProtocolListOpt, choose_protocols
from madrag.cli.score_options import BACKEND, RUN, SETTINGS, SOURCE, JobFields
from madrag.data.shipped import find_asap_dir
from madrag.errors import clip
from madrag.pipeline.job import ScoreJob
from madrag.rubric import load_rubric
from madrag.settings import ScoringSettings

if TYPE_CHECKING:
    from madrag.api.result import ScoringResult

# The scoring stack (madrag.api: pandas, the run store, the evaluation) is imported inside the commands that
# run a job, so that building the commands' options (madrag score --help) does not import it.


def score_command(
    name: str, default: str | list[str], doc: str, settings_group: OptionGroup[ScoringSettings] = SETTINGS
) -> Callable[..., None]:
    """A scoring command: the option groups of :mod:`madrag.cli.score_options` (``settings_group``: the options
    of the scoring settings, generated from their model), ``--protocols`` / ``--protocol`` (default
    ``default``: a preset's name or a list of protocols) and ``--dry-run``; ``score`` and its old aliases
    ``ablate`` and ``ablate-consensus`` differ only in that default."""

    def command(
        *,
        source: JobFields,
        protocols: PresetOpt = None,
        protocol: ProtocolListOpt = None,
        backend: JobFields,
        settings: ScoringSettings,
        run: JobFields,
        dry_run: DryRunOpt = False,
        sample: SampleOpt = 2,
        prices: DryRunPricesOpt = None,
    ) -> None:
        chosen = choose_protocols(protocols, protocol, default)
        job = ScoreJob(
            protocols=chosen.protocols, protocol_preset=chosen.preset, settings=settings, **source, **backend, **run
        )
        if dry_run:
            _dry_run(job, sample, prices)
        else:
            exit_on_failed_calls(run_cli_job(job))

    command.__name__ = command.__qualname__ = name
    command.__doc__ = doc
    return with_groups(SOURCE, BACKEND, settings_group, RUN)(command)


score = score_command(
    "score",
    ["MADRAG"],
    doc="""Score essays trait by trait (MADRAG, or the protocols of -p / --protocols) and store one record per
    agent call in RUN_DIR.

    --protocols PRESET: a paper's protocols on the same essays (paper-ablation, consensus-ablation ...).

    Then: madrag eval RUN_DIR (the agreement tables), madrag report RUN_DIR (the HTML report).

    Exit code 0: every call answered. 2: an error, or --max-failures reached.

    Exit code 3: calls failed after their retries (their essay-traits unscored; run the command again to retry).
    """,
)

ablate = score_command(
    "ablate",
    "paper-ablation",
    doc="The old name of 'madrag score --protocols paper-ablation': the MADRAG paper's six ablation protocols, "
    "SA SARAG MA MAD MARAG MADRAG, on the same essays in one run. Then: madrag eval RUN_DIR.",
)

ablate_consensus = score_command(
    "ablate_consensus",
    "consensus-ablation",
    doc="The old name of 'madrag score --protocols consensus-ablation': the consensus paper's judges on the same "
    "essays, SingleJudge StrictJudge LenientJudge ConsensusMAD SymmetricMAD ScoreMaskedMAD. Then: madrag paper "
    "eval-consensus RUN_DIR.",
)


FAILED_CALLS_EXIT = 3
"""The exit code of a run that finished with calls that failed after their retries (their essay-traits have no
score; resuming retries them). A run stopped by ``--max-failures`` is an error (exit code 2)."""


MAX_NAMED = 10
"""The most failed calls the warning of a run names (essay, trait, role); ``result.failures`` has them all."""


def exit_on_failed_calls(result: ScoringResult) -> None:
    """A warning on stderr and exit code 3 when calls of the run failed after their retries."""
    failed = result.stats.failed_calls
    if failed:
        for call in result.failures[:MAX_NAMED]:
            trait = "every trait" if call.trait == "*" else f"trait {call.trait}"
            err.print(
                f"failed: essay {call.essay}, {trait}, role {call.role} ({call.protocol}): {clip(call.error)}",
                markup=False,
            )
        err.print(
            f"warning: {failed} call{'s' if failed != 1 else ''} failed after retries; resume to retry them "
            f"(run the same command again; every other call is saved in {result.run_dir})"
        )
        raise typer.Exit(FAILED_CALLS_EXIT)


def run_cli_job(job: ScoreJob) -> ScoringResult:
    """Run a job through the Python API (the one scoring path) with progress bars on stderr (building the
    exemplar bank, then the trait scores; shown once the data is loaded and checked) and each finished essay's
    scores; Ctrl-C stops it cleanly (records so far are kept) with exit code 130. Calls that fail after their
    retries are counted in the summary (the caller decides the exit code: :func:`exit_on_failed_calls`)."""
    from madrag.api.progress import ScoreProgress
    from madrag.api.scoring import run_job

    progress = ScoreProgress(console=err, essay_lines=True)
    try:
        result = run_job(job, progress=progress)
    except KeyboardInterrupt:
        err.print(
            f"interrupted after {progress.essays_done} essays; every finished call is saved in {job.run_dir}. "
            "Run the same command again to resume."
        )
        raise typer.Exit(130) from None
    _summary(result)
    return result


def _summary(result: ScoringResult) -> None:
    """The table of trait scores (with the human reference) and the call counts of a finished job."""
    from madrag.pipeline.unusable import summary_lines

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
            table.add_row(*(Text(cell) for cell in (essay.id, protocol, *cells)))  # "[rounds=1]" is no markup
    console.print(table)
    console.print(_calls_line(result), markup=False)
    for line in summary_lines(result.unusable):
        console.print(line, markup=False)


def _calls_line(result: ScoringResult) -> str:
    """The job's calls: made now, reused from the run store, and of those made, the ones the backend answered and
    the ones answered from the response cache (no request sent), those that failed after their retries; its time."""
    stats = result.stats
    cache = f", {stats.cached} from the response cache (no request sent)" if stats.cached else ""
    failed = f", {stats.failed_calls} failed after retries" if stats.failed_calls else ""
    return (
        f"{stats.made} agent calls made, {stats.reused} reused from the run store; of those made, "
        f"{stats.made - stats.cached} answered by the backend{cache}{failed}; {result.elapsed_s:.0f}s"
    )


def _dry_run(job: ScoreJob, sample: int, prices: Path | None) -> None:
    """Score ``sample`` essays into ``<run-dir>/dry-run`` (real calls) and extrapolate to the full selection."""
    from madrag.evaluation.costs.estimate import estimate_run
    from madrag.evaluation.costs.prices import load_prices
    from madrag.evaluation.costs.render import render_text
    from madrag.evaluation.run import open_store
    from madrag.pipeline.job import job_rubric, select_essays

    at_least_one("--sample", sample)
    table = load_prices(prices) if prices is not None else None
    rubric = job_rubric(job)
    planned, _ = select_essays(job, rubric)
    sample_dir = job.run_dir / "dry-run"
    done = run_cli_job(job.model_copy(update={"run_dir": sample_dir, "limit": min(sample, len(planned)), "ids": None}))
    if done.stats.failed_calls:
        err.print("no estimate from a sample with failed calls: they would be missing from it")
    exit_on_failed_calls(done)
    with closing(open_store(sample_dir)) as store:
        estimate = estimate_run(store, len(planned), len(rubric.traits), prices=table)
    console.print(f"estimate for {len(planned)} essays x {len(rubric.traits)} traits, from the sample in {sample_dir}:")
    typer.echo(render_text(estimate, priced=table is not None))


def demo(
    n: Annotated[int, typer.Option(help="Number of fold-0 set-7 essays to score.")] = 2,
    run_dir: Annotated[Path, typer.Option(help="Run folder (resumed if it exists).")] = Path("runs/demo"),
    max_tokens: Annotated[int, typer.Option(help="Token limit per agent message.")] = 160,
    traits: Annotated[
        str | None,
        typer.Option(
            help="Only these traits, comma-separated (Ideas,Style); all 4 by default, each a quarter of the time."
        ),
    ] = None,
) -> None:
    """Score N real ASAP set-7 essays (all 4 traits, or those of --traits) with MADRAG on the embedded model: no
    network, no key."""
    asap = find_asap_dir()
    rubric = asap / "rubric_set7.json"
    job = ScoreJob(
        data=asap / "training_set_rel3_sets7_8.tsv",
        rubric=load_rubric(rubric).only([t.strip() for t in traits.split(",")]) if traits else rubric,
        run_dir=run_dir,
        limit=n,
        settings=ScoringSettings(debater_max_tokens=max_tokens, judge_max_tokens=max_tokens),
    )
    exit_on_failed_calls(run_cli_job(job))
