"""Where a command writes its output (``--out``, or its default in the run folder): the folder is created when
missing, and a place that cannot be written is one line (:class:`~madrag.errors.InputError`) before any work."""

from __future__ import annotations

import os
from pathlib import Path

from madrag.errors import InputError

_HINT = "give --out a writable place"


def _make_folder(folder: Path) -> None:
    """Create ``folder`` (and its parents); an InputError when it cannot be, or cannot be written in."""
    if folder.exists() and not folder.is_dir():
        raise InputError(f"cannot write in {folder}: it is a file, not a folder; {_HINT}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create folder {folder}: {exc.strerror or exc}; {_HINT}") from exc
    if not os.access(folder, os.W_OK | os.X_OK):  # also false on a read-only filesystem, even for root
        raise InputError(f"cannot write in {folder}: permission denied or a read-only filesystem; {_HINT}")


def output_file(path: Path) -> Path:
    """``path``, a file about to be written, with its folder created; an InputError when ``path`` is a folder,
    or its folder cannot be created or written in, or it exists and cannot be overwritten."""
    if path.is_dir():
        raise InputError(f"cannot write {path}: it is a folder; give a file name")
    _make_folder(path.parent)
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"cannot overwrite {path}: permission denied or a read-only filesystem; {_HINT}")
    return path


def output_dir(path: Path) -> Path:
    """``path``, a folder about to be written in, created when missing; an InputError when it is a file or
    cannot be created or written in."""
    _make_folder(path)
    return path
