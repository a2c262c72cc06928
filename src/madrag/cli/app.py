"""The ``madrag`` typer app: every command group registered in one place, and :func:`main`, the console entry
point that turns a :class:`~madrag.errors.MadragError` into one line on stderr and exit code 2.

The commands live in one module per group: :mod:`~madrag.cli.score` (score, ablate, ablate-consensus, demo),
:mod:`~madrag.cli.runs`, :mod:`~madrag.cli.baseline`,
:mod:`~madrag.cli.evaluate` (eval, errors, report), :mod:`~madrag.cli.costs`,
:mod:`~madrag.cli.confidence` and :mod:`~madrag.cli.consensus` (eval-consensus).
"""

from __future__ import annotations

import sqlite3
import sys

import typer
from pydantic import ValidationError

from madrag.api.arguments import validation_line
from madrag.cli.audit import audit_command
from madrag.cli.baseline import baseline_command
from madrag.cli.cache import cache_app
from madrag.cli.confidence import confidence_app
from madrag.cli.consensus import eval_consensus_command
from madrag.cli.costs import costs_command
from madrag.cli.data import data_app
from madrag.cli.evaluate import errors_command, eval_command, report_command
from madrag.cli.resume import resume_command
from madrag.cli.runs import runs_app
from madrag.cli.score import ablate, ablate_consensus, demo, score
from madrag.cli.score_options import ScoreCommand
from madrag.cli.serve import serve_command
from madrag.disk_errors import environment_kind, storage_error
from madrag.errors import MAX_ECHO, MadragError, clip

app = typer.Typer(
    help="Training-free, rubric-based analytic essay scoring: Advocate -> Skeptic -> Judge per trait, "
    "the Judge grounded by retrieved scored exemplars (MADRAG).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(runs_app, name="runs")
app.command(cls=ScoreCommand)(score)
app.command("resume")(resume_command)
app.command("ablate", cls=ScoreCommand)(ablate)
app.command("ablate-consensus", cls=ScoreCommand)(ablate_consensus)
app.command("baseline")(baseline_command)
app.command("eval")(eval_command)
app.command("errors")(errors_command)
app.command("report")(report_command)
app.command("costs")(costs_command)
app.command("audit")(audit_command)
app.add_typer(confidence_app, name="confidence")
app.command("eval-consensus")(eval_consensus_command)
app.command()(demo)
app.command("serve")(serve_command)
app.add_typer(data_app, name="data")
app.add_typer(cache_app, name="cache")


def main() -> None:
    """Console entry point: a MadragError is one line on stderr and exit code 2; so is what the disk refused
    (full, read-only, no permission) wherever it was met."""
    try:
        app()
    except MadragError as exc:
        _fail(str(exc))
    except ValidationError as exc:  # an option value the settings models refuse
        _fail(validation_line(exc))
    except (OSError, sqlite3.OperationalError) as exc:
        if environment_kind(exc) is None:
            raise
        _fail(str(storage_error(exc, str(getattr(exc, "filename", None) or "madrag"))))


def _fail(message: str) -> None:
    print(f"error: {clip(message, 4 * MAX_ECHO)}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
