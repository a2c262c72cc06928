"""``madrag runs ...``: list the runs under a folder, export a run's trait scores or its agent-call records."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from madrag.cli.options import RunArg, RunDirOpt, need_run_dir
from madrag.cli.output import console
from madrag.cli.paths import output_file
from madrag.distributed.options import ray_summary
from madrag.errors import InputError
from madrag.evaluation.run import open_store, require_run
from madrag.files.atomic import open_atomic
from madrag.pipeline.unusable import Unusable, models_words, stored_accounts
from madrag.store import RunStore

runs_app = typer.Typer(help="List runs and export their scores or records.", no_args_is_help=True)


@runs_app.command("list")
def runs_list(
    root: Annotated[Path, typer.Argument(help="Folder holding run folders.")] = Path("runs"),
) -> None:
    """List the runs under ROOT: when each started, its status (complete, interrupted, failed or running, from
    its run.log), record and essay counts, protocols, the scores it could not read (per protocol, as its last
    finished job counted them) and model."""
    table = Table(title=f"runs in {root}")
    columns = ("run dir", "started", "status", "run id", "records", "essays", "protocols", "not read", "model")
    for col in (*columns, "ran on"):
        table.add_column(col)
    for db in sorted(root.glob("*/store.sqlite")):
        table.add_row(*(Text(cell) for cell in _run_row(db.parent)))  # as written: "[rounds=1]" is no markup
    console.print(table)


def _run_row(run_dir: Path) -> list[str]:
    """One row of ``runs list``; what a run did not record (a log, a model) is shown as such, never guessed."""
    from madrag.pipeline.run_log import read_status
    from madrag.store.writer_lock import held_by

    logged = read_status(run_dir, running=held_by(run_dir) is not None)
    with closing(open_store(run_dir)) as store:
        config = store.get_meta("config") or {}
        # the model the answers named (the one asked for beside it where it differs), else the one asked for
        model = models_words(store) or (store.get_meta("provider") or {}).get("model")
        return [
            str(run_dir),
            logged.started or "—",
            logged.status or "— (no run.log)",
            str(store.get_meta("run_id")),
            str(store.count()),
            str(len(store.essays())),
            ", ".join(p["name"] for p in config.get("protocols", [])),
            _not_read(stored_accounts(store)),
            str(model) if model else "—",
            ray_summary(store.get_meta("ray")),
        ]


def _not_read(accounts: dict[str, Unusable] | None) -> str:
    """The run's unread scores per protocol ("CJ: 21 of 24 comparisons unusable, 3 of 3 missing"), "all read",
    or a dash when none was counted (counts are made at a job's end: a run stopped before it, or made
    before madrag kept them, has none)."""
    if accounts is None:
        return "— (not counted)"
    said = [f"{protocol}: {account.short()}" for protocol, account in accounts.items() if account.short() != "all read"]
    return "; ".join(said) or "all read"


@runs_app.command("export")
def runs_export(
    run: RunArg = None,
    run_dir: RunDirOpt = None,
    what: Annotated[str, typer.Option(help="scores (per essay-trait) or records (per agent call).")] = "scores",
    fmt: Annotated[str, typer.Option("--format", help="csv or jsonl (records: jsonl only).")] = "csv",
    out: Annotated[Path | None, typer.Option(help="Output file (default: in the run folder).")] = None,
) -> None:
    """Export a run's trait scores (CSV/JSONL) or its agent-call records (JSONL)."""
    run_dir = require_run(need_run_dir(run, run_dir))
    if what not in ("scores", "records"):
        raise InputError(f"unknown export {what!r}; use scores or records")
    if fmt not in ("csv", "jsonl"):
        raise InputError(f"unknown format {fmt!r}; use csv or jsonl")
    target = output_file(out or run_dir / ("records.jsonl" if what == "records" else f"scores.{fmt}"))
    with closing(open_store(run_dir)) as store:
        n = store.export_records_jsonl(target) if what == "records" else _export_scores(store, fmt, target)
    console.print(f"wrote {n} rows to {target}")


def _export_scores(store: RunStore, fmt: str, target: Path) -> int:
    """Write the run's trait scores (one row per essay, trait and protocol) as CSV or JSONL, streamed (a row at a
    time, :func:`~madrag.evaluation.run.each_score_row`); the rows written."""
    from madrag.evaluation.run import each_score_row
    from madrag.files.csv_safe import write_csv
    from madrag.rubric import Rubric

    config = store.get_meta("config") or {}
    rubric = Rubric.model_validate(config.get("rubric"))
    rows, written = each_score_row(store, rubric), [0]

    def cells() -> Iterator[list[Any]]:  # the header (the first row's names), then each row's values
        for row in rows:
            if not written[0]:
                yield list(row)
            written[0] += 1
            yield list(row.values())

    if fmt == "csv":
        write_csv(target, cells())  # no row: an empty file
    else:
        with open_atomic(target) as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
                written[0] += 1
    return written[0]
