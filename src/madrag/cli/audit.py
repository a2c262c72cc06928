"""``madrag audit``: re-score a sample of a run's essays under controlled changes and report how far to trust
the scorer (:mod:`madrag.audit`). Registered by :mod:`madrag.cli.app`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from madrag.audit.api import audit, plan_audit
from madrag.audit.perturbations import PERTURBATIONS
from madrag.audit.report import markdown, text
from madrag.cli.options import RunArg, comma_list, need_run_dir
from madrag.files.atomic import write_text_atomic

_NAMES = ", ".join(p.name for p in PERTURBATIONS)


def audit_command(
    run: RunArg = None,
    run_dir: Annotated[
        Path | None, typer.Option(help="Run folder (or give it as RUN_DIR).", show_default=False)
    ] = None,
    sample: Annotated[int, typer.Option(min=1, help="Essays of the run to re-score.")] = 8,
    seed: Annotated[int, typer.Option(help="Seed of the sample and of the spelling noise.")] = 0,
    perturbations: Annotated[
        str | None, typer.Option("--perturbations", help=f"Comma-separated, default all: {_NAMES}.")
    ] = None,
    repeats: Annotated[int, typer.Option(min=0, help="Repeats with other seeds (the run's seed + 1, + 2 ...).")] = 2,
    debater_temperature: Annotated[
        float | None,
        typer.Option(help="A repeat with this debater temperature (runs that debate; default 1.0).", min=0, max=2),
    ] = 1.0,
    protocol: Annotated[
        str | None, typer.Option(help="Comma-separated protocols of the run to audit (default: all of them).")
    ] = None,
    provider: Annotated[
        str | None,
        typer.Option(help="Another backend (llamacpp[:MODEL.gguf], openai:MODEL[@URL], fake); default the run's."),
    ] = None,
    bootstrap: Annotated[int, typer.Option(min=0, help="Bootstrap resamples of each interval.")] = 1000,
    out: Annotated[Path | None, typer.Option(help="Also write the report as markdown to this file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON report instead of text.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the sample, the conditions and the calls expected; call nothing.")
    ] = False,
) -> None:
    """Re-score a sample of the run's essays with other seeds and with perturbed texts (injected instructions,
    off-topic, padding, placeholders, names, spelling) and report stability, score shifts, compression and
    evidence per protocol and trait; written to <run>/audit/audit.json. Running it again resumes."""
    folder = need_run_dir(run, run_dir)
    options: dict[str, Any] = {
        "sample": sample,
        "seed": seed,
        "perturbations": comma_list(perturbations) if perturbations else None,
        "repeats": repeats,
        "debater_temperature": debater_temperature,
        "protocols": comma_list(protocol) if protocol else None,
        "provider": provider,
    }
    if dry_run:
        typer.echo(plan_audit(folder, **options).text())
        return
    report = audit(folder, **options, bootstrap=bootstrap, on_stage=lambda line: typer.echo(line, err=True))
    if out is not None:
        write_text_atomic(out, markdown(report))
    typer.echo(report.model_dump_json(indent=2) if as_json else text(report))
