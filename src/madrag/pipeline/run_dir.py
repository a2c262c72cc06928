"""What a scoring job needs of its folders: they are folders (checked before anything is written), what the disk
refuses while the run writes is one line (:class:`~madrag.errors.StorageError`), and the prompt templates a run
was made with are kept in it (``<run dir>/prompts/``), so it continues with the same texts under any later release.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from madrag.agents.prompts import PromptLibrary
from madrag.errors import InputError
from madrag.files.atomic import write_text_atomic
from madrag.files.disk_errors import environment_kind, storage_error

PROMPTS = "prompts"
"""The folder of a run directory that keeps the run's prompt templates, one ``<name>.txt`` each."""


def check_folders(run_dir: Path, cache_dir: Path) -> None:
    """The run and cache directories are folders (or do not exist yet): a one-line InputError otherwise."""
    for option, folder in (("run directory", run_dir), ("cache directory", cache_dir)):
        if folder.exists() and not folder.is_dir():
            raise InputError(f"{option} {folder} is a file, not a folder: give a folder (new or existing)")


@contextlib.contextmanager
def on_disk_errors(where: str) -> Iterator[None]:
    """What the disk refuses inside (full, read-only, no permission, a file in the way) raised as a one-line
    StorageError naming the file when known, else ``where``; other errors pass unchanged."""
    try:
        yield
    except (OSError, sqlite3.OperationalError) as exc:
        if environment_kind(exc) is None:
            raise
        name = getattr(exc, "filename", None)
        raise storage_error(exc, str(name) if name else where) from exc


def recorded_prompts(run_dir: Path) -> Path | None:
    """The run's own copy of its prompt templates, when it has one."""
    folder = run_dir / PROMPTS
    return folder if folder.is_dir() else None


def prompt_names_of(config: dict[str, Any]) -> list[str]:
    """The names of the templates a run's configuration records."""
    names = config.get("prompts") or []
    return sorted(names) if isinstance(names, list | dict) else []


def keep_prompts(run_dir: Path, prompts: PromptLibrary, names: list[str]) -> None:
    """Write each template the run uses into ``<run dir>/prompts/``, all or none: written into a folder of their
    own, then renamed into place (a full disk never leaves a cut text that a resume would take for the run's).
    A run that has the folder keeps it as it is: it holds the texts the run was made with."""
    folder = run_dir / PROMPTS
    if folder.exists():
        return
    building = run_dir / f".{PROMPTS}-{os.getpid()}"
    try:
        for name in names:
            target = building / f"{name}.txt"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(prompts.text(name) + "\n", encoding="utf-8")
        building.rename(folder)
    finally:
        shutil.rmtree(building, ignore_errors=True)


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (its folder made) whole or not at all (:mod:`madrag.files.atomic`): a full disk
    leaves no cut file that a resume would read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)
