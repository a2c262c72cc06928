"""The teacher's list of runs: runs started from the pages are marked so (``from-pages`` beside the run), so
runs made through the API do not clutter it, and a teacher can archive a run (``archived``), which hides it
from the list (its files all stay; archiving again brings it back)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

FROM_PAGES = "from-pages"
ARCHIVED = "archived"


def mark_from_pages(run_dir: Path) -> None:
    if run_dir.is_dir():
        (run_dir / FROM_PAGES).touch()


def set_archived(run_dir: Path, archived: bool) -> None:
    path = run_dir / ARCHIVED
    if archived:
        path.touch()
    else:
        path.unlink(missing_ok=True)


def split(runs: list[dict[str, Any]], root: Path) -> dict[str, list[dict[str, Any]]]:
    """The runs the teacher's list shows, those made through the API, and the archived ones."""
    out: dict[str, list[dict[str, Any]]] = {"shown": [], "api": [], "archived": []}
    for run in runs:
        folder = root / run["id"]
        key = "archived" if (folder / ARCHIVED).is_file() else "shown" if (folder / FROM_PAGES).is_file() else "api"
        out[key].append(run)
    return out
