"""The ``madrag`` typer app: every command registered in one place (:data:`COMMANDS`), and :func:`main`, the
console entry point that turns a :class:`~madrag.errors.MadragError` into one line on stderr and exit code 2.

The commands live in one module per group: :mod:`~madrag.cli.score` (score, ablate, ablate-consensus, demo),
:mod:`~madrag.cli.runs`, :mod:`~madrag.cli.baseline`,
:mod:`~madrag.cli.evaluate` (eval, errors, report), :mod:`~madrag.cli.costs`,
:mod:`~madrag.cli.confidence` and :mod:`~madrag.cli.consensus` (eval-consensus).

A command's module is imported only when that command runs (or shows its own help): the scoring stack pulls
pandas, scipy and the pydantic models, seconds that ``madrag --help`` or ``madrag data path`` should not pay.
``madrag --help`` lists each command with its help read from its module's source (:mod:`~madrag.cli.lazy`).
"""

from __future__ import annotations

import sqlite3
import sys

import typer

from madrag.cli.lazy import LazyCommand, LazyGroup
from madrag.disk_errors import environment_kind, storage_error
from madrag.errors import MAX_ECHO, MadragError, clip

# Every command, in the order ``madrag --help`` lists them: its module under madrag.cli, the function (or the
# typer app of a command group) there, and the command class that parses its options, if not typer's own.
_SCORE_COMMAND = "madrag.cli.score_options:ScoreCommand"
COMMANDS: dict[str, LazyCommand] = {
    "score": LazyCommand("score", "score", _SCORE_COMMAND),
    "resume": LazyCommand("resume", "resume_command"),
    "ablate": LazyCommand("score", "ablate", _SCORE_COMMAND),
    "ablate-consensus": LazyCommand("score", "ablate_consensus", _SCORE_COMMAND),
    "baseline": LazyCommand("baseline", "baseline_command"),
    "eval": LazyCommand("evaluate", "eval_command"),
    "errors": LazyCommand("evaluate", "errors_command"),
    "report": LazyCommand("evaluate", "report_command"),
    "costs": LazyCommand("costs", "costs_command"),
    "audit": LazyCommand("audit", "audit_command"),
    "eval-consensus": LazyCommand("consensus", "eval_consensus_command"),
    "demo": LazyCommand("score", "demo"),
    "serve": LazyCommand("serve", "serve_command"),
    "runs": LazyCommand("runs", "runs_app"),
    "confidence": LazyCommand("confidence", "confidence_app"),
    "data": LazyCommand("data", "data_app"),
    "cache": LazyCommand("cache", "cache_app"),
}


class MadragGroup(LazyGroup):
    """The top-level group: the commands of :data:`COMMANDS`, each imported when first needed."""

    lazy_commands = COMMANDS


app = typer.Typer(
    cls=MadragGroup,
    help="Training-free, rubric-based analytic essay scoring: Advocate -> Skeptic -> Judge per trait, "
    "the Judge grounded by retrieved scored exemplars (MADRAG).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _group() -> None:
    # typer makes a group of an app with a callback; the commands themselves come from MadragGroup
    pass


def main() -> None:
    """Console entry point: a MadragError is one line on stderr and exit code 2; so is an option value the
    settings models refuse, and what the disk refused (full, read-only, no permission) wherever it was met."""
    try:
        app()
    except MadragError as exc:
        _fail(str(exc))
    except (OSError, sqlite3.OperationalError) as exc:
        if environment_kind(exc) is None:
            raise
        _fail(str(storage_error(exc, str(getattr(exc, "filename", None) or "madrag"))))
    except ValueError as exc:
        # a pydantic ValidationError is a ValueError; pydantic is imported here only if a command loaded it
        if "pydantic_core" not in sys.modules:
            raise
        from pydantic import ValidationError

        from madrag.api.arguments import validation_line

        if not isinstance(exc, ValidationError):
            raise
        _fail(validation_line(exc))


def _fail(message: str) -> None:
    print(f"error: {clip(message, 4 * MAX_ECHO)}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
