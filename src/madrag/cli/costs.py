"""``madrag costs``: what a run cost, and optionally what a larger run would cost (a dry-run estimate).

The command is a plain function with typer annotations, registered by :mod:`madrag.cli.app`.
"""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path
from typing import Annotated

import typer

from madrag.cli.options import RunArg, at_least_one, run_folder
from madrag.errors import InputError
from madrag.evaluation.costs.estimate import RunEstimate, estimate_run
from madrag.evaluation.costs.prefix import prefix_stats
from madrag.evaluation.costs.prices import load_prices
from madrag.evaluation.costs.render import estimate_to_dict, render_text, report_to_dict
from madrag.evaluation.costs.tally import WHOLE_ESSAY, CostReport, cost_report
from madrag.evaluation.run import open_store
from madrag.protocols.adaptive import adaptive_summary

PRICES_HELP = (
    "Price table (YAML or JSON): model -> {prompt: $ per 1M tokens, completion: $ per 1M tokens}; "
    "'*' prices every other model."
)


def _sample_traits(report: CostReport) -> int:
    """How many traits the run scored (whole-essay calls count as none): the default of --estimate-traits."""
    return max(1, len({c.trait for c in report.calls if c.trait != WHOLE_ESSAY}))


def costs_command(
    run: RunArg = None,
    run_dir: Annotated[
        Path | None, typer.Option(help="Run folder (holding store.sqlite); default runs/latest.", show_default=False)
    ] = None,
    prices: Annotated[Path | None, typer.Option(help=PRICES_HELP)] = None,
    estimate_essays: Annotated[
        int | None,
        typer.Option(help="Also estimate a run of this many essays, using this run as the sample."),
    ] = None,
    estimate_traits: Annotated[
        int | None, typer.Option(help="Traits per essay for the estimate (default: as many as this run has).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Calls, requests, tokens, cache hits and (with --prices) estimated spend of a run, per protocol and per
    essay-trait; debates shared by several protocols are shown whole and shared out equally."""
    at_least_one("--estimate-essays", estimate_essays)
    at_least_one("--estimate-traits", estimate_traits)
    if estimate_traits is not None and estimate_essays is None:
        raise InputError("--estimate-traits needs --estimate-essays")
    table = load_prices(prices) if prices is not None else None
    run_dir = run_folder(run, run_dir, Path("runs/latest")) or Path("runs/latest")
    with closing(open_store(run_dir)) as store:
        report = cost_report(store, table)
        prefix = prefix_stats(store.records())
        adaptive = adaptive_summary(store)
    if not report.calls:
        raise InputError(f"run at {run_dir} holds no records yet")
    estimate: RunEstimate | None = None
    if estimate_essays is not None:
        estimate = estimate_run(report, estimate_essays, estimate_traits or _sample_traits(report))
    if as_json:
        data = {
            "report": report_to_dict(report),
            "estimate": estimate and estimate_to_dict(estimate),
            "shared_prefix_fraction": prefix.shared_fraction,
            "adaptive_debate": adaptive,
        }
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    typer.echo(render_text(report))
    typer.echo(
        f"shared prompt prefix: {prefix.shared_fraction:.1%} of prompt characters repeat the start of an earlier "
        f"prompt of the same essay ({prefix.calls} calls; reusable by servers with prefix caching)"
    )
    if estimate is not None:
        typer.echo(render_text(estimate, priced=table is not None))
    for protocol, row in adaptive.items():
        typer.echo(adaptive_line(protocol, row))


def adaptive_line(protocol: str, row: dict[str, int | float]) -> str:
    """One protocol's adaptive debate in words: traits debated and skipped, calls not made, screening calls."""
    return (
        f"adaptive debate {protocol} (threshold {row['threshold']}): debated {row['debated']} of "
        f"{row['screened']} essay-traits, skipped {row['skipped']}: {row['calls_saved']} calls not made, "
        f"{row['screen_calls']} debate-free Judge calls made first (net {row['net_saved']} saved; the screening "
        "calls are free when the run also has MA/MARAG)"
    )
