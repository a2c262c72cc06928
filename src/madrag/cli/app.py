"""The ``madrag`` typer app: every command registered in one place (:data:`COMMANDS`), and :func:`main`, the
console entry point that turns a :class:`~madrag.errors.MadragError` into one line on stderr and exit code 2.

The commands live in one module per group: :mod:`~madrag.cli.score` (score, demo), :mod:`~madrag.cli.runs`,
:mod:`~madrag.cli.evaluate` (eval, errors, report), :mod:`~madrag.cli.compare`, :mod:`~madrag.cli.costs`,
:mod:`~madrag.cli.serve`, and :mod:`~madrag.cli.paper`, the group of the commands only reproducing the papers
needs (the confidence study, eval-consensus, the coded error tables, the baselines). ``madrag --help`` lists them
by audience (:data:`PANELS`).
Old names (``ablate``, ``ablate-consensus``, and the paper commands' top-level names) stay as hidden aliases
that say their new form on stderr.

A command's module is imported only when that command runs (or shows its own help): the scoring stack pulls
pandas, scipy and the pydantic models, seconds that ``madrag --help`` or ``madrag data path`` should not pay.
``madrag --help`` lists each command with its help read from its module's source (:mod:`~madrag.cli.lazy`).
"""

from __future__ import annotations

import sqlite3
import sys
from dataclasses import replace

from madrag.cli.lazy import LazyCommand, LazyGroup, lazy_app
from madrag.cli.paper import PAPER_COMMANDS
from madrag.errors import MAX_ECHO, MadragError, clip
from madrag.extras import missing_for
from madrag.files.disk_errors import environment_kind, storage_error

SCORING, TEACHERS, PAPERS = "Scoring and results", "Teachers: web app and HTTP API", "Reproducing the papers"
PANELS = (SCORING, TEACHERS, PAPERS)
"""The help panels of ``madrag --help``: who each command is for."""


# Every command, in the order ``madrag --help`` lists them: its module under madrag.cli, the function (or the
# typer app of a command group) there, the command class that parses its options, if not typer's own, and its
# help panel; then the hidden aliases, old names kept working.
_SCORE_COMMAND = "madrag.cli.score_options:ScoreCommand"
COMMANDS: dict[str, LazyCommand] = {
    "score": LazyCommand("score", "score", _SCORE_COMMAND, SCORING),
    "resume": LazyCommand("resume", "resume_command", panel=SCORING),
    "eval": LazyCommand("evaluate", "eval_command", panel=SCORING),
    "errors": LazyCommand("evaluate", "errors_command", panel=SCORING),
    "report": LazyCommand("evaluate", "report_command", panel=SCORING),
    "compare": LazyCommand("compare", "compare_command", panel=SCORING),
    "costs": LazyCommand("costs", "costs_command", panel=SCORING),
    "audit": LazyCommand("audit", "audit_command", panel=SCORING),
    "runs": LazyCommand("runs", "runs_app", panel=SCORING),
    "demo": LazyCommand("score", "demo", panel=SCORING),
    "data": LazyCommand("data", "data_app", panel=SCORING),
    "cache": LazyCommand("cache", "cache_app", panel=SCORING),
    "serve": LazyCommand("serve", "serve_command", panel=TEACHERS),
    "lms": LazyCommand("lms", "lms_app", panel=TEACHERS),
    "paper": LazyCommand("paper", "paper_app", panel=PAPERS),
    "ablate": LazyCommand("score", "ablate", _SCORE_COMMAND, renamed="score --protocols paper-ablation"),
    "ablate-consensus": LazyCommand(
        "score", "ablate_consensus", _SCORE_COMMAND, renamed="score --protocols consensus-ablation"
    ),
    **{name: replace(lazy, renamed=f"paper {name}") for name, lazy in PAPER_COMMANDS.items() if name != "error-tables"},
}


class MadragGroup(LazyGroup):
    """The top-level group: the commands of :data:`COMMANDS`, each imported when first needed."""

    lazy_commands = COMMANDS


app = lazy_app(
    MadragGroup,
    help="Training-free, rubric-based analytic essay scoring: Advocate -> Skeptic -> Judge per trait, "
    "the Judge grounded by retrieved scored exemplars (MADRAG).",
    pretty_exceptions_enable=False,
)


def main() -> None:
    """Console entry point: a MadragError is one line on stderr and exit code 2; so is an option value the
    settings models refuse, a package of an extra that is not installed (naming the extra), and what the disk
    refused (full, read-only, no permission) wherever it was met."""
    try:
        app()
    except MadragError as exc:
        _fail(str(exc))
    except ModuleNotFoundError as exc:  # a package of an extra that is not installed, imported at a module's top
        missing = missing_for(exc)
        if missing is None:
            raise
        _fail(str(missing))
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
