"""Where the CLI writes: the stdout and stderr consoles, and the progress bar of a long, resumable job."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from madrag.paper.beside_paper import BesidePaper

T = TypeVar("T")

console = Console()  # results: tables, summaries, paths written
err = Console(stderr=True)  # progress, notes and interruptions


def progress_bar() -> Progress:
    """A progress bar on stderr: the task's description, the bar, done of total and the elapsed time."""
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err
    )


def run_with_progress(progress: Progress, work: Coroutine[Any, Any, T], interrupted: Callable[[], str]) -> T:
    """Run ``work``; the bar shows from the moment the work starts it (``progress.start()``, once its input is
    loaded), so an input error before that is one line on stderr, not an empty bar and the line. Ctrl-C prints
    ``interrupted()`` on stderr and exits with code 130 (what was finished is already saved, so the same command
    resumes)."""
    try:
        return asyncio.run(work)
    except KeyboardInterrupt:
        progress.stop()
        err.print(interrupted())
        raise typer.Exit(130) from None
    finally:
        progress.stop()


def show_beside(result: BesidePaper, folder: Path) -> None:
    """Print a run's figures beside a paper's (a ``BesidePaper``: its tables and notes, the missing figures
    counted) and save ``paper.csv`` / ``paper.md`` in ``folder``."""
    from madrag.evaluation.tables import rich_frame
    from madrag.paper.beside_paper import beside_display, save_beside

    for title, frame in beside_display(result).items():
        console.print(rich_frame(title, frame))
    for note in result.all_notes():
        console.print(f"note: {note}", markup=False)
    save_beside(result, folder)
