"""The Chroma store an older madrag kept its exemplar banks in, found in a cache folder and deleted on request.

Banks were kept in Chroma (``chroma.sqlite3`` and one folder per HNSW index, named by a UUID) until madrag moved
them to its SQLite store (:mod:`madrag.retrieval.sqlite_banks`; docs/differences.md, ``bank-store``). Banks are a
cache, rebuilt from the vector cache when a run needs one, so such a store is not migrated: it is simply not read.
``madrag cache list`` says it is there and how large; ``madrag cache prune`` deletes it (:func:`prune_legacy_chroma`,
when no bank of the folder is in use: :mod:`madrag.retrieval.bank_store`). Nothing here imports chromadb: the files
are recognised by their names.
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

from pydantic import BaseModel

from madrag.retrieval.bank_store import any_in_use, folder_lock

CHROMA_FILE = "chroma.sqlite3"
"""Chroma's SQLite file in a folder it persisted to."""
_SIDE_FILES = ("-wal", "-shm", "-journal")


class LegacyChroma(BaseModel):
    """An older madrag's Chroma store in a cache folder: its files, their size and when it was last written."""

    paths: list[Path]
    size_bytes: int
    last_changed: float


def _is_uuid(name: str) -> bool:
    try:
        return str(uuid.UUID(name)) == name
    except ValueError:
        return False


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def legacy_chroma(cache_dir: Path) -> LegacyChroma | None:
    """The Chroma store in ``cache_dir`` (its SQLite file with its journal files, and its index folders), or None
    when there is none. The index folders are only counted beside Chroma's SQLite file."""
    main = cache_dir / CHROMA_FILE
    if not main.is_file():
        return None
    files = [main, *(p for s in _SIDE_FILES if (p := cache_dir / f"{CHROMA_FILE}{s}").is_file())]
    indexes = sorted(p for p in cache_dir.iterdir() if p.is_dir() and _is_uuid(p.name))
    paths = [*files, *indexes]
    changed = max(p.stat().st_mtime for p in paths)
    return LegacyChroma(paths=paths, size_bytes=sum(_size(p) for p in paths), last_changed=changed)


def remove_legacy_chroma(found: LegacyChroma) -> None:
    """Delete the files of ``found`` (those still there)."""
    for path in found.paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def prune_legacy_chroma(cache_dir: Path, older_than_days: float = 0.0, dry_run: bool = False) -> LegacyChroma | None:
    """Delete the Chroma store an older madrag left in ``cache_dir`` when it was not written in the last
    ``older_than_days`` days and no process holds a lease on any bank of the folder (an older madrag still running
    would be reading it); returns what was (or, with ``dry_run``, would be) deleted, None when nothing is."""
    if not cache_dir.is_dir():
        return None
    cutoff = time.time() - older_than_days * 86400.0
    found = legacy_chroma(cache_dir)
    if found is None or found.last_changed > cutoff or any_in_use(cache_dir):
        return None
    if not dry_run:
        with folder_lock(cache_dir, write=True):  # an older madrag opens its Chroma store under this lock
            remove_legacy_chroma(found)
    return found
