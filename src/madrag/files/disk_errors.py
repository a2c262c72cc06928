"""What the disk refused, as one line: a full disk, a read-only folder, no permission, a file where a folder belongs
(an ``OSError`` or SQLite's ``OperationalError``) becomes a :class:`~madrag.errors.StorageError` that says where
and how to continue. Every record committed before stays (the run store commits each one whole)."""

from __future__ import annotations

import errno
import sqlite3

from madrag.errors import StorageError

_FULL = "the disk is full"
_KINDS: dict[int, str] = {
    errno.ENOSPC: _FULL,
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the folder is on a read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EEXIST: "a file is in the way of a folder",
    errno.ENOTDIR: "a file is in the way of a folder",
    errno.EIO: "the disk reported an I/O error",
}
_SQLITE: tuple[tuple[str, str], ...] = (
    ("disk is full", _FULL),
    ("disk i/o error", "the disk reported an I/O error (often: it is full)"),
    ("readonly", "the folder is read-only"),
    ("unable to open database", "the run store cannot be opened (a missing folder or no permission)"),
)
CONTINUE = "free space or fix the folder, then run the same command again: finished calls are kept"
"""How to continue after the disk refused a write."""


def environment_kind(exc: BaseException) -> str | None:
    """What the disk refused (plain words), or None when ``exc`` is not an environmental failure."""
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return next((kind for marker, kind in _SQLITE if marker in text), None)
    if isinstance(exc, OSError) and exc.errno is not None:
        return _KINDS.get(exc.errno)
    return None


def storage_error(exc: BaseException, where: str, then: str = CONTINUE) -> StorageError:
    """``exc`` as a one-line StorageError about ``where`` (what the disk refused, then ``then``); a failure that
    is not environmental keeps its own words.

    >>> import errno
    >>> str(storage_error(OSError(errno.ENOSPC, "No space left on device"), "runs/a", "resume"))
    'runs/a: the disk is full; resume'
    """
    kind = environment_kind(exc) or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return StorageError(f"{where}: {kind}; {then}")
